// Files people upload to a research (`quarry serve`, POST /v1/uploads):
// their type told from their bytes, their names made safe, the pending ones
// kept in the data folder until a research takes them, and each research's
// own corpus of them (docs/api.md, "Uploads"; docs/architecture.md).
//
// On disk, under the data folder (`runtime.data_dir`):
// - `uploads/<upload id>/<name>`: a pending upload (folder 0700, file 0600),
//   removed 24 hours after its upload if no research took it;
// - `sessions/<session id>/files/<name>`: the files a session took (moved
//   there, never copied), `sessions/<session id>/converted/<name>.md` the
//   Markdown pandoc made of a DOCX one, and `sessions/<session id>/corpus.db`
//   their index (core/corpus), which the session's `session_files` tool
//   searches. The folder goes with the session.
//
// Nothing here follows a symbolic link or opens a device: every file and
// folder is checked with lstat, and files are created with O_EXCL and
// O_NOFOLLOW. Errors are values (texts for people, with the HTTP status to
// answer where the API answers them).

#pragma once

#include "session_store.hpp"

#include "quarry/corpus/index.hpp"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::app {

/// What an uploaded file is.
enum class upload_kind { pdf, markdown, text, html, docx };

/// `pdf`, `markdown`, `text`, `html` or `docx`.
std::string_view to_string(upload_kind k);

/// The extension a file of `k` is stored with: `.pdf`, `.md`, `.txt`,
/// `.html` or `.docx`.
std::string_view upload_extension(upload_kind k);

/// The kind a file name's extension gives (`.pdf`; `.md`, `.markdown`;
/// `.txt`, `.text`; `.html`, `.htm`; `.docx`; any case), or none.
std::optional<upload_kind> upload_kind_of_name(std::string_view name);

/// What the bytes of a file are: `pdf` (they start with `%PDF-`), `docx` (a
/// zip archive that holds `word/document.xml`), `text` for valid UTF-8
/// without NUL (a byte order mark allowed: Markdown, text and HTML are all
/// text), or none (anything else: binary data, another archive).
std::optional<upload_kind> sniff_upload(std::string_view bytes);

/// The media types POST /v1/uploads accepts, for the message of a 415.
extern const char* const accepted_upload_types;

/// Why an upload is refused: the HTTP status (400, 413, 415, 429, 501, 500),
/// an error code (`bad_request`, `too_large`, `unsupported_media_type`,
/// `busy`, `not_implemented`, `internal`) and a message for people.
struct upload_refusal {
  int status = 400;
  std::string code;
  std::string message;
};

/// A file name made safe to store: its last path segment (after `/` or
/// `\`), without control characters, leading dots and spaces or trailing
/// spaces and dots, at most 200 bytes (the end of a longer name's stem is
/// cut at a character boundary, its extension kept). A name that is not
/// UTF-8 or that nothing is left of is refused (400).
std::variant<std::string, upload_refusal> safe_upload_name(std::string_view raw);

/// Decides the kind of an upload from its declared media type
/// (`content_type`, parameters such as `; charset=utf-8` ignored), its
/// (safe) file name and its bytes, which must agree: the declared type names
/// the kind (application/octet-stream: the name's extension does), the
/// bytes must be of it (sniff_upload), and an extension of another kind is
/// refused (415). Among Markdown, text and HTML the extension names the
/// kind (`notes.md` sent as text/plain is Markdown). `name` gets the kind's
/// extension appended when it has none of it (`notes` sent as
/// text/markdown is stored as `notes.md`). An empty file is refused (400).
std::variant<upload_kind, upload_refusal>
decide_upload_kind(std::string_view content_type, std::string& name, std::string_view bytes);

/// Whether `x` has the form of an upload id (32 lowercase hex digits).
bool is_upload_id(std::string_view x);

/// A pending upload.
struct pending_upload {
  std::string id;
  std::string name;
  int64_t bytes = 0;
  upload_kind kind = upload_kind::text;
  /// When it was uploaded (its folder's modification time).
  std::chrono::system_clock::time_point at;
};

/// Limits of the pending uploads.
struct upload_limits {
  /// Files kept at most (server.max_pending_uploads).
  int64_t max_files = 100;
  /// Their bytes at most (server.max_pending_upload_bytes).
  int64_t max_bytes = int64_t{200} << 20;
  /// A pending upload no research took is removed this long after it came.
  std::chrono::seconds keep{std::chrono::hours{24}};
};

/// The pending uploads of a data folder (`<data_dir>/uploads`). Thread-safe
/// within the process: adding checks the limits and writes under one lock.
class upload_folder {
public:
  upload_folder(std::string data_dir, upload_limits limits);

  /// Stores `bytes` as a new upload named `name` (safe, of `kind`): in a
  /// new folder `<id>/`, written to a hidden part file first and renamed,
  /// so that a pending upload is always whole. Expired uploads are removed
  /// first; over the limits: 429.
  std::variant<pending_upload, upload_refusal> add(const std::string& name, upload_kind kind,
                                                   std::string_view bytes);

  /// The pending upload `id`, if it exists and has not expired.
  std::optional<pending_upload> find(const std::string& id) const;

  /// Every pending upload, expired ones included.
  std::vector<pending_upload> list() const;

  /// Removes the uploads older than `limits.keep` (and what a write that
  /// failed half-way left); returns how many.
  size_t sweep();

  const upload_limits& limits() const noexcept {
    return limits_;
  }

private:
  std::string root_;
  upload_limits limits_;
  std::mutex mtx_;
};

/// `<data_dir>/sessions/<session_id>`.
std::string session_folder(const std::string& data_dir, const std::string& session_id);

/// Moves the pending uploads `uploads` (by their ids) into the files folder
/// of session `session_id` (made 0700), renaming one whose name is taken
/// (`a (2).pdf`), and fills in their names, sizes and types. Each upload
/// is taken by one session only (the move is atomic); one that does not
/// exist, has expired or was taken meanwhile is refused (400 naming it) and
/// whatever was moved goes back.
std::variant<std::vector<session_upload>, upload_refusal>
claim_uploads(const std::string& data_dir, const std::string& session_id,
              const std::vector<session_upload>& uploads, const upload_limits& limits);

/// Indexes the files folder of the session folder `folder` into its
/// `corpus.db` (core/corpus, with the size caps of `caps`), DOCX files
/// first converted to Markdown by pandoc into `converted/`. Cheap when
/// nothing changed (a resumed session). Returns the index's file, or why it
/// cannot be made.
std::variant<std::string, std::string> index_session_files(const std::string& folder,
                                                           corpus::update_options caps);

/// Removes the folder of session `session_id`, if it has one. Returns an
/// error text, or empty.
std::string remove_session_folder(const std::string& data_dir, const std::string& session_id);

} // namespace quarry::app
