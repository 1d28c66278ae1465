// Writing reports to user-named paths without destroying what is there.

#include "output_file.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <variant>

#include <csignal>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

namespace quarry::app {

namespace fs = std::filesystem;

namespace {

std::string in_quotes(const std::string& path) {
  return "'" + path + "'";
}

// The message of every refusal and failure: it names the path the user gave.
std::string cannot(const std::string& path, const std::string& why) {
  return "cannot write the report to " + in_quotes(path) + ": " + why;
}

std::string sys_error(int err) {
  return std::strerror(err);
}

/// What a path names once symbolic links are followed.
enum class target_kind {
  /// Nothing there yet: a new regular file.
  missing,
  regular,
  /// A FIFO or a character device: written through.
  stream,
};

struct resolved {
  target_kind kind = target_kind::missing;
  /// Where a regular file is written: the path itself, or the target of a
  /// symbolic link.
  std::string target;
  struct stat st {};
};

std::string folder_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::optional<std::string> refuse_kind(const std::string& path, mode_t mode) {
  if (S_ISDIR(mode))
    return cannot(path, "it is a folder");
  if (S_ISBLK(mode))
    return cannot(path, "it is a block device");
  if (S_ISSOCK(mode))
    return cannot(path, "it is a socket");
  if (!S_ISREG(mode) && !S_ISFIFO(mode) && !S_ISCHR(mode))
    return cannot(path, "it is not a file, a FIFO or a character device");
  return std::nullopt;
}

std::optional<std::string> check_folder(const std::string& path, const std::string& target,
                                        bool exists) {
  if (exists && ::access(target.c_str(), W_OK) != 0)
    return cannot(path, sys_error(errno));
  auto folder = folder_of(target);
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return cannot(path, "the folder " + in_quotes(folder) + " does not exist");
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    return cannot(path, "the folder " + in_quotes(folder) + " is not writable (" + sys_error(errno)
                          + ")");
  return std::nullopt;
}

/// Follows `path` to what it names; an error when nothing can be written
/// there.
std::variant<resolved, std::string> resolve(const std::string& path) {
  resolved r;
  if (path.empty())
    return std::string{"cannot write the report: the path is empty"};
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0) {
    if (errno != ENOENT)
      return cannot(path, sys_error(errno));
    r.kind = target_kind::missing;
    r.target = path;
    if (auto err = check_folder(path, path, false))
      return *err;
    return r;
  }
  if (S_ISLNK(lst.st_mode)) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      auto err = errno;
      char buf[4096];
      auto n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
      std::string to = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
      if (err == ENOENT)
        return cannot(path, "it is a symbolic link to " + in_quotes(to) + ", which does not exist");
      return cannot(path,
                    "it is a symbolic link to " + in_quotes(to) + " (" + sys_error(err) + ")");
    }
    if (auto err = refuse_kind(path, st.st_mode))
      return *err;
    r.st = st;
    if (S_ISREG(st.st_mode)) {
      // The link stays; its target gets the new text.
      char* real = ::realpath(path.c_str(), nullptr);
      if (real == nullptr)
        return cannot(path, sys_error(errno));
      r.target = real;
      std::free(real);
      r.kind = target_kind::regular;
      if (auto err = check_folder(path, r.target, true))
        return *err;
    } else {
      r.kind = target_kind::stream;
      r.target = path;
    }
    return r;
  }
  if (auto err = refuse_kind(path, lst.st_mode))
    return *err;
  r.st = lst;
  r.target = path;
  if (S_ISREG(lst.st_mode)) {
    r.kind = target_kind::regular;
    if (auto err = check_folder(path, path, true))
      return *err;
  } else {
    r.kind = target_kind::stream;
  }
  return r;
}

bool write_all(int fd, std::string_view text, int& err) {
  while (!text.empty()) {
    auto n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = errno;
      return false;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

/// A temporary file beside `target`, created with mode 0666 less the umask.
int create_temporary(const std::string& target, std::string& tmp, int& err) {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  auto folder = folder_of(target);
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp = folder + "/." + base_of(target) + ".quarry-" + std::to_string(::getpid()) + "-"
          + std::to_string(counter++) + "-" + std::to_string(rd() % 100000);
    auto fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd >= 0)
      return fd;
    if (errno != EEXIST) {
      err = errno;
      return -1;
    }
  }
  err = EEXIST;
  return -1;
}

std::optional<std::string> write_regular(const std::string& path, const resolved& r,
                                         const std::string& text) {
  auto fail = [&](int err) { return cannot(path, sys_error(err)); };
  std::string tmp;
  int err = 0;
  auto fd = create_temporary(r.target, tmp, err);
  if (fd < 0)
    return fail(err);
  auto discard = [&](int e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail(e);
  };
  if (r.kind == target_kind::regular) {
    // Keep the existing file's mode and, where allowed, its owner.
    if (::fchmod(fd, r.st.st_mode & 07777) != 0)
      return discard(errno);
    if (::geteuid() == 0)
      (void)::fchown(fd, r.st.st_uid, r.st.st_gid);
  }
  if (!write_all(fd, text, err))
    return discard(err);
  if (::fsync(fd) != 0)
    return discard(errno);
  if (::close(fd) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    return fail(err);
  }
  if (::rename(tmp.c_str(), r.target.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    return fail(err);
  }
  auto dir = ::open(folder_of(r.target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return std::nullopt;
}

/// Blocks SIGPIPE in this thread while alive and drops one that a write
/// raised, so that a reader going away is an error, not the end of Quarry.
class sigpipe_guard {
public:
  sigpipe_guard() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending_before_);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~sigpipe_guard() {
    if (sigismember(&pending_before_, SIGPIPE) == 0) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      timespec zero{0, 0};
      while (sigtimedwait(&set, nullptr, &zero) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

private:
  sigset_t old_{};
  sigset_t pending_before_{};
};

std::optional<std::string> write_stream(const std::string& path, const std::string& text) {
  auto fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO)
      return cannot(path, "it is a FIFO and no process is reading it");
    return cannot(path, sys_error(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))) {
    ::close(fd);
    return cannot(path, "it changed while it was opened");
  }
  auto flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int err = 0;
  bool ok;
  {
    sigpipe_guard guard;
    ok = write_all(fd, text, err);
  }
  ::close(fd);
  if (!ok)
    return cannot(path, sys_error(err));
  return std::nullopt;
}

} // namespace

std::optional<std::string> check_output_path(const std::string& path,
                                             const std::vector<std::string>& databases) {
  auto r = resolve(path);
  if (auto* err = std::get_if<std::string>(&r))
    return *err;
  const auto& res = std::get<resolved>(r);
  if (res.kind == target_kind::stream)
    return std::nullopt;
  std::error_code ec;
  auto target = fs::weakly_canonical(res.target, ec);
  for (const auto& db : databases) {
    auto file = fs::weakly_canonical(db, ec);
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      auto name = file.string() + suffix;
      struct stat st {};
      bool same = target.string() == name
                  || (res.kind == target_kind::regular && ::stat(name.c_str(), &st) == 0
                      && st.st_dev == res.st.st_dev && st.st_ino == res.st.st_ino);
      if (same)
        return cannot(path, "it is Quarry's database " + in_quotes(name) + "; choose another file");
    }
  }
  return std::nullopt;
}

std::vector<std::string> database_files(const std::string& data_dir,
                                        const std::string& store_file) {
  std::vector<std::string> out{store_file};
  std::error_code ec;
  fs::recursive_directory_iterator it{data_dir, fs::directory_options::none, ec};
  for (fs::recursive_directory_iterator end; !ec && it != end; it.increment(ec)) {
    if (it.depth() >= 2)
      it.disable_recursion_pending();
    if (it->path().extension() == ".db" && it->is_regular_file(ec))
      out.push_back(it->path().string());
  }
  return out;
}

std::optional<std::string> write_output_file(const std::string& path, const std::string& text) {
  auto r = resolve(path);
  if (auto* err = std::get_if<std::string>(&r))
    return *err;
  auto& res = std::get<resolved>(r);
  if (res.kind == target_kind::stream)
    return write_stream(path, text);
  return write_regular(path, res, text);
}

} // namespace quarry::app
