// Updating the corpus index: the walk of the folders named, a reading
// thread that reads, extracts, splits and tokenizes changed files a few
// files ahead, and the queue of their writes, committed in short batches.

#include "index_internal.hpp"

#include "quarry/corpus/language.hpp"
#include "quarry/corpus/text.hpp"
#include "quarry/fetch/local_file.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace quarry::corpus {

namespace fs = std::filesystem;

using detail::db_error;
using detail::document_text;
using detail::exec;
using detail::file_type;
using detail::iso_date;
using detail::max_recorded_bytes;
using detail::mtime_date;
using detail::statement;
using detail::stem_language;
using detail::token_recorder;
using detail::token_recording;
using detail::type_of;

namespace {

// A batch of writes is committed when it holds this much text or this many
// files, so the write lock is held briefly and never while a file is read.
constexpr size_t batch_bytes = 8 * 1024 * 1024;
constexpr size_t batch_files = 512;
// ... or when its first write waited this long (slow files: what was read is
// searchable soon).
constexpr std::chrono::seconds batch_age{2};

struct file_stat {
  int64_t mtime = 0;
  int64_t size = 0;
  file_type type = file_type::none;
};

struct existing_doc {
  int64_t id = 0;
  int64_t mtime = 0;
  int64_t size = 0;
  std::string hash;
};

bool under(const std::string& path, const std::string& root) {
  if (path == root)
    return true;
  if (path.size() <= root.size() || path.compare(0, root.size(), root) != 0)
    return false;
  return root.back() == '/' || path[root.size()] == '/';
}

} // namespace

// -- updating -----------------------------------------------------------------

update_result corpus_index::update(const std::vector<std::string>& paths,
                                   const update_options& options) {
  std::lock_guard<std::mutex> guard{mtx_};
  update_result result;
  fetch::local_file_limits limits;
  limits.max_html_bytes = options.max_html_bytes;
  limits.max_pdf_bytes = options.max_pdf_bytes;
  // Every path is opened as found by the walk (links resolved already):
  // a link swapped in later is refused.
  limits.follow_symlinks = false;
  // Collect the files under every root.
  std::map<std::string, file_stat> found;
  std::vector<std::string> scanned;
  // Files found but not indexed: an earlier entry of theirs is removed.
  std::set<std::string> skipped;
  auto skip = [&](const std::string& path, const std::string& why) {
    if (!skipped.insert(path).second)
      return;
    result.notes.push_back("skipped " + path + ": " + why);
    ++result.skipped;
  };
  // Records a regular file (its real path) of a type that is indexed.
  auto consider = [&](const fs::path& p) {
    auto type = type_of(p);
    if (type == file_type::none)
      return;
    std::error_code ec;
    auto size = fs::file_size(p, ec);
    if (ec)
      return;
    auto mtime = fs::last_write_time(p, ec);
    if (ec)
      return;
    // Over the cap: not read at all (the reader checks again when it reads).
    bool pdf = type == file_type::pdf;
    if (static_cast<int64_t>(size) > (pdf ? limits.max_pdf_bytes : limits.max_html_bytes)) {
      skip(p.string(), fetch::too_large_error(limits, pdf).message);
      return;
    }
    found[p.string()] = file_stat{static_cast<int64_t>(mtime.time_since_epoch().count()),
                                  static_cast<int64_t>(size), type};
  };
  // A symbolic link met by the walk of `root`: followed only to a file
  // inside the root, which is then recorded under its own path (so it is
  // indexed once, however many links lead to it). Links to folders are not
  // followed: the walk reaches what is inside the root anyway, and links
  // cannot make it loop.
  auto consider_link = [&](const fs::path& link, const fs::path& root) {
    std::error_code ec;
    auto target = fs::canonical(link, ec);
    auto interesting = type_of(link) != file_type::none;
    if (ec) {
      if (interesting)
        skip(link.string(), "a broken symbolic link");
      return;
    }
    auto status = fs::status(target, ec);
    interesting = interesting || type_of(target) != file_type::none || fs::is_directory(status);
    if (!under(target.string(), root.string())) {
      if (interesting)
        skip(link.string(), "a symbolic link to " + target.string()
                              + ", outside the folder being indexed (" + root.string() + ")");
      return;
    }
    if (fs::is_regular_file(status))
      consider(target);
    else if (!fs::is_directory(status) && interesting)
      skip(link.string(),
           "a symbolic link to a file that " + fetch::describe_file_type(status.type()));
  };
  for (const auto& raw : paths) {
    if (raw.empty()) {
      result.notes.push_back("skipped an empty path");
      continue;
    }
    std::error_code ec;
    // A path named by the user is taken as it is, links resolved: that is
    // the folder (or file) being indexed.
    auto root = fs::weakly_canonical(fs::absolute(raw, ec), ec);
    if (ec)
      root = fs::absolute(raw, ec).lexically_normal();
    auto root_status = fs::status(root, ec);
    if (!fs::exists(root_status)) {
      // Whatever the index holds under a vanished path is gone too.
      result.notes.push_back("not found: " + raw);
      scanned.push_back(root.string());
      continue;
    }
    if (fs::is_regular_file(root_status)) {
      scanned.push_back(root.string());
      if (type_of(root) == file_type::none)
        result.notes.push_back("skipped " + raw + ": not a Markdown, text, HTML or PDF file");
      else
        consider(root);
      continue;
    }
    if (!fs::is_directory(root_status)) {
      // Never opened: a FIFO would block.
      skip(root.string(), fetch::describe_file_type(root_status.type()));
      continue;
    }
    scanned.push_back(root.string());
    fs::recursive_directory_iterator it{root, fs::directory_options::skip_permission_denied, ec};
    if (ec) {
      result.notes.push_back("cannot read " + raw + ": " + ec.message());
      continue;
    }
    for (; it != fs::recursive_directory_iterator{}; it.increment(ec)) {
      if (ec)
        break;
      const auto& entry = *it;
      auto name = entry.path().filename().string();
      auto status = entry.symlink_status(ec);
      if (ec)
        continue;
      if (!name.empty() && name.front() == '.') {
        if (fs::is_directory(status))
          it.disable_recursion_pending();
        continue;
      }
      if (fs::is_symlink(status))
        consider_link(entry.path(), root);
      else if (fs::is_regular_file(status))
        consider(entry.path());
      else if (!fs::is_directory(status) && type_of(entry.path()) != file_type::none)
        // FIFOs, sockets and devices are never opened.
        skip(entry.path().string(), fetch::describe_file_type(status.type()));
    }
  }
  // What the index holds (a snapshot: each batch checks again under the
  // write lock, as another process may be updating the same database).
  std::map<std::string, existing_doc> known;
  {
    statement st{db_, "SELECT id, path, mtime, size, hash FROM documents"};
    if (!st.ok()) {
      result.failure = db_error(db_, "cannot read the index");
      return result;
    }
    int rc = SQLITE_ROW;
    while ((rc = st.step()) == SQLITE_ROW)
      known[st.text_at(1)] = existing_doc{st.int_at(0), st.int_at(2), st.int_at(3), st.text_at(4)};
    if (rc != SQLITE_DONE) {
      result.failure = db_error(db_, "cannot read the index");
      return result;
    }
  }
  // Files are read and extracted outside any transaction, by a reading
  // thread that stays a few files ahead (so reading and extracting overlap
  // with indexing); their writes are queued and committed in short batches.
  struct file_outcome {
    enum state_t { unchanged, failed, touched, unreadable, read };
    state_t state = read;
    const std::string* path = nullptr;
    const file_stat* info = nullptr;
    // failed: why.
    std::string error;
    // From document_text: a remark, and whether the file is binary data.
    std::string note;
    bool binary = false;
    pending_write write;
  };
  // The reading thread tokenizes the passages it prepares (see
  // token_recording); without a recorder they are tokenized as inserted.
  token_recorder recorder;
  bool recording = options.tokenize_while_reading && recorder.init(db_);
  auto prepare = [&](const std::string& path, const file_stat& info) {
    file_outcome out;
    out.path = &path;
    out.info = &info;
    auto old = known.find(path);
    if (old != known.end() && old->second.mtime == info.mtime && old->second.size == info.size) {
      out.state = file_outcome::unchanged;
      return out;
    }
    if (options.before_read)
      options.before_read(path);
    auto read = fetch::read_local_file(path, limits);
    if (auto* err = std::get_if<sdk::error>(&read)) {
      out.state = file_outcome::failed;
      out.error = err->message;
      return out;
    }
    auto bytes = &std::get<std::string>(read);
    auto& w = out.write;
    w.path = path;
    w.mtime = info.mtime;
    w.size = info.size;
    w.hash = content_hash(*bytes);
    if (old != known.end() && old->second.hash == w.hash) {
      w.kind = pending_write::touch;
      out.state = file_outcome::touched;
      return out;
    }
    auto doc = document_text(path, info.type, std::move(*bytes));
    out.binary = doc.binary;
    out.note = std::move(doc.note);
    if (doc.unreadable) {
      out.state = file_outcome::unreadable;
      return out;
    }
    w.kind = pending_write::upsert;
    w.title = std::move(doc.title);
    w.text = std::move(doc.text);
    w.passages = split_passages(w.text);
    if (w.title.empty() && info.type != file_type::pdf)
      w.title = markdown_title(w.text);
    if (w.title.empty() && info.type == file_type::text)
      w.title = text_title(w.text);
    if (w.title.empty())
      w.title = fs::path{path}.stem().string();
    // The text tells its language better than a page's declaration
    // (templates often declare "en" whatever the text).
    w.language = detect_language(w.text);
    if (w.language.empty())
      w.language = doc.declared_language;
    if (recording && w.text.size() <= max_recorded_bytes)
      recorder.record(stem_language(w.language), w.text, w.passages, w.tokens);
    if (auto date = iso_date(doc.published); !date.empty()) {
      w.date = std::move(date);
      w.date_source = info.type == file_type::pdf ? "pdf" : "html";
    } else {
      w.date = mtime_date(path);
      w.date_source = "mtime";
    }
    return out;
  };
  // The queue between the reading thread and this one: at most two batches
  // of files, or 96 MB of text and recorded tokens (one larger file always
  // fits), besides the run of files this thread took from it last. The
  // reading thread stays a batch ahead while this one writes a batch.
  constexpr size_t max_ahead_files = 2 * batch_files;
  constexpr size_t max_ahead_bytes = 96 * 1024 * 1024;
  std::mutex queue_mtx;
  std::condition_variable queue_cv;
  std::deque<file_outcome> queue;
  size_t queued_bytes = 0;
  bool reader_done = false;
  bool stop_reading = false;
  std::thread reader{[&] {
    for (const auto& [path, info] : found) {
      file_outcome out;
      try {
        out = prepare(path, info);
      } catch (const std::exception& e) {
        out = file_outcome{};
        out.state = file_outcome::failed;
        out.path = &path;
        out.info = &info;
        out.error = std::string{"cannot read: "} + e.what();
      }
      std::unique_lock<std::mutex> lock{queue_mtx};
      queue_cv.wait(lock, [&] {
        return stop_reading || queue.empty()
               || (queue.size() < max_ahead_files && queued_bytes < max_ahead_bytes);
      });
      if (stop_reading)
        return;
      queued_bytes += out.write.text.size() + out.write.tokens.bytes.size()
                      + out.write.tokens.tokens.size() * sizeof(token_recording::token);
      queue.push_back(std::move(out));
      if (queue.size() == 1)
        queue_cv.notify_all();
    }
    std::lock_guard<std::mutex> lock{queue_mtx};
    reader_done = true;
    queue_cv.notify_all();
  }};
  // Stops and joins the reading thread on every way out of this function.
  struct reader_guard {
    std::function<void()> stop;
    ~reader_guard() {
      stop();
    }
  } guard_reader{[&] {
    {
      std::lock_guard<std::mutex> lock{queue_mtx};
      stop_reading = true;
    }
    queue_cv.notify_all();
    if (reader.joinable())
      reader.join();
  }};
  std::vector<pending_write> batch;
  size_t batch_size = 0;
  auto batch_started = std::chrono::steady_clock::now();
  update_progress progress;
  progress.files_total = found.size();
  for (const auto& [path, info] : found)
    progress.bytes_total += static_cast<uint64_t>(info.size);
  auto flush = [&] {
    if (batch.empty())
      return true;
    auto ok = write_batch(batch, result);
    batch.clear();
    batch_size = 0;
    return ok;
  };
  auto file_done = [&](const file_stat& info) {
    ++progress.files_done;
    progress.bytes_done += static_cast<uint64_t>(info.size);
    if (options.progress)
      options.progress(progress);
  };
  // What was taken from the queue at once (everything it held: one wake-up
  // per run of files, not per file).
  std::deque<file_outcome> ready;
  for (;;) {
    if (ready.empty()) {
      {
        std::unique_lock<std::mutex> lock{queue_mtx};
        queue_cv.wait(lock, [&] { return !queue.empty() || reader_done; });
        if (queue.empty())
          break;
        ready.swap(queue);
        queued_bytes = 0;
      }
      queue_cv.notify_all();
    }
    auto out = std::move(ready.front());
    ready.pop_front();
    const auto& path = *out.path;
    const auto& info = *out.info;
    if (out.binary)
      skipped.insert(path);
    if (!out.note.empty())
      result.notes.push_back(std::move(out.note));
    switch (out.state) {
      case file_outcome::unchanged:
        ++result.unchanged;
        file_done(info);
        continue;
      case file_outcome::failed:
        skip(path, out.error);
        file_done(info);
        continue;
      case file_outcome::unreadable:
        ++result.skipped;
        file_done(info);
        continue;
      case file_outcome::touched:
        ++result.unchanged;
        break;
      case file_outcome::read:
        break;
    }
    if (batch.empty())
      batch_started = std::chrono::steady_clock::now();
    batch_size += out.write.text.size() + 256;
    batch.push_back(std::move(out.write));
    file_done(info);
    if ((batch_size >= batch_bytes || batch.size() >= batch_files
         || std::chrono::steady_clock::now() - batch_started >= batch_age)
        && !flush())
      return result;
  }
  guard_reader.stop();
  for (const auto& [path, doc] : known) {
    // A file skipped now (a link out of the folder, binary data, too
    // large, ...) loses what an earlier update indexed of it.
    if (skipped.count(path) == 0) {
      if (found.count(path) != 0)
        continue;
      // (A structured binding cannot be captured in C++17: name it.)
      const auto& file = path;
      bool in_scope = std::any_of(scanned.begin(), scanned.end(),
                                  [&file](const auto& root) { return under(file, root); });
      std::error_code ec;
      if (!in_scope || fs::exists(path, ec))
        continue; // outside this update, or still there but not indexed
    }
    pending_write w;
    w.kind = pending_write::remove;
    w.path = path;
    batch.push_back(std::move(w));
  }
  if (!flush())
    return result;
  if (!refresh_term_stats())
    result.notes.push_back("could not refresh the term statistics: "
                           + std::string{sqlite3_errmsg(db_)});
  // Keep the WAL file small: its pages are in the database now.
  exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)");
  return result;
}

} // namespace quarry::corpus
