// Opening and reading regular files without blocking and within a cap.

#include "quarry/core/regular_file.hpp"

#include "quarry/core/duration.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace quarry::core {

namespace {

// Bytes read per read() call.
constexpr size_t chunk_bytes = 64 * 1024;

file_error not_regular(mode_t mode) {
  return {file_error::kind::not_regular, describe_file_type(mode)};
}

// Describes why stat() or open() of `path` failed with `err`.
file_error system_error(const std::string& path, int err) {
  struct ::stat st {};
  switch (err) {
    case ENOENT:
      // A link to nothing is something else than nothing.
      if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
        return {file_error::kind::not_regular, "is a dangling symbolic link"};
      return {file_error::kind::not_found, "no such file"};
    case ELOOP:
      return {file_error::kind::not_regular, "is a symbolic link loop"};
    case ENOTDIR:
      return {file_error::kind::not_found, "a part of the path is not a directory"};
    default:
      return {file_error::kind::unreadable, std::strerror(err)};
  }
}

} // namespace

opened_file::opened_file(int fd, const struct ::stat& status) noexcept : fd_(fd), status_(status) {
  // nop
}

opened_file::opened_file(opened_file&& other) noexcept
  : fd_(std::exchange(other.fd_, -1)), status_(other.status_) {
  // nop
}

opened_file& opened_file::operator=(opened_file&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    status_ = other.status_;
  }
  return *this;
}

opened_file::~opened_file() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::string mode_text(mode_t mode) {
  char out[8];
  std::snprintf(out, sizeof(out), "%04o", static_cast<unsigned>(mode & 07777));
  return out;
}

std::string describe_file_type(mode_t mode) {
  if (S_ISREG(mode))
    return {};
  if (S_ISDIR(mode))
    return "is a directory";
  if (S_ISFIFO(mode))
    return "is a FIFO";
  if (S_ISCHR(mode))
    return "is a character device";
  if (S_ISBLK(mode))
    return "is a block device";
  if (S_ISSOCK(mode))
    return "is a socket";
  if (S_ISLNK(mode))
    return "is a symbolic link";
  return "is not a regular file";
}

std::variant<opened_file, file_error> open_regular_file(const std::string& path) {
  if (path.empty())
    return file_error{file_error::kind::not_found, "no such file"};
  // Refuse what is not a regular file before opening it.
  struct ::stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return system_error(path, errno);
  if (!S_ISREG(st.st_mode))
    return not_regular(st.st_mode);
  // The path may name something else by now: open without blocking and
  // check what was opened.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return system_error(path, errno);
  if (::fstat(fd, &st) != 0) {
    auto err = errno;
    ::close(fd);
    return file_error{file_error::kind::unreadable, std::strerror(err)};
  }
  opened_file file{fd, st};
  if (!S_ISREG(st.st_mode))
    return not_regular(st.st_mode);
  // Regular files never block; clear the flag so that reads are plain.
  if (auto flags = ::fcntl(fd, F_GETFL); flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return std::variant<opened_file, file_error>{std::move(file)};
}

std::variant<regular_file_text, file_error> read_regular_file(const std::string& path,
                                                              size_t max_bytes) {
  auto opened = open_regular_file(path);
  if (auto* err = std::get_if<file_error>(&opened))
    return std::move(*err);
  const auto& file = std::get<opened_file>(opened);
  auto too_large = [&] {
    return file_error{file_error::kind::too_large,
                      "is larger than " + format_size(static_cast<int64_t>(max_bytes))};
  };
  if (file.status().st_size > 0 && static_cast<uint64_t>(file.status().st_size) > max_bytes)
    return too_large();
  regular_file_text out;
  out.status = file.status();
  // Read one byte more than the cap: the file may have grown since fstat.
  auto want = max_bytes + 1;
  while (out.text.size() < want) {
    auto old = out.text.size();
    auto n = std::min(want - old, chunk_bytes);
    out.text.resize(old + n);
    auto got = ::read(file.fd(), out.text.data() + old, n);
    if (got < 0) {
      out.text.resize(old);
      if (errno == EINTR)
        continue;
      return file_error{file_error::kind::unreadable, std::strerror(errno)};
    }
    out.text.resize(old + static_cast<size_t>(got));
    if (got == 0)
      break;
  }
  if (out.text.size() > max_bytes)
    return too_large();
  return std::variant<regular_file_text, file_error>{std::move(out)};
}

} // namespace quarry::core
