// Opening and reading the files that configure Quarry (the configuration
// file, prompt overrides) and the plugin files it loads: regular files only,
// never blocking on a FIFO, never opening a device, within a size cap.

#pragma once

#include <cstddef>
#include <string>
#include <variant>

#include <sys/stat.h>

namespace quarry::core {

/// Why @ref open_regular_file or @ref read_regular_file refused a path.
struct file_error {
  enum class kind {
    /// Nothing is there.
    not_found,
    /// Something that is not a regular file, or a link to nothing.
    not_regular,
    /// A regular file larger than the cap.
    too_large,
    /// Any other failure (permission denied, an I/O error).
    unreadable,
  };
  kind what = kind::unreadable;
  /// What is wrong, without the path (the caller names it): "no such file",
  /// "is a directory", "is a FIFO", "is a character device", "is a block
  /// device", "is a socket", "is a dangling symbolic link", "is a symbolic
  /// link loop", "a part of the path is not a directory", "is larger than
  /// 1MiB"; for `unreadable` the system's words ("Permission denied").
  std::string message;
};

/// A regular file open for reading; the descriptor is closed on destruction.
class opened_file {
public:
  opened_file(int fd, const struct ::stat& status) noexcept;

  opened_file(opened_file&& other) noexcept;

  opened_file& operator=(opened_file&& other) noexcept;

  opened_file(const opened_file&) = delete;

  opened_file& operator=(const opened_file&) = delete;

  ~opened_file();

  /// The open descriptor (`O_RDONLY | O_CLOEXEC`, blocking).
  int fd() const noexcept {
    return fd_;
  }

  /// The status of the open file (fstat), links followed.
  const struct ::stat& status() const noexcept {
    return status_;
  }

private:
  int fd_ = -1;
  struct ::stat status_ {};
};

/// Opens the regular file at `path`; a symbolic link to one is followed.
/// Anything else is refused without opening it (opening a FIFO waits for a
/// writer, opening some devices has effects); the file is then opened with
/// `O_NONBLOCK | O_NOCTTY` and the open descriptor checked again, so
/// something swapped in after the first look cannot block or be read either.
std::variant<opened_file, file_error> open_regular_file(const std::string& path);

/// A file read by @ref read_regular_file.
struct regular_file_text {
  /// The whole content.
  std::string text;
  /// The status of the file read (links followed): owner, mode.
  struct ::stat status {};
};

/// Reads the regular file at `path` (see @ref open_regular_file), at most
/// `max_bytes` bytes: a larger file is refused with `file_error::too_large`.
std::variant<regular_file_text, file_error> read_regular_file(const std::string& path,
                                                              size_t max_bytes);

/// The permission bits of `mode` as a message shows them: four octal digits
/// ("0644", "1777").
std::string mode_text(mode_t mode);

/// Describes a file type for a message: "is a directory", "is a FIFO", ...;
/// empty for a regular file.
std::string describe_file_type(mode_t mode);

} // namespace quarry::core
