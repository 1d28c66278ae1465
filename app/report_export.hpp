// Reports people can send: PDF and DOCX, made from the report's sendable
// HTML page (report_render.hpp) by well-kept Debian tools run as child
// processes: headless Chromium prints the PDF (package chromium), pandoc
// writes the DOCX (package pandoc). Each runs without a shell (its arguments
// as argv), in a process group of its own, with standard input from
// /dev/null and its output in a log, within a time limit; it writes into a
// private temporary folder, and only a document that looks whole (a PDF's
// header and end marker, a DOCX's zip header) is returned. A missing tool,
// a failure, a hang or an empty or broken document is an error naming the
// tool (and, when missing, the Debian package to install), never a file.

#pragma once

#include "report_render.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace quarry::app {

enum class export_format { pdf, docx };

/// `pdf` or `docx`; nothing for any other name.
std::optional<export_format> export_format_from(std::string_view name);

/// `pdf` or `docx`.
std::string_view export_extension(export_format f);

/// `application/pdf` or the DOCX media type
/// (`application/vnd.openxmlformats-officedocument.wordprocessingml.document`).
std::string_view export_content_type(export_format f);

/// Why an export failed. `message` is for people (names the tool, and the
/// Debian package when the tool is missing); `detail` is the end of the
/// tool's own output, for the log.
struct export_error {
  enum class kind { missing_tool, failed, timed_out, bad_output, system };
  kind what = kind::failed;
  std::string message;
  std::string detail;
};

/// Options of export_report.
struct export_options {
  /// The longest a tool may run; it is then killed with its whole process
  /// group, and the export fails.
  std::chrono::milliseconds timeout{std::chrono::seconds{60}};
  /// A larger document is refused.
  size_t max_bytes = size_t{256} << 20;
  /// The tool's executable; empty: found on PATH (`chromium` or
  /// `chromium-browser` for PDF, `pandoc` for DOCX). Tests name fakes here.
  std::string program;
};

/// The tool a format needs, found on PATH: its path, or a missing_tool
/// error naming the Debian package. Checked before a research starts, so
/// that a missing tool fails in a second, not after the research.
std::variant<std::string, export_error> find_export_tool(export_format f);

/// The report as a PDF or DOCX document (its bytes), made from
/// sendable_html_report(r).
std::variant<std::string, export_error> export_report(const report_parts& r, export_format f,
                                                      const export_options& opts = {});

/// The corpus folder a stored session searched (its options' `corpus`),
/// else `fallback`: the root its local sources are shown relative to.
std::string session_corpus(const nlohmann::json& options, const std::string& fallback);

/// The outcome of run_tool.
struct tool_outcome {
  /// Exit status, or 128 + the signal that ended it; -1 when it never ran.
  int exit_code = -1;
  bool timed_out = false;
  /// Why it could not be started (empty when it was).
  std::string spawn_error;
  /// The end of what it wrote on stdout and stderr (at most 4 KB).
  std::string output;
};

/// Runs `argv` (argv[0] a path) without a shell, in a process group of its
/// own, signals unblocked and at their defaults, standard input from
/// /dev/null, stdout and stderr into `log_file`, the environment with
/// `env` set, descriptors above 2 closed. Past `timeout` the whole group is
/// killed (SIGKILL); once the tool ends, what it left in its group is too.
tool_outcome run_tool(const std::vector<std::string>& argv,
                      const std::vector<std::pair<std::string, std::string>>& env,
                      const std::string& log_file, std::chrono::milliseconds timeout);

/// A bound on the exports running at once in a process (`quarry serve`):
/// each is a browser or pandoc. take() gives a slot while fewer than `most`
/// are taken, else nothing.
class export_slots {
public:
  explicit export_slots(int most) : most_{most} {
  }

  class slot {
  public:
    explicit slot(std::atomic<int>* n) : n_{n} {
    }
    slot(slot&& o) noexcept : n_{std::exchange(o.n_, nullptr)} {
    }
    slot(const slot&) = delete;
    slot& operator=(const slot&) = delete;
    slot& operator=(slot&&) = delete;
    ~slot() {
      if (n_ != nullptr)
        n_->fetch_sub(1);
    }

  private:
    std::atomic<int>* n_;
  };

  std::optional<slot> take();

private:
  int most_;
  std::atomic<int> taken_{0};
};

} // namespace quarry::app
