// Uploaded files and each research's own corpus of them (upload_files.hpp).

#include "upload_files.hpp"

#include "report_export.hpp"

#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"
#include "quarry/store/store.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace quarry::app {

namespace {

namespace fs = std::filesystem;

constexpr size_t max_upload_name_bytes = 200;

std::string upload_lower(std::string_view x) {
  std::string out{x};
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool upload_is_textual(upload_kind k) {
  return k == upload_kind::markdown || k == upload_kind::text || k == upload_kind::html;
}

std::string_view upload_kind_shown(upload_kind k) {
  switch (k) {
    case upload_kind::pdf:
      return "a PDF";
    case upload_kind::docx:
      return "a DOCX document";
    case upload_kind::markdown:
      return "Markdown";
    case upload_kind::html:
      return "HTML";
    case upload_kind::text:
      break;
  }
  return "text";
}

// `name` cut to at most `most` bytes: the end of its stem, at a character
// boundary; a short extension is kept.
std::string upload_cut_name(std::string name, size_t most) {
  if (name.size() <= most)
    return name;
  std::string ext;
  auto dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0 && name.size() - dot <= 16) {
    ext = name.substr(dot);
    name.resize(dot);
  }
  auto keep = most - ext.size();
  while (keep > 0 && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80)
    --keep;
  name.resize(keep);
  return name + ext;
}

// lstat: the kind of what is at `path` without following a link.
bool upload_lstat(const std::string& path, struct stat& st) {
  return ::lstat(path.c_str(), &st) == 0;
}

// Makes folder `path` (0700), or checks that the one there is a folder
// (not a link). Returns an error text, or empty.
std::string upload_make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    return "cannot make the folder " + path + ": " + std::strerror(errno);
  struct stat st {};
  if (!upload_lstat(path, st))
    return "cannot read the folder " + path + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode))
    return path + " is not a folder (a link or a file is refused)";
  return {};
}

std::string upload_new_id() {
  std::random_device rd;
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    auto x = rd();
    for (int j = 0; j < 4; ++j) {
      out += hex[(x >> (j * 8)) & 0xF];
    }
  }
  return out;
}

// Writes `bytes` to a new file `path` (0600, never over anything there).
std::string upload_write_file(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return std::strerror(errno);
  size_t done = 0;
  while (done < bytes.size()) {
    auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      auto why = std::string{std::strerror(errno)};
      ::close(fd);
      return why;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    auto why = std::string{std::strerror(errno)};
    ::close(fd);
    return why;
  }
  if (::close(fd) != 0)
    return std::strerror(errno);
  return {};
}

std::chrono::system_clock::time_point upload_mtime(const struct stat& st) {
  return std::chrono::system_clock::time_point{
    std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds{st.st_mtim.tv_sec} + std::chrono::nanoseconds{st.st_mtim.tv_nsec})};
}

// The pending upload in folder `root/id`: its one regular file whose name
// has a known extension (hidden part files are skipped); none for anything
// else.
std::optional<pending_upload> upload_read(const std::string& root, const std::string& id) {
  auto dir = root + "/" + id;
  struct stat st {};
  if (!is_upload_id(id) || !upload_lstat(dir, st) || !S_ISDIR(st.st_mode))
    return std::nullopt;
  std::optional<pending_upload> out;
  std::error_code ec;
  for (fs::directory_iterator it{dir, ec}, end; !ec && it != end; it.increment(ec)) {
    auto name = it->path().filename().string();
    if (name.empty() || name[0] == '.')
      continue;
    struct stat fst {};
    auto kind = upload_kind_of_name(name);
    if (out || !kind || !upload_lstat(it->path().string(), fst) || !S_ISREG(fst.st_mode))
      return std::nullopt;
    out = pending_upload{id, name, static_cast<int64_t>(fst.st_size), *kind, upload_mtime(st)};
  }
  if (ec)
    return std::nullopt;
  return out;
}

upload_refusal upload_refused(int status, const char* code, std::string message) {
  return upload_refusal{status, code, std::move(message)};
}

std::string upload_shown_id(const std::string& id) {
  return sdk::repair_utf8(id.substr(0, 40));
}

} // namespace

const char* const accepted_upload_types
  = "application/pdf, text/markdown, text/plain, text/html, "
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document (DOCX), or "
    "application/octet-stream with a name ending in .pdf, .md, .markdown, .txt, .text, "
    ".html, .htm or .docx";

std::string_view to_string(upload_kind k) {
  switch (k) {
    case upload_kind::pdf:
      return "pdf";
    case upload_kind::markdown:
      return "markdown";
    case upload_kind::html:
      return "html";
    case upload_kind::docx:
      return "docx";
    case upload_kind::text:
      break;
  }
  return "text";
}

std::string_view upload_extension(upload_kind k) {
  switch (k) {
    case upload_kind::pdf:
      return ".pdf";
    case upload_kind::markdown:
      return ".md";
    case upload_kind::html:
      return ".html";
    case upload_kind::docx:
      return ".docx";
    case upload_kind::text:
      break;
  }
  return ".txt";
}

std::optional<upload_kind> upload_kind_of_name(std::string_view name) {
  auto dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0)
    return std::nullopt;
  auto ext = upload_lower(name.substr(dot));
  if (ext == ".pdf")
    return upload_kind::pdf;
  if (ext == ".md" || ext == ".markdown")
    return upload_kind::markdown;
  if (ext == ".txt" || ext == ".text")
    return upload_kind::text;
  if (ext == ".html" || ext == ".htm")
    return upload_kind::html;
  if (ext == ".docx")
    return upload_kind::docx;
  return std::nullopt;
}

std::optional<upload_kind> sniff_upload(std::string_view bytes) {
  if (bytes.substr(0, 5) == "%PDF-")
    return upload_kind::pdf;
  if (bytes.substr(0, 4) == std::string_view{"PK\x03\x04", 4}) {
    // A zip archive: a DOCX names its main part in a file header.
    if (bytes.find("word/document.xml") != std::string_view::npos)
      return upload_kind::docx;
    return std::nullopt;
  }
  auto text = bytes;
  if (text.substr(0, 3) == "\xEF\xBB\xBF")
    text.remove_prefix(3);
  if (text.find('\0') != std::string_view::npos || !sdk::is_valid_utf8(text))
    return std::nullopt;
  return upload_kind::text;
}

std::variant<std::string, upload_refusal> safe_upload_name(std::string_view raw) {
  if (!sdk::is_valid_utf8(raw))
    return upload_refused(400, "bad_request", "name: must be UTF-8");
  if (auto slash = raw.find_last_of("/\\"); slash != std::string_view::npos)
    raw.remove_prefix(slash + 1);
  std::string name;
  for (char ch : raw) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7F)
      name += ch;
  }
  auto first = name.find_first_not_of(". ");
  name = first == std::string::npos ? std::string{} : name.substr(first);
  while (!name.empty() && (name.back() == ' ' || name.back() == '.'))
    name.pop_back();
  if (name.empty())
    return upload_refused(400, "bad_request",
                          "name: no file name is left once path separators, control characters "
                          "and leading dots are taken out");
  return upload_cut_name(std::move(name), max_upload_name_bytes);
}

std::variant<upload_kind, upload_refusal>
decide_upload_kind(std::string_view content_type, std::string& name, std::string_view bytes) {
  if (bytes.empty())
    return upload_refused(400, "bad_request", "the file is empty");
  auto media = upload_lower(sdk::trim(content_type.substr(0, content_type.find(';'))));
  std::optional<upload_kind> declared;
  if (media == "application/pdf")
    declared = upload_kind::pdf;
  else if (media == "text/markdown" || media == "text/x-markdown")
    declared = upload_kind::markdown;
  else if (media == "text/plain")
    declared = upload_kind::text;
  else if (media == "text/html")
    declared = upload_kind::html;
  else if (media == "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
    declared = upload_kind::docx;
  else if (media != "application/octet-stream")
    return upload_refused(415, "unsupported_media_type",
                          (media.empty() ? std::string{"the upload declares no Content-Type"}
                                         : "Content-Type " + sdk::repair_utf8(media.substr(0, 100))
                                             + " is not accepted")
                            + "; accepted: " + accepted_upload_types);
  auto by_name = upload_kind_of_name(name);
  if (!declared) {
    if (!by_name)
      return upload_refused(415, "unsupported_media_type",
                            "application/octet-stream needs a file name that says its type; "
                            "accepted: "
                              + std::string{accepted_upload_types});
    declared = by_name;
  }
  if (by_name) {
    if (upload_is_textual(*declared) && upload_is_textual(*by_name))
      declared = by_name;
    else if (*by_name != *declared)
      return upload_refused(415, "unsupported_media_type",
                            "the name " + name + " says " + std::string{upload_kind_shown(*by_name)}
                              + " but Content-Type says "
                              + std::string{upload_kind_shown(*declared)}
                              + "; accepted: " + accepted_upload_types);
  }
  auto sniffed = sniff_upload(bytes);
  bool agrees = sniffed
                && (upload_is_textual(*declared) ? *sniffed == upload_kind::text
                                                 : *sniffed == *declared);
  if (!agrees)
    return upload_refused(415, "unsupported_media_type",
                          "the bytes are not " + std::string{upload_kind_shown(*declared)}
                            + " (they are "
                            + (sniffed ? std::string{upload_kind_shown(*sniffed)}
                                       : std::string{"binary data, not UTF-8 text"})
                            + "); accepted: " + accepted_upload_types);
  if (!by_name) {
    auto ext = std::string{upload_extension(*declared)};
    name = upload_cut_name(name, max_upload_name_bytes - ext.size()) + ext;
  }
  return *declared;
}

bool is_upload_id(std::string_view x) {
  return x.size() == 32 && std::all_of(x.begin(), x.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

upload_folder::upload_folder(std::string data_dir, upload_limits limits)
  : root_((fs::path{data_dir} / "uploads").string()), limits_(limits) {
}

std::variant<pending_upload, upload_refusal>
upload_folder::add(const std::string& name, upload_kind kind, std::string_view bytes) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto internal = [](const std::string& why) {
    return upload_refused(500, "internal", "the upload cannot be stored: " + why);
  };
  if (auto why = upload_make_dir(root_); !why.empty())
    return internal(why);
  auto now = std::chrono::system_clock::now();
  int64_t files = 0;
  int64_t total = 0;
  for (const auto& p : list()) {
    if (now - p.at > limits_.keep) {
      std::error_code ec;
      fs::remove_all(fs::path{root_} / p.id, ec);
      continue;
    }
    ++files;
    total += p.bytes;
  }
  if (files + 1 > limits_.max_files)
    return upload_refused(429, "busy",
                          "too many uploads wait for a research (server.max_pending_uploads = "
                            + std::to_string(limits_.max_files)
                            + "); start a research with them, or wait until they expire 24 "
                              "hours after their upload");
  if (total + static_cast<int64_t>(bytes.size()) > limits_.max_bytes)
    return upload_refused(429, "busy",
                          "the uploads that wait for a research would hold more than "
                            + std::to_string(limits_.max_bytes)
                            + " bytes (server.max_pending_upload_bytes); start a research with "
                              "them, or wait until they expire 24 hours after their upload");
  std::string id;
  std::string dir;
  for (int attempt = 0;; ++attempt) {
    id = upload_new_id();
    dir = root_ + "/" + id;
    if (::mkdir(dir.c_str(), 0700) == 0)
      break;
    if (errno != EEXIST || attempt > 8)
      return internal("cannot make its folder: " + std::string{std::strerror(errno)});
  }
  auto part = dir + "/.part";
  auto failed = [&](const std::string& why) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    return internal(why);
  };
  if (auto why = upload_write_file(part, bytes); !why.empty())
    return failed(why);
  if (::rename(part.c_str(), (dir + "/" + name).c_str()) != 0)
    return failed(std::strerror(errno));
  return pending_upload{id, name, static_cast<int64_t>(bytes.size()), kind, now};
}

std::optional<pending_upload> upload_folder::find(const std::string& id) const {
  auto found = upload_read(root_, id);
  if (!found || std::chrono::system_clock::now() - found->at > limits_.keep)
    return std::nullopt;
  return found;
}

std::vector<pending_upload> upload_folder::list() const {
  std::vector<pending_upload> out;
  std::error_code ec;
  for (fs::directory_iterator it{root_, ec}, end; !ec && it != end; it.increment(ec))
    if (auto p = upload_read(root_, it->path().filename().string()))
      out.push_back(std::move(*p));
  return out;
}

size_t upload_folder::sweep() {
  std::lock_guard<std::mutex> guard{mtx_};
  size_t removed = 0;
  auto now = std::chrono::system_clock::now();
  std::error_code ec;
  std::vector<fs::path> old;
  for (fs::directory_iterator it{root_, ec}, end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (upload_lstat(it->path().string(), st) && now - upload_mtime(st) > limits_.keep)
      old.push_back(it->path());
  }
  for (const auto& p : old) {
    std::error_code rm;
    // remove_all removes a link itself, never what it leads to.
    if (fs::remove_all(p, rm) > 0 && !rm)
      ++removed;
  }
  return removed;
}

std::string session_folder(const std::string& data_dir, const std::string& session_id) {
  return (fs::path{data_dir} / "sessions" / session_id).string();
}

std::variant<std::vector<session_upload>, upload_refusal>
claim_uploads(const std::string& data_dir, const std::string& session_id,
              const std::vector<session_upload>& uploads, const upload_limits& limits) {
  if (uploads.size() > 20)
    return upload_refused(400, "bad_request", "uploads: at most 20 files");
  auto root = (fs::path{data_dir} / "uploads").string();
  auto sessions = (fs::path{data_dir} / "sessions").string();
  auto folder = session_folder(data_dir, session_id);
  auto files = folder + "/files";
  for (const auto& dir : {sessions, folder, files})
    if (auto why = upload_make_dir(dir); !why.empty())
      return upload_refused(500, "internal", "the uploads cannot be taken: " + why);
  std::vector<std::pair<std::string, std::string>> moved;
  auto undo = [&](upload_refusal r) {
    for (auto it = moved.rbegin(); it != moved.rend(); ++it)
      ::rename(it->second.c_str(), it->first.c_str());
    std::error_code ec;
    fs::remove_all(folder, ec);
    return r;
  };
  std::vector<session_upload> out;
  auto now = std::chrono::system_clock::now();
  for (const auto& u : uploads) {
    auto missing = [&] {
      return upload_refused(400, "bad_request",
                            "uploads: no upload '" + upload_shown_id(u.id)
                              + "' (it never existed, another research took it, or it expired "
                                "24 hours after its upload)");
    };
    for (const auto& earlier : out)
      if (earlier.id == u.id)
        return undo(upload_refused(400, "bad_request",
                                   "uploads: '" + upload_shown_id(u.id) + "' is given twice"));
    auto found = upload_read(root, u.id);
    if (!found || now - found->at > limits.keep)
      return undo(missing());
    // A name another file of this session has: `name (2).ext`.
    auto name = found->name;
    auto taken = [&](const std::string& n) {
      struct stat st {};
      return upload_lstat(files + "/" + n, st);
    };
    for (int n = 2; taken(name) && n < 100; ++n) {
      auto dot = found->name.rfind('.');
      auto stem = found->name.substr(0, dot);
      auto ext = dot == std::string::npos ? std::string{} : found->name.substr(dot);
      name = upload_cut_name(stem + " (" + std::to_string(n) + ")" + ext, max_upload_name_bytes);
    }
    auto from = root + "/" + u.id + "/" + found->name;
    auto to = files + "/" + name;
    if (taken(name) || ::rename(from.c_str(), to.c_str()) != 0)
      return undo(missing());
    moved.emplace_back(from, to);
    out.push_back({u.id, name, found->bytes, std::string{to_string(found->kind)}});
  }
  // Taken: their empty folders go.
  for (const auto& u : out) {
    std::error_code ec;
    fs::remove_all(fs::path{root} / u.id, ec);
  }
  return out;
}

std::variant<std::string, std::string> index_session_files(const std::string& folder,
                                                           corpus::update_options caps) {
  using result = std::variant<std::string, std::string>;
  auto failed = [](std::string why) { return result{std::in_place_index<1>, std::move(why)}; };
  auto files = folder + "/files";
  auto converted = folder + "/converted";
  struct stat st {};
  if (!upload_lstat(files, st) || !S_ISDIR(st.st_mode))
    return failed("the session's files folder is missing");
  // DOCX files: pandoc writes their Markdown (once; again when a file is
  // newer than its Markdown).
  std::error_code ec;
  for (fs::directory_iterator it{files, ec}, end; !ec && it != end; it.increment(ec)) {
    auto name = it->path().filename().string();
    struct stat fst {};
    if (upload_kind_of_name(name) != upload_kind::docx || !upload_lstat(it->path().string(), fst)
        || !S_ISREG(fst.st_mode))
      continue;
    if (auto why = upload_make_dir(converted); !why.empty())
      return failed(why);
    auto out = converted + "/" + name + ".md";
    struct stat ost {};
    if (upload_lstat(out, ost) && S_ISREG(ost.st_mode) && upload_mtime(ost) >= upload_mtime(fst))
      continue;
    auto tool = find_export_tool(export_format::docx);
    if (auto* err = std::get_if<export_error>(&tool))
      return failed("the DOCX file " + name + " cannot be read: " + err->message);
    auto part = converted + "/.part.md";
    std::error_code rm;
    fs::remove(part, rm);
    // --sandbox: pandoc reads nothing but the file given and writes nothing
    // but its output.
    auto ran = run_tool({std::get<std::string>(tool), "--sandbox", "--from=docx", "--to=gfm",
                         "--output=" + part, it->path().string()},
                        {}, folder + "/pandoc.log", std::chrono::seconds{60});
    if (!ran.spawn_error.empty() || ran.timed_out || ran.exit_code != 0) {
      fs::remove(part, rm);
      return failed("pandoc could not read the DOCX file " + name + " ("
                    + (!ran.spawn_error.empty() ? ran.spawn_error
                       : ran.timed_out          ? std::string{"it took longer than 60 s"}
                                                : "exit status " + std::to_string(ran.exit_code))
                    + ")");
    }
    if (::rename(part.c_str(), out.c_str()) != 0)
      return failed("cannot keep the Markdown of " + name + ": " + std::strerror(errno));
  }
  auto db = folder + "/corpus.db";
  auto opened = corpus::corpus_index::open(db);
  if (opened.failure)
    return failed("the session's index cannot be opened: " + opened.failure->message);
  std::vector<std::string> roots{files};
  if (upload_lstat(converted, st) && S_ISDIR(st.st_mode))
    roots.push_back(converted);
  caps.progress = nullptr;
  auto up = opened.index->update(roots, caps);
  if (up.failure)
    return failed("the uploaded files cannot be indexed: " + up.failure->message);
  if (opened.index->size().first == 0)
    return failed("none of the uploaded files holds text Quarry can read"
                  + (up.notes.empty() ? std::string{} : " (" + up.notes.front() + ")"));
  return result{std::in_place_index<0>, db};
}

std::string remove_session_folder(const std::string& data_dir, const std::string& session_id) {
  if (!store::is_session_id(session_id))
    return "not a session id";
  auto folder = session_folder(data_dir, session_id);
  struct stat st {};
  if (!upload_lstat(folder, st))
    return errno == ENOENT ? std::string{} : folder + ": " + std::strerror(errno);
  std::error_code ec;
  fs::remove_all(folder, ec);
  if (ec)
    return folder + ": " + ec.message();
  return {};
}

} // namespace quarry::app
