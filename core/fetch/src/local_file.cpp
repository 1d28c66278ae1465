// Reading a local file without blocking and within the size caps.

#include "quarry/fetch/local_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace quarry::fetch {

namespace {

namespace fs = std::filesystem;

// Bytes read before the cap is chosen (enough for is_pdf).
constexpr size_t head_bytes = 1024;

// Bytes read per read() call.
constexpr size_t chunk_bytes = 64 * 1024;

std::string size_text(int64_t bytes) {
  constexpr int64_t mib = 1024 * 1024;
  if (bytes % mib == 0)
    return std::to_string(bytes / mib) + " MiB";
  if (bytes % 1024 == 0)
    return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " bytes";
}

fs::file_type type_of_mode(mode_t mode) {
  if (S_ISREG(mode))
    return fs::file_type::regular;
  if (S_ISDIR(mode))
    return fs::file_type::directory;
  if (S_ISFIFO(mode))
    return fs::file_type::fifo;
  if (S_ISSOCK(mode))
    return fs::file_type::socket;
  if (S_ISCHR(mode))
    return fs::file_type::character;
  if (S_ISBLK(mode))
    return fs::file_type::block;
  if (S_ISLNK(mode))
    return fs::file_type::symlink;
  return fs::file_type::unknown;
}

sdk::error type_error(fs::file_type type) {
  if (type == fs::file_type::symlink)
    return sdk::make_error(sdk::errc::refused, describe_file_type(type));
  return sdk::make_error(sdk::errc::bad_request, describe_file_type(type));
}

sdk::error system_error(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return sdk::make_error(sdk::errc::not_found, "no such file");
    case EACCES:
    case EPERM:
      return sdk::make_error(sdk::errc::refused, "permission denied");
    case ELOOP:
      return sdk::make_error(sdk::errc::refused, describe_file_type(fs::file_type::symlink));
    default:
      return sdk::make_error(sdk::errc::internal,
                             std::string{"cannot read the file: "} + std::strerror(err));
  }
}

// Closes a descriptor on destruction.
class descriptor {
public:
  explicit descriptor(int fd) noexcept : fd_(fd) {
    // nop
  }

  ~descriptor() {
    if (fd_ >= 0)
      ::close(fd_);
  }

  descriptor(const descriptor&) = delete;
  descriptor& operator=(const descriptor&) = delete;

  int get() const noexcept {
    return fd_;
  }

private:
  int fd_;
};

// Appends up to `want` bytes from `fd` to `out`; stops early at the end of
// the file. Returns 0 or an errno value.
int read_some(int fd, std::string& out, size_t want) {
  while (want > 0) {
    auto old = out.size();
    auto n = std::min(want, chunk_bytes);
    out.resize(old + n);
    auto got = ::read(fd, out.data() + old, n);
    if (got < 0) {
      out.resize(old);
      if (errno == EINTR)
        continue;
      return errno;
    }
    out.resize(old + static_cast<size_t>(got));
    if (got == 0)
      return 0;
    want -= static_cast<size_t>(got);
  }
  return 0;
}

} // namespace

local_file_limits local_limits(const fetch_options& options) {
  local_file_limits out;
  out.max_html_bytes = options.max_html_bytes;
  out.max_pdf_bytes = options.max_pdf_bytes;
  return out;
}

std::string describe_file_type(fs::file_type type) {
  switch (type) {
    case fs::file_type::regular:
      return {};
    case fs::file_type::directory:
      return "is a folder";
    case fs::file_type::fifo:
      return "is not a regular file (a FIFO)";
    case fs::file_type::socket:
      return "is not a regular file (a socket)";
    case fs::file_type::character:
    case fs::file_type::block:
      return "is a device";
    case fs::file_type::symlink:
      return "is a symbolic link";
    case fs::file_type::not_found:
    case fs::file_type::none:
      return "no such file";
    default:
      return "is not a regular file";
  }
}

sdk::error too_large_error(const local_file_limits& limits, bool pdf) {
  auto cap = pdf ? limits.max_pdf_bytes : limits.max_html_bytes;
  return sdk::make_error(sdk::errc::too_large,
                         "is too large: more than " + size_text(cap) + ", the maximum size of "
                           + (pdf ? "PDF files (the open_url option max_pdf_size)"
                                  : "HTML and text files (the open_url option max_html_size)"));
}

std::variant<std::string, sdk::error> read_local_file(const std::string& path,
                                                      const local_file_limits& limits) {
  if (path.empty())
    return sdk::make_error(sdk::errc::not_found, "no such file");
  // Refuse what is not a regular file before opening it: opening a FIFO
  // waits for a writer, and opening some devices has side effects.
  struct stat st {};
  auto checked = limits.follow_symlinks ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
  if (checked != 0)
    return system_error(errno);
  if (!S_ISREG(st.st_mode))
    return type_error(type_of_mode(st.st_mode));
  // The path may name something else by now: open without blocking and
  // check what was opened.
  int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  if (!limits.follow_symlinks)
    flags |= O_NOFOLLOW;
  descriptor fd{::open(path.c_str(), flags)};
  if (fd.get() < 0)
    return system_error(errno);
  if (::fstat(fd.get(), &st) != 0)
    return system_error(errno);
  if (!S_ISREG(st.st_mode))
    return type_error(type_of_mode(st.st_mode));
  // Regular files never block; clear the flag anyway so reads are plain.
  if (auto fl = ::fcntl(fd.get(), F_GETFL); fl >= 0)
    ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  // The first bytes decide which cap applies; never read more than the
  // smaller cap plus one byte for them.
  auto smaller = std::max<int64_t>(0, std::min(limits.max_html_bytes, limits.max_pdf_bytes));
  auto head_want = std::min(head_bytes, static_cast<size_t>(smaller) + 1);
  std::string bytes;
  if (auto err = read_some(fd.get(), bytes, head_want))
    return system_error(err);
  bool at_end = bytes.size() < head_want;
  auto pdf = is_pdf({}, path, bytes);
  auto cap = std::max<int64_t>(0, pdf ? limits.max_pdf_bytes : limits.max_html_bytes);
  auto too_large = [&] { return too_large_error(limits, pdf); };
  if (st.st_size > cap)
    return too_large();
  // The file may grow while it is read: never read more than cap + 1 bytes.
  auto total = static_cast<size_t>(cap) + 1;
  if (!at_end && bytes.size() < total) {
    bytes.reserve(std::min(total, static_cast<size_t>(st.st_size) + 1));
    if (auto err = read_some(fd.get(), bytes, total - bytes.size()))
      return system_error(err);
  }
  if (static_cast<int64_t>(bytes.size()) > cap)
    return too_large();
  return bytes;
}

} // namespace quarry::fetch
