// Loading of the YAML configuration (see config.hpp): file lookup, parsing,
// ${VAR} substitution, --set overrides and validation against the schema.

#include "quarry/core/config.hpp"

#include "quarry/core/config_limits.hpp"

#include "quarry/core/duration.hpp"
#include "quarry/core/regular_file.hpp"
#include "quarry/sdk/strings.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>
#include <variant>

#include <sys/stat.h>

namespace quarry::core {

namespace {

using json = nlohmann::json;

// Limits that keep hostile input from exhausting the stack or memory.
constexpr int max_depth = 64;
constexpr size_t max_nodes = 100'000;
// Most errors reported; hostile input can otherwise produce one per value.
constexpr size_t max_errors = 100;
// Longest unknown key for which a suggestion is computed.
constexpr size_t max_suggest = 64;
// Longest value quoted in an error message.
constexpr size_t max_quoted = 60;

// -- small helpers ------------------------------------------------------------

std::string join_path(std::string_view prefix, std::string_view key) {
  if (prefix.empty())
    return std::string{key};
  std::string result;
  result.reserve(prefix.size() + key.size() + 1);
  result += prefix;
  result += '.';
  result += key;
  return result;
}

// Quotes a value for a message: JSON-style, invalid UTF-8 replaced,
// shortened to max_quoted characters.
std::string quote(std::string_view text) {
  std::string shortened{text.substr(0, max_quoted)};
  auto result = json(shortened).dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > max_quoted)
    result.insert(result.size() - 1, "...");
  return result;
}

// Returns the offset of the first byte that is not valid UTF-8 or is a
// control character other than tab, line feed and carriage return.
std::optional<size_t> find_bad_byte(std::string_view x) {
  size_t i = 0;
  while (i < x.size()) {
    auto c = static_cast<unsigned char>(x[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
      return i;
    // Overlong forms, surrogates and values beyond U+10FFFF are invalid.
    auto n = sdk::utf8_sequence_length(x, i);
    if (n == 0)
      return i;
    i += n;
  }
  return std::nullopt;
}

int line_of_offset(std::string_view x, size_t offset) {
  return 1 + static_cast<int>(std::count(x.begin(), x.begin() + offset, '\n'));
}

std::optional<int64_t> parse_int(std::string_view x) {
  x = sdk::trim(x);
  if (!x.empty() && x.front() == '+')
    x.remove_prefix(1);
  if (x.empty() || x.front() == '+')
    return std::nullopt;
  int64_t result = 0;
  auto [ptr, ec] = std::from_chars(x.data(), x.data() + x.size(), result);
  if (ec != std::errc{} || ptr != x.data() + x.size())
    return std::nullopt;
  return result;
}

std::optional<bool> parse_bool(std::string_view x) {
  auto str = sdk::to_lower(sdk::trim(x));
  if (str == "true" || str == "yes" || str == "on")
    return true;
  if (str == "false" || str == "no" || str == "off")
    return false;
  return std::nullopt;
}

bool is_identifier(std::string_view x) {
  if (x.empty())
    return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(x.front()))
    return false;
  return std::all_of(x.begin(), x.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

// The text a scalar has with every environment variable unset: what the
// file itself holds. `${NAME}` gives nothing, `${NAME:-default}` its
// default, `$$` a `$`. Malformed references are kept as written.
std::string written_text(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$' || i + 1 == text.size()) {
      out += text[i];
    } else if (text[i + 1] == '$') {
      out += '$';
      ++i;
    } else if (text[i + 1] == '{') {
      auto close = text.find('}', i + 2);
      if (close == std::string_view::npos) {
        out += text.substr(i);
        break;
      }
      auto inner = text.substr(i + 2, close - i - 2);
      if (auto sep = inner.find(":-"); sep != std::string_view::npos)
        out += inner.substr(sep + 2);
      i = close;
    } else {
      out += '$';
    }
  }
  return out;
}

// Whether `written` (see written_text) puts a secret into the file: any
// text, except a URL without credentials (e.g. a proxy `http://proxy:3128`;
// `http://user:pass@proxy:3128` counts).
bool holds_secret(std::string_view written) {
  if (written.empty())
    return false;
  auto scheme = written.find("://");
  if (scheme == std::string_view::npos)
    return true;
  auto authority = written.substr(scheme + 3);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  return authority.find('@') != std::string_view::npos;
}

// Edit distance with adjacent transpositions (optimal string alignment).
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = sdk::ascii_lower(a[i - 1]) == sdk::ascii_lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && sdk::ascii_lower(a[i - 1]) == sdk::ascii_lower(b[j - 2])
          && sdk::ascii_lower(a[i - 2]) == sdk::ascii_lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// -- the internal tree --------------------------------------------------------

struct entry;

// A YAML value with its location. Scalars keep their text and whether they
// were plain (unquoted, untagged), which decides type inference.
struct node {
  enum class kind { null, scalar, list, map };
  kind type = kind::null;
  std::string text;
  bool plain = false;
  // Set if an error was already reported for this scalar (e.g. a malformed
  // ${...}); validation then skips it to avoid follow-up errors.
  bool bad = false;
  // Set for a scalar of the file whose written text is a value of its own,
  // not only `${NAME}` references (see written_text).
  bool literal = false;
  std::vector<node> items;
  std::vector<entry> entries;
  std::string_view file;
  int line = 0;
};

struct entry {
  std::string key;
  std::string_view file;
  int line = 0;
  node value;
};

const char* kind_name(const node& x) {
  switch (x.type) {
    case node::kind::null:
      return "null";
    case node::kind::scalar:
      return "string";
    case node::kind::list:
      return "list";
    case node::kind::map:
      return "map";
  }
  return "null";
}

// Describes a value for "expected X, got Y" messages without revealing
// secrets.
std::string describe(const node& x, bool secret) {
  if (x.type != node::kind::scalar)
    return kind_name(x);
  if (secret)
    return "a value that is hidden because the key is a secret";
  return quote(x.text);
}

const entry* find_entry(const node& map, std::string_view key) {
  if (map.type != node::kind::map)
    return nullptr;
  for (const auto& e : map.entries)
    if (e.key == key)
      return &e;
  return nullptr;
}

// Infers the JSON type of a value inside a plugin instance: plain scalars
// become booleans, integers, floats or null; quoted scalars stay strings.
json infer(const node& x) {
  switch (x.type) {
    case node::kind::null:
      return json();
    case node::kind::list: {
      auto result = json::array();
      for (const auto& item : x.items)
        result.push_back(infer(item));
      return result;
    }
    case node::kind::map: {
      auto result = json::object();
      for (const auto& e : x.entries)
        result[e.key] = infer(e.value);
      return result;
    }
    case node::kind::scalar:
      break;
  }
  if (!x.plain)
    return json(x.text);
  const auto& str = x.text;
  if (str == "true" || str == "True" || str == "TRUE")
    return json(true);
  if (str == "false" || str == "False" || str == "FALSE")
    return json(false);
  // Decimal integers and floats: [-+]? digits [. digits] [e [-+] digits].
  std::string_view v = str;
  if (!v.empty() && (v.front() == '-' || v.front() == '+'))
    v.remove_prefix(1);
  size_t i = 0;
  auto digits = [&] {
    auto start = i;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9')
      ++i;
    return i - start;
  };
  auto whole = digits();
  size_t fraction = 0;
  bool is_float = false;
  if (i < v.size() && v[i] == '.') {
    ++i;
    fraction = digits();
    is_float = true;
  }
  if (whole + fraction == 0)
    return json(str);
  if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    ++i;
    if (i < v.size() && (v[i] == '-' || v[i] == '+'))
      ++i;
    if (digits() == 0)
      return json(str);
    is_float = true;
  }
  if (i != v.size())
    return json(str);
  if (!is_float) {
    if (auto value = parse_int(str))
      return json(*value);
    return json(str);
  }
  double value = 0;
  auto first = str.data() + (str.front() == '+' ? 1 : 0);
  auto [ptr, ec] = std::from_chars(first, str.data() + str.size(), value);
  if (ec != std::errc{} || ptr != str.data() + str.size() || !std::isfinite(value))
    return json(str);
  return json(value);
}

// -- diagnostics --------------------------------------------------------------

// Collects errors (at most max_errors) and warnings.
struct diagnostics {
  std::vector<config_error> errors;
  std::vector<std::string> warnings;

  void error(std::string_view file, int line, std::string key, std::string message) {
    if (errors.size() == max_errors) {
      errors.push_back(
        config_error{std::string{file}, 0, "", "too many errors; stopped reporting"});
      return;
    }
    if (errors.size() > max_errors)
      return;
    errors.push_back(
      config_error{std::string{file}, std::max(line, 0), std::move(key), std::move(message)});
  }

  void warning(std::string_view file, int line, std::string key, std::string message) {
    config_error tmp{std::string{file}, std::max(line, 0), std::move(key), std::move(message)};
    warnings.push_back(tmp.to_string());
  }
};

// -- YAML events to the internal tree -----------------------------------------

size_t count_nodes(const node& x) {
  size_t result = 1;
  for (const auto& item : x.items)
    result += count_nodes(item);
  for (const auto& e : x.entries)
    result += count_nodes(e.value);
  return result;
}

// Builds the internal tree from yaml-cpp's parser events. Using events
// instead of YAML::Node gives us bounded depth and size, alias expansion
// with a budget, no reference cycles, and the scalar style (plain or quoted).
class tree_builder : public YAML::EventHandler {
public:
  // `use_marks` selects whether lines come from the YAML marks (files) or
  // are 0 (--set values); `base_path` prefixes key paths in errors.
  tree_builder(diagnostics& diag, std::string_view file, bool use_marks, std::string base_path,
               size_t& budget)
    : diag_(diag),
      file_(file),
      use_marks_(use_marks),
      base_path_(std::move(base_path)),
      budget_(budget) {
    // nop
  }

  // Returns the document's root, or nothing if the document was empty or
  // an error made the tree unusable.
  std::optional<node> result() && {
    if (failed_)
      return std::nullopt;
    return std::move(root_);
  }

  void OnDocumentStart(const YAML::Mark&) override {
    // nop
  }

  void OnDocumentEnd() override {
    // nop
  }

  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override {
    if (failed_ || !spend(1))
      return;
    node x;
    x.file = file_;
    finish(std::move(x), anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (failed_)
      return;
    auto i = anchors_.find(anchor);
    if (i == anchors_.end()) {
      fail(line(mark), "an alias refers to a node that contains it");
      return;
    }
    if (!spend(i->second.second))
      return;
    finish(node{i->second.first}, 0);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    if (failed_ || !spend(1))
      return;
    node x;
    x.type = node::kind::scalar;
    x.text = value;
    x.plain = tag == "?";
    x.file = file_;
    x.line = line(mark);
    finish(std::move(x), anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(node::kind::list, mark, anchor);
  }

  void OnSequenceEnd() override {
    close();
  }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(node::kind::map, mark, anchor);
  }

  void OnMapEnd() override {
    close();
  }

private:
  struct frame {
    node value;
    YAML::anchor_t anchor = 0;
    std::string path;
    // Maps alternate between a key and its value.
    bool expect_key = true;
    bool key_ok = false;
    std::string key;
    int key_line = 0;
    std::map<std::string, int> seen;
  };

  int line(const YAML::Mark& mark) const {
    return use_marks_ && !mark.is_null() ? mark.line + 1 : 0;
  }

  void fail(int at, std::string message) {
    diag_.error(file_, at, current_path(), std::move(message));
    failed_ = true;
  }

  bool spend(size_t n) {
    if (n <= budget_) {
      budget_ -= n;
      return true;
    }
    fail(stack_.empty() ? 0 : stack_.back().value.line,
         "too many values (more than " + std::to_string(max_nodes) + "), e.g. from aliases");
    return false;
  }

  // Path of the node that the next event creates.
  std::string current_path() const {
    if (stack_.empty())
      return base_path_;
    const auto& parent = stack_.back();
    if (parent.value.type == node::kind::list)
      return parent.path + "[" + std::to_string(parent.value.items.size()) + "]";
    if (parent.expect_key)
      return parent.path;
    return join_path(parent.path, parent.key);
  }

  void open(node::kind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (failed_ || !spend(1))
      return;
    if (stack_.size() >= static_cast<size_t>(max_depth)) {
      fail(line(mark), "nested deeper than " + std::to_string(max_depth) + " levels");
      return;
    }
    frame f;
    f.value.type = kind;
    f.value.file = file_;
    f.value.line = line(mark);
    f.anchor = anchor;
    f.path = current_path();
    stack_.push_back(std::move(f));
  }

  void close() {
    if (failed_ || stack_.empty())
      return;
    auto f = std::move(stack_.back());
    stack_.pop_back();
    finish(std::move(f.value), f.anchor);
  }

  // Attaches a complete node to its parent (or makes it the root).
  void finish(node x, YAML::anchor_t anchor) {
    if (anchor != 0)
      anchors_[anchor] = std::make_pair(x, count_nodes(x));
    if (stack_.empty()) {
      root_ = std::move(x);
      return;
    }
    auto& parent = stack_.back();
    if (parent.value.type == node::kind::list) {
      parent.value.items.push_back(std::move(x));
      return;
    }
    if (parent.expect_key) {
      parent.expect_key = false;
      parent.key_line = x.line > 0 ? x.line : parent.value.line;
      parent.key_ok = x.type == node::kind::scalar && !x.text.empty();
      if (parent.key_ok) {
        parent.key = std::move(x.text);
      } else {
        diag_.error(file_, parent.key_line, parent.path,
                    std::string{"keys must be non-empty strings, got "}
                      + (x.type == node::kind::scalar ? "an empty string"
                         : x.type == node::kind::null ? "null"
                         : x.type == node::kind::list ? "a list"
                                                      : "a map"));
      }
      return;
    }
    parent.expect_key = true;
    if (!parent.key_ok)
      return;
    auto [pos, added] = parent.seen.emplace(parent.key, parent.key_line);
    if (!added) {
      diag_.error(file_, parent.key_line, join_path(parent.path, parent.key),
                  "duplicate key (first defined on line " + std::to_string(pos->second) + ")");
      return;
    }
    if (x.type == node::kind::null || x.line == 0)
      x.line = parent.key_line;
    entry e;
    e.key = std::move(parent.key);
    e.file = file_;
    e.line = parent.key_line;
    e.value = std::move(x);
    parent.value.entries.push_back(std::move(e));
  }

  diagnostics& diag_;
  std::string_view file_;
  bool use_marks_;
  std::string base_path_;
  size_t& budget_;
  bool failed_ = false;
  std::vector<frame> stack_;
  std::optional<node> root_;
  std::map<YAML::anchor_t, std::pair<node, size_t>> anchors_;
};

// Notes where a second document starts, building nothing.
class document_probe : public YAML::EventHandler {
public:
  int line = 0;

  void OnDocumentStart(const YAML::Mark& mark) override {
    line = mark.is_null() ? 0 : mark.line + 1;
  }

  void OnDocumentEnd() override {
    // nop
  }

  void OnNull(const YAML::Mark&, YAML::anchor_t) override {
    // nop
  }

  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {
    // nop
  }

  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    // nop
  }

  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    // nop
  }

  void OnSequenceEnd() override {
    // nop
  }

  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    // nop
  }

  void OnMapEnd() override {
    // nop
  }
};

// -- the loader ---------------------------------------------------------------

class loader {
public:
  loader(std::string file_label, config_getenv_fn getenv)
    : file_label_(std::move(file_label)), getenv_(std::move(getenv)) {
    if (!getenv_)
      getenv_ = [](const std::string& name) -> std::optional<std::string> {
        if (auto value = ::getenv(name.c_str()))
          return std::string{value};
        return std::nullopt;
      };
  }

  diagnostics diag;

  void error(std::string_view file, int line, std::string key, std::string message) {
    diag.error(file, line, std::move(key), std::move(message));
  }

  void warning(std::string_view file, int line, std::string key, std::string message) {
    diag.warning(file, line, std::move(key), std::move(message));
  }

  // -- reading YAML -----------------------------------------------------------

  // Parses one YAML document; reports syntax errors and a second document.
  // Returns nothing for an empty document or after an error.
  std::optional<node> parse_yaml(std::string_view text, std::string_view file, bool use_marks,
                                 const std::string& path) {
    try {
      std::istringstream in{std::string{text}};
      YAML::Parser parser{in};
      tree_builder builder{diag, file, use_marks, path, budget_};
      if (!parser.HandleNextDocument(builder))
        return std::nullopt;
      // Never YAML::LoadAll: it loops forever on some malformed input.
      document_probe probe;
      if (parser.HandleNextDocument(probe)) {
        error(file, use_marks ? probe.line : 0, path,
              "more than one YAML document; a configuration holds one");
        return std::nullopt;
      }
      auto result = std::move(builder).result();
      if (result)
        substitute_tree(*result, path);
      return result;
    } catch (const YAML::ParserException& e) {
      error(file, use_marks && !e.mark.is_null() ? e.mark.line + 1 : 0, path,
            (use_marks ? "YAML syntax error: " : "invalid YAML value: ") + e.msg);
    } catch (const YAML::Exception& e) {
      error(file, use_marks && !e.mark.is_null() ? e.mark.line + 1 : 0, path,
            "YAML error: " + e.msg);
    }
    return std::nullopt;
  }

  // Parses the file's text into `root_`.
  void parse_file(std::string_view text) {
    root_.type = node::kind::map;
    root_.file = file_label_;
    if (auto bad = find_bad_byte(text)) {
      error(file_label_, line_of_offset(text, *bad), "",
            "not valid UTF-8 text, or contains a control character");
      return;
    }
    auto doc = parse_yaml(text, file_label_, true, "");
    if (!doc || doc->type == node::kind::null)
      return;
    if (doc->type != node::kind::map) {
      error(file_label_, doc->line > 0 ? doc->line : 1, "",
            std::string{"the top level must be a map of sections, got "} + kind_name(*doc));
      return;
    }
    root_ = std::move(*doc);
  }

  // Parses and applies one `--set key.path=value`.
  void apply_override(std::string_view text, size_t index) {
    auto file = config_override_label;
    auto where = "malformed override #" + std::to_string(index + 1) + ": ";
    auto eq = text.find('=');
    if (eq == std::string_view::npos) {
      // Do not echo the text: it might be a secret typed with the wrong
      // separator.
      error(file, 0, "", where + "expected key.path=value");
      return;
    }
    auto key = sdk::trim(text.substr(0, eq));
    if (key.empty()) {
      error(file, 0, "", where + "the key is empty");
      return;
    }
    if (find_bad_byte(text)) {
      error(file, 0, "", where + "not valid UTF-8 text, or contains a control character");
      return;
    }
    std::vector<std::string> segments;
    for (size_t pos = 0;;) {
      auto dot = key.find('.', pos);
      auto segment = sdk::trim(
        key.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos));
      if (segment.empty()) {
        error(file, 0, std::string{key}, where + "empty key segment");
        return;
      }
      segments.emplace_back(segment);
      if (dot == std::string_view::npos)
        break;
      pos = dot + 1;
    }
    std::string path;
    for (const auto& segment : segments)
      path = join_path(path, segment);
    auto raw = sdk::trim(text.substr(eq + 1));
    node value;
    if (!raw.empty()
        && (raw.front() == '[' || raw.front() == '{' || raw.front() == '"'
            || raw.front() == '\'')) {
      auto errors_before = diag.errors.size();
      auto parsed = parse_yaml(raw, file, false, path);
      if (diag.errors.size() != errors_before)
        return;
      if (parsed)
        value = std::move(*parsed);
      value.file = file;
    } else {
      value.file = file;
      if (raw == "~" || raw == "null" || raw == "Null" || raw == "NULL") {
        value.type = node::kind::null;
      } else {
        value.type = node::kind::scalar;
        value.plain = !raw.empty();
        if (auto str = substitute(raw, file, 0, path))
          value.text = std::move(*str);
        else
          value.bad = true;
      }
    }
    // Walk down, creating (or replacing non-map values with) maps.
    node* current = &root_;
    for (size_t i = 0; i < segments.size(); ++i) {
      auto& entries = current->entries;
      auto pos = std::find_if(entries.begin(), entries.end(),
                              [&](const entry& e) { return e.key == segments[i]; });
      if (pos == entries.end()) {
        entry e;
        e.key = segments[i];
        e.file = file;
        e.value.type = node::kind::map;
        e.value.file = file;
        entries.push_back(std::move(e));
        pos = entries.end() - 1;
      }
      if (i + 1 == segments.size()) {
        pos->value = std::move(value);
        return;
      }
      if (pos->value.type != node::kind::map) {
        pos->value = node{};
        pos->value.type = node::kind::map;
        pos->value.file = file;
      }
      current = &pos->value;
    }
  }

  // -- validation -------------------------------------------------------------

  void validate(settings& out) {
    validate_section(root_, "", out);
    check_references(out);
  }

  // The secrets whose value the file itself holds (not only `${NAME}`
  // references): their key paths, e.g. `llm.providers.main.api_key`.
  std::vector<std::string> literal_secrets() const {
    std::vector<std::string> out;
    find_literal_secrets(root_, "", out);
    return out;
  }

private:
  // Walks the schema's sections and keys below `map` (see literal_secrets).
  void find_literal_secrets(const node& map, const std::string& prefix,
                            std::vector<std::string>& out) const {
    for (const auto& e : map.entries) {
      auto path = join_path(prefix, e.key);
      if (const auto* key = find_config_key(path)) {
        if (key->type == config_type::instances && e.value.type == node::kind::map) {
          for (const auto& item : e.value.entries)
            if (item.value.type == node::kind::map)
              for (const auto& field : item.value.entries)
                if (field.key != "plugin" && field.key != "limits")
                  find_literal_in_instance(field.value,
                                           join_path(join_path(path, item.key), field.key),
                                           is_secret_key_name(field.key), out);
        } else if (key->secret) {
          find_literal_in_instance(e.value, path, true, out);
        }
      } else if (is_config_section(path) && e.value.type == node::kind::map) {
        find_literal_secrets(e.value, path, out);
      }
    }
  }

  // Walks a value inside a plugin instance: secret-named keys at any depth.
  void find_literal_in_instance(const node& x, const std::string& path, bool secret,
                                std::vector<std::string>& out) const {
    switch (x.type) {
      case node::kind::null:
        break;
      case node::kind::scalar:
        if (secret && x.literal && x.file == file_label_)
          out.push_back(path);
        break;
      case node::kind::list:
        for (size_t i = 0; i < x.items.size(); ++i)
          find_literal_in_instance(x.items[i], path + "[" + std::to_string(i) + "]", secret, out);
        break;
      case node::kind::map:
        for (const auto& e : x.entries)
          find_literal_in_instance(e.value, join_path(path, e.key),
                                   secret || is_secret_key_name(e.key), out);
        break;
    }
  }

  // Substitutes ${VAR} in every scalar value (not in keys).
  void substitute_tree(node& x, const std::string& path) {
    switch (x.type) {
      case node::kind::null:
        break;
      case node::kind::scalar:
        x.literal = holds_secret(written_text(x.text));
        if (auto str = substitute(x.text, x.file, x.line, path))
          x.text = std::move(*str);
        else
          x.bad = true;
        break;
      case node::kind::list:
        for (size_t i = 0; i < x.items.size(); ++i)
          substitute_tree(x.items[i], path + "[" + std::to_string(i) + "]");
        break;
      case node::kind::map:
        for (auto& e : x.entries)
          substitute_tree(e.value, join_path(path, e.key));
        break;
    }
  }

  // Replaces ${VAR}, ${VAR:-default} and $$ in `text`. Returns nullopt after
  // reporting a malformed reference.
  std::optional<std::string> substitute(std::string_view text, std::string_view file, int line,
                                        const std::string& path) {
    if (text.find('$') == std::string_view::npos)
      return std::string{text};
    std::string result;
    result.reserve(text.size());
    size_t i = 0;
    while (i < text.size()) {
      auto c = text[i];
      if (c != '$' || i + 1 == text.size()) {
        result += c;
        ++i;
        continue;
      }
      if (text[i + 1] == '$') {
        result += '$';
        i += 2;
        continue;
      }
      if (text[i + 1] != '{') {
        result += c;
        ++i;
        continue;
      }
      auto close = text.find('}', i + 2);
      if (close == std::string_view::npos) {
        error(file, line, path, "malformed ${...}: missing '}'");
        return std::nullopt;
      }
      auto inner = text.substr(i + 2, close - i - 2);
      std::optional<std::string_view> fallback;
      auto sep = inner.find(":-");
      auto name = inner.substr(0, sep);
      if (sep != std::string_view::npos)
        fallback = inner.substr(sep + 2);
      if (!is_identifier(name)) {
        // The text might be a secret: do not echo it.
        error(file, line, path,
              "malformed ${...}: expected ${NAME} or ${NAME:-default} where "
              "NAME has only letters, digits and '_'");
        return std::nullopt;
      }
      auto value = getenv_(std::string{name});
      if (value && !value->empty()) {
        if (find_bad_byte(*value)) {
          error(file, line, path,
                "environment variable " + std::string{name}
                  + " is not valid UTF-8 text or contains a control "
                    "character");
          return std::nullopt;
        }
        result += *value;
      } else if (fallback) {
        result += *fallback;
      } else if (!value) {
        warning(file, line, path,
                "environment variable " + std::string{name} + " is not set; using an empty value");
      }
      i = close + 1;
    }
    return result;
  }

  void validate_section(const node& map, const std::string& prefix, settings& out) {
    for (const auto& e : map.entries) {
      auto path = join_path(prefix, e.key);
      if (auto key = find_config_key(path)) {
        validate_value(*key, e, out);
      } else if (is_config_section(path)) {
        if (e.value.type == node::kind::map)
          validate_section(e.value, path, out);
        else if (e.value.type != node::kind::null)
          error(e.value.file, line_of(e), path,
                std::string{"expected map (a section), got "} + kind_name(e.value));
      } else {
        error(e.file, e.line, path, "unknown key" + suggest(prefix, e.key));
      }
    }
  }

  static int line_of(const entry& e) {
    return e.value.line > 0 ? e.value.line : e.line;
  }

  // Returns "; did you mean `x`?" or "".
  static std::string suggest(const std::string& prefix, std::string_view name) {
    if (name.size() > max_suggest)
      return "";
    // Names that can follow `prefix`.
    std::set<std::string> siblings;
    for (const auto& key : config_schema()) {
      std::string_view path = key.path;
      if (!prefix.empty()) {
        if (path.size() <= prefix.size() + 1 || path.compare(0, prefix.size(), prefix) != 0
            || path[prefix.size()] != '.')
          continue;
        path.remove_prefix(prefix.size() + 1);
      }
      siblings.emplace(path.substr(0, path.find('.')));
    }
    std::string best;
    auto best_distance = std::numeric_limits<size_t>::max();
    auto limit = name.size() <= 4 ? 1 : name.size() <= 8 ? 2 : 3;
    for (const auto& sibling : siblings) {
      auto d = edit_distance(name, sibling);
      if (d <= static_cast<size_t>(limit) && d < best_distance) {
        best = join_path(prefix, sibling);
        best_distance = d;
      }
    }
    if (best.empty()) {
      // The same name in another section, e.g. `log.proxy` -> `http.proxy`.
      for (const auto& key : config_schema()) {
        std::string_view path = key.path;
        auto dot = path.rfind('.');
        auto last = dot == std::string_view::npos ? path : path.substr(dot + 1);
        if (last == name) {
          best = key.path;
          break;
        }
      }
    }
    if (best.empty())
      return "";
    return "; did you mean `" + best + "`?";
  }

  void validate_value(const config_key& key, const entry& e, settings& out) {
    const auto& v = e.value;
    if (v.type == node::kind::null)
      return; // Keep the default.
    if (v.bad)
      return; // Already reported.
    auto file = v.file;
    auto line = line_of(e);
    const auto& path = key.path;
    auto type_error = [&](std::string expected) {
      error(file, line, path, "expected " + expected + ", got " + describe(v, key.secret));
    };
    auto range_error = [&](const std::string& what, const std::string& shown) {
      error(file, line, path, "must be " + what + (key.secret ? "" : ", got " + shown));
    };
    auto check_range = [&](int64_t value, int64_t lo, int64_t hi, auto&& render) {
      if (value >= lo && value <= hi)
        return true;
      if (hi == std::numeric_limits<int64_t>::max())
        range_error("at least " + render(lo), render(value));
      else
        range_error("between " + render(lo) + " and " + render(hi), render(value));
      return false;
    };
    switch (key.type) {
      case config_type::integer: {
        auto value = v.type == node::kind::scalar ? parse_int(v.text) : std::nullopt;
        if (!value) {
          type_error("int");
          return;
        }
        auto lo = std::max(key.min.value_or(key.binding.type_min), key.binding.type_min);
        auto hi = std::min(key.max.value_or(key.binding.type_max), key.binding.type_max);
        auto render = [](int64_t x) { return std::to_string(x); };
        if (!check_range(*value, lo, hi, render))
          return;
        key.binding.store(out, config_value{*value});
        return;
      }
      case config_type::boolean: {
        auto value = v.type == node::kind::scalar ? parse_bool(v.text) : std::nullopt;
        if (!value) {
          type_error("bool (true/false, yes/no, on/off)");
          return;
        }
        key.binding.store(out, config_value{*value});
        return;
      }
      case config_type::string: {
        if (v.type != node::kind::scalar) {
          type_error("string");
          return;
        }
        if (!key.allowed.empty()
            && std::find(key.allowed.begin(), key.allowed.end(), v.text) == key.allowed.end()) {
          std::string options;
          for (const auto& x : key.allowed)
            options += (options.empty() ? "" : "|") + x;
          range_error("one of " + options, quote(v.text));
          return;
        }
        key.binding.store(out, config_value{v.text});
        return;
      }
      case config_type::duration: {
        auto value = v.type == node::kind::scalar ? parse_duration(v.text) : std::nullopt;
        if (!value) {
          type_error("duration (e.g. 500ms, 10s, 2m, 1h; bare number: "
                     "seconds)");
          return;
        }
        auto render = [](int64_t x) { return format_duration(std::chrono::milliseconds{x}); };
        auto lo = key.min.value_or(0);
        auto hi = key.max.value_or(std::numeric_limits<int64_t>::max());
        if (!check_range(static_cast<int64_t>(value->count()), lo, hi, render))
          return;
        key.binding.store(out, config_value{*value});
        return;
      }
      case config_type::size: {
        auto value = v.type == node::kind::scalar ? parse_size(v.text) : std::nullopt;
        if (!value) {
          type_error("size (e.g. 512KiB, 64MiB, 1GB; bare number: bytes)");
          return;
        }
        auto lo = key.min.value_or(0);
        auto hi = key.max.value_or(std::numeric_limits<int64_t>::max());
        if (!check_range(*value, lo, hi, [](int64_t x) { return format_size(x); }))
          return;
        key.binding.store(out, config_value{*value});
        return;
      }
      case config_type::string_list: {
        if (v.type != node::kind::list) {
          type_error("list of strings");
          return;
        }
        std::vector<std::string> values;
        auto ok = true;
        for (size_t i = 0; i < v.items.size(); ++i) {
          const auto& item = v.items[i];
          if (item.bad) {
            ok = false;
            continue;
          }
          if (item.type != node::kind::scalar) {
            error(item.file, item.line > 0 ? item.line : line, path + "[" + std::to_string(i) + "]",
                  std::string{"expected string, got "} + kind_name(item));
            ok = false;
            continue;
          }
          values.push_back(item.text);
        }
        if (ok)
          key.binding.store(out, config_value{std::move(values)});
        return;
      }
      case config_type::string_map: {
        if (v.type != node::kind::map) {
          type_error("map of strings");
          return;
        }
        std::map<std::string, std::string> values;
        auto ok = true;
        for (const auto& item : v.entries) {
          if (item.value.bad) {
            ok = false;
            continue;
          }
          if (item.value.type != node::kind::scalar) {
            error(item.value.file, line_of(item), join_path(path, item.key),
                  std::string{"expected string, got "} + kind_name(item.value));
            ok = false;
            continue;
          }
          values.emplace(item.key, item.value.text);
        }
        if (ok)
          key.binding.store(out, config_value{std::move(values)});
        return;
      }
      case config_type::instances:
        validate_instances(key, e, out);
        return;
    }
  }

  void validate_instances(const config_key& key, const entry& e, settings& out) {
    // The binding says whether these are providers or tools.
    if (std::holds_alternative<std::map<std::string, tool_instance>>(key.binding.load(settings{})))
      validate_instances_as<tool_instance>(key, e, out);
    else
      validate_instances_as<llm_instance>(key, e, out);
  }

  template <class Instance>
  void validate_instances_as(const config_key& key, const entry& e, settings& out) {
    const auto& v = e.value;
    if (v.type != node::kind::map) {
      error(v.file, line_of(e), key.path,
            std::string{"expected map of NAME: {plugin: ..., ...}, got "} + kind_name(v));
      return;
    }
    std::map<std::string, Instance> values;
    auto ok = true;
    for (const auto& item : v.entries) {
      auto path = join_path(key.path, item.key);
      declared_[key.path].insert(item.key);
      if (item.value.type != node::kind::map) {
        error(item.value.file, line_of(item), path,
              std::string{"expected map with a `plugin` key, got "} + kind_name(item.value));
        ok = false;
        continue;
      }
      Instance instance;
      instance.file = std::string{item.file};
      instance.line = item.line;
      bool has_plugin = false;
      for (const auto& field : item.value.entries) {
        if (field.key == "limits") {
          if (!validate_limits(path, field, item, instance))
            ok = false;
          continue;
        }
        if (field.key != "plugin") {
          instance.config[field.key] = infer(field.value);
          auto at = field.value.file.empty() ? item.file : field.value.file;
          instance.key_lines[field.key] = {std::string{at}, line_of(field)};
          continue;
        }
        has_plugin = true;
        if (field.value.bad) {
          ok = false;
          continue;
        }
        if (field.value.type != node::kind::scalar || field.value.text.empty()) {
          error(field.value.file, line_of(field), join_path(path, "plugin"),
                std::string{"expected the name of a plugin, got "}
                  + (field.value.type == node::kind::scalar ? "an empty string"
                                                            : kind_name(field.value)));
          ok = false;
          continue;
        }
        instance.plugin = field.value.text;
      }
      if (!has_plugin) {
        error(item.file, item.line, path,
              "missing required key `plugin` (the plugin that provides this "
              "instance)");
        ok = false;
        continue;
      }
      values.emplace(item.key, std::move(instance));
    }
    if (ok)
      key.binding.store(out, config_value{std::move(values)});
  }

  // Reads the `limits:` map of an instance (core/config_limits.hpp): every
  // problem at its key's own line.
  template <class Instance>
  bool validate_limits(const std::string& path, const entry& field, const entry& item,
                       Instance& instance) {
    const auto& v = field.value;
    auto prefix = join_path(path, "limits");
    auto at = [&](const entry& x) { return x.value.file.empty() ? item.file : x.value.file; };
    if (v.type == node::kind::null)
      return true;
    if (v.type != node::kind::map) {
      error(at(field), line_of(field), prefix,
            std::string{"expected a map of Quarry's limits, such as {"}
              + (std::is_same_v<Instance, tool_instance> ? "timeout: 30s, max_concurrency: 4"
                                                         : "max_retries: 2, max_concurrency: 4")
              + "}, got " + kind_name(v));
      return false;
    }
    auto ok = true;
    auto values = json::object();
    for (const auto& limit : v.entries) {
      if (limit.value.bad) {
        ok = false;
        continue;
      }
      values[limit.key] = infer(limit.value);
      instance.key_lines["limits." + limit.key] = {std::string{at(limit)}, line_of(limit)};
    }
    for (const auto& problem : read_limits(values, instance.limits, prefix)) {
      auto where = instance.location_of("limits." + problem.key);
      error(where.first, where.second, join_path(prefix, problem.key), problem.message);
      ok = false;
    }
    return ok;
  }

  // Checks that llm.default and llm.roles name configured providers.
  void check_references(settings& out) {
    const auto& names = declared_["llm.providers"];
    std::string list;
    for (const auto& name : names)
      list += (list.empty() ? "" : ", ") + name;
    auto known = [&](const std::string& name) { return names.count(name) > 0; };
    auto missing = [&](const std::string& name) {
      if (names.empty())
        return "names provider " + quote(name)
               + ", but no providers are configured under llm.providers";
      return "names provider " + quote(name) + ", which is not configured (configured: " + list
             + ")";
    };
    const auto* llm = find_entry(root_, "llm");
    const entry* default_entry = nullptr;
    const entry* roles_entry = nullptr;
    const entry* providers_entry = nullptr;
    if (llm != nullptr) {
      default_entry = find_entry(llm->value, "default");
      roles_entry = find_entry(llm->value, "roles");
      providers_entry = find_entry(llm->value, "providers");
    }
    auto& chosen = out.llm.default_provider;
    auto default_bad = default_entry != nullptr && default_entry->value.bad;
    if (default_bad) {
      // Already reported.
    } else if (!chosen.empty()) {
      if (!known(chosen)) {
        auto file = default_entry ? default_entry->value.file : std::string_view{file_label_};
        auto line = default_entry ? line_of(*default_entry) : 0;
        error(file, line, "llm.default", missing(chosen));
      }
    } else if (names.size() == 1) {
      if (out.llm.providers.count(*names.begin()) > 0)
        chosen = *names.begin();
    } else if (names.size() > 1) {
      const auto* at = default_entry ? default_entry : providers_entry;
      error(at ? at->value.file : std::string_view{file_label_}, at ? line_of(*at) : 0,
            "llm.default", "must name one of the configured providers (" + list + ")");
    }
    if (roles_entry == nullptr || roles_entry->value.type != node::kind::map)
      return;
    for (const auto& role : roles_entry->value.entries) {
      if (role.value.type != node::kind::scalar || role.value.bad || known(role.value.text))
        continue;
      error(role.value.file, line_of(role), "llm.roles." + role.key, missing(role.value.text));
    }
  }

  std::string file_label_;
  config_getenv_fn getenv_;
  node root_;
  // Values left before the input counts as too large (aliases included).
  size_t budget_ = max_nodes;
  // Instance names seen per instances key, valid or not (avoids follow-up
  // errors for instances that failed validation).
  std::map<std::string, std::set<std::string>> declared_;
};

std::optional<std::string> env(const load_options& options, const std::string& name) {
  if (options.getenv)
    return options.getenv(name);
  if (auto value = ::getenv(name.c_str()))
    return std::string{value};
  return std::nullopt;
}

// Quotes `path` for a POSIX shell when it holds more than letters, digits
// and `/._-+,:@%=~`.
std::string shell_word(const std::string& path) {
  auto plain = !path.empty() && std::all_of(path.begin(), path.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
           || std::strchr("/._-+,:@%=~", c) != nullptr;
  });
  if (plain)
    return path;
  std::string out = "'";
  for (auto c : path)
    out += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
  return out + "'";
}

// The warning for a file that holds secrets and that others may read, or
// nothing. `mode` is the file's st_mode.
std::optional<std::string> readable_secrets_warning(const std::string& path, mode_t mode,
                                                    const std::vector<std::string>& keys) {
  if (keys.empty() || (mode & (S_IRGRP | S_IROTH)) == 0)
    return std::nullopt;
  std::string list;
  for (size_t i = 0; i < keys.size() && i < 3; ++i)
    list += (i == 0 ? "" : ", ") + keys[i];
  if (keys.size() > 3)
    list += " and " + std::to_string(keys.size() - 3) + " more";
  return path + " holds secrets (" + list + ") and is readable by other users (mode "
         + mode_text(mode) + "); chmod 600 " + shell_word(path);
}

load_result load_impl(std::optional<std::string_view> text, std::string file_label,
                      const load_options& options) {
  load_result result;
  loader ld{file_label, options.getenv};
  if (text)
    ld.parse_file(*text);
  else
    ld.parse_file("");
  for (size_t i = 0; i < options.overrides.size(); ++i)
    ld.apply_override(options.overrides[i], i);
  settings values;
  ld.validate(values);
  if (!ld.diag.errors.empty()) {
    result.errors = std::move(ld.diag.errors);
    return result;
  }
  loaded_config cfg;
  cfg.effective = to_json(values);
  cfg.values = std::move(values);
  cfg.source = text ? std::move(file_label) : std::string{config_embedded_label};
  cfg.warnings = std::move(ld.diag.warnings);
  if (text)
    cfg.literal_secrets = ld.literal_secrets();
  result.config = std::move(cfg);
  return result;
}

load_result guarded(std::optional<std::string_view> text, std::string label,
                    const load_options& options) {
  try {
    return load_impl(text, label, options);
  } catch (const std::exception& e) {
    load_result result;
    result.errors.push_back(
      config_error{std::move(label), 0, "", std::string{"internal error: "} + e.what()});
    return result;
  } catch (...) {
    load_result result;
    result.errors.push_back(config_error{std::move(label), 0, "", "internal error"});
    return result;
  }
}

} // namespace

std::string config_error::to_string() const {
  std::string result = file;
  if (line > 0)
    result += ":" + std::to_string(line);
  if (!key.empty())
    result += (result.empty() ? "" : ": ") + key;
  result += (result.empty() ? "" : ": ") + message;
  return result;
}

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  if (name.size() > max_suggest)
    return {};
  auto limit = name.size() <= 4 ? 1 : name.size() <= 8 ? 2 : 3;
  std::string best;
  auto best_distance = std::numeric_limits<size_t>::max();
  for (const auto& candidate : candidates) {
    auto d = edit_distance(name, candidate);
    if (d <= static_cast<size_t>(limit) && d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  if (!best.empty() || name.size() < 4)
    return best;
  // A word of a longer key, e.g. `retries` for `max_retries`.
  for (const auto& candidate : candidates) {
    auto at = candidate.find(name);
    if (at == std::string::npos)
      continue;
    auto end = at + name.size();
    if ((at == 0 || candidate[at - 1] == '_') && (end == candidate.size() || candidate[end] == '_'))
      return candidate;
  }
  return best;
}

bool is_secret_key_name(std::string_view name) {
  auto str = sdk::to_lower(name);
  auto ends_with = [&](std::string_view suffix) {
    return str.size() >= suffix.size()
           && str.compare(str.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return str == "api_key" || ends_with("_key") || ends_with("token") || ends_with("password")
         || ends_with("secret");
}

std::optional<std::string> find_config_file(const load_options& options) {
  if (options.file)
    return options.file;
  if (auto path = env(options, "QUARRY_CONFIG"); path && !path->empty())
    return path;
  std::filesystem::path dir;
  if (auto xdg = env(options, "XDG_CONFIG_HOME");
      xdg && !xdg->empty() && std::filesystem::path{*xdg}.is_absolute())
    dir = *xdg;
  else if (auto home = env(options, "HOME"); home && !home->empty())
    dir = std::filesystem::path{*home} / ".config";
  else
    return std::nullopt;
  auto candidate = (dir / "quarry" / "quarry.yaml").string();
  // Only a file that is not there at all means the embedded defaults: a
  // folder, a FIFO or a dangling link is read, and refused.
  struct ::stat st {};
  if (::lstat(candidate.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
    return std::nullopt;
  return candidate;
}

load_result load_config(const load_options& options) {
  std::optional<std::string> path;
  try {
    path = find_config_file(options);
  } catch (const std::exception& e) {
    load_result result;
    result.errors.push_back(
      config_error{"", 0, "", std::string{"cannot find the configuration: "} + e.what()});
    return result;
  }
  if (!path)
    return guarded(std::nullopt, std::string{config_embedded_label}, options);
  std::variant<regular_file_text, file_error> read;
  try {
    read = read_regular_file(*path, max_config_file_size);
  } catch (const std::exception& e) {
    read = file_error{file_error::kind::unreadable, e.what()};
  }
  if (auto* err = std::get_if<file_error>(&read)) {
    std::string prefix = "cannot read the configuration file: ";
    std::string message;
    switch (err->what) {
      case file_error::kind::not_found:
      case file_error::kind::unreadable:
        message = prefix + err->message;
        break;
      case file_error::kind::not_regular:
        message = prefix + "it " + err->message
                  + "; it must be a regular file (or a symbolic link to one)";
        break;
      case file_error::kind::too_large:
        message = prefix + "it " + err->message + ", the largest configuration file Quarry reads";
        break;
    }
    load_result result;
    result.errors.push_back(config_error{*path, 0, "", std::move(message)});
    return result;
  }
  const auto& file = std::get<regular_file_text>(read);
  auto result = guarded(std::string_view{file.text}, *path, options);
  if (result.config)
    if (auto warning = readable_secrets_warning(*path, file.status.st_mode,
                                                result.config->literal_secrets))
      result.config->warnings.push_back(std::move(*warning));
  return result;
}

load_result load_config_text(std::string_view yaml, std::string file_label,
                             const load_options& options) {
  return guarded(yaml, std::move(file_label), options);
}

} // namespace quarry::core
