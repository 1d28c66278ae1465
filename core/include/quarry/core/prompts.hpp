// Prompt templates: the files of prompts/ (compiled in, overridable from a
// folder at run time) rendered with named variables.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::core {

/// Values of a template's variables by name.
using prompt_vars = std::map<std::string, std::string, std::less<>>;

/// Why a template could not be rendered or loaded.
struct prompt_error {
  std::string message;
};

/// Renders `text`: every `{name}` (a lower-case identifier in braces) is
/// replaced by `vars[name]`; all other characters, other braces included,
/// are copied. A placeholder without a value is an error naming it and
/// `template_name`. Values are inserted as they are (never re-scanned).
std::variant<std::string, prompt_error> render_template(std::string_view text,
                                                        const prompt_vars& vars,
                                                        std::string_view template_name = {});

/// Returns the placeholder names of `text` in order of first appearance.
std::vector<std::string> template_variables(std::string_view text);

/// The largest prompt file @ref prompt_library::load_overrides reads, in
/// bytes (1 MiB).
inline constexpr size_t max_prompt_file_size = 1024 * 1024;

/// A set of named templates.
class prompt_library {
public:
  /// The templates of prompts/ as they were at build time.
  static prompt_library embedded();

  /// Replaces templates with the files `<name>.md` or `<name>.txt` found in
  /// `dir`. Only names the library already has may be replaced; a file whose
  /// template uses a variable the built-in one does not know is refused, as
  /// is one that is not a regular file or a link to one (a FIFO, a folder, a
  /// dangling link) or is larger than @ref max_prompt_file_size bytes.
  /// Returns the number of templates replaced, or an error (nothing is
  /// replaced then).
  std::variant<size_t, prompt_error> load_overrides(const std::string& dir);

  /// Returns the template named `name`, if any.
  const std::string* find(std::string_view name) const;

  /// Renders the template `name` (see render_template).
  std::variant<std::string, prompt_error> render(std::string_view name,
                                                 const prompt_vars& vars) const;

  /// All template names, sorted.
  std::vector<std::string> names() const;

  /// Adds or replaces a template (tests, embedders).
  void set(std::string name, std::string text);

private:
  std::map<std::string, std::string, std::less<>> templates_;
};

/// The date as the prompts state it: "Saturday August 22, 2026" (local time,
/// two-digit day).
std::string prompt_date(std::chrono::system_clock::time_point when);

} // namespace quarry::core
