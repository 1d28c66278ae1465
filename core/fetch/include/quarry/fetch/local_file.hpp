// Reading a local file for `quarry extract` and the local corpus: regular
// files only, never blocking on a FIFO or touching a device, and within the
// size caps that apply to fetched pages.
#pragma once

#include "quarry/fetch/fetch.hpp"

#include "quarry/sdk/types.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>

namespace quarry::fetch {

/// Limits of @ref read_local_file.
struct local_file_limits {
  /// Largest file that is not a PDF, in bytes.
  int64_t max_html_bytes = default_max_html_bytes;
  /// Largest PDF file, in bytes.
  int64_t max_pdf_bytes = default_max_pdf_bytes;
  /// Whether a symbolic link as the last component of the path is followed;
  /// when false such a path is refused (`O_NOFOLLOW`), so a file swapped for
  /// a link after it was checked is never read through the link.
  bool follow_symlinks = true;
};

/// The size caps of `options` (the open_url options `max_html_size` and
/// `max_pdf_size`), following symbolic links.
local_file_limits local_limits(const fetch_options& options);

/// Why a file of type `type` cannot be read as a document: "is a folder",
/// "is not a regular file (a FIFO)", "is not a regular file (a socket)",
/// "is a device", "is a symbolic link", "no such file"; empty for a regular
/// file.
std::string describe_file_type(std::filesystem::file_type type);

/// The errc::too_large error of @ref read_local_file for a file larger than
/// `limits` allow (`pdf`: a PDF file, else any other).
sdk::error too_large_error(const local_file_limits& limits, bool pdf);

/// Reads the regular file at `path`. The path is checked with stat (lstat
/// when links are not followed) and anything but a regular file is refused
/// without opening it; the file is then opened with `O_NONBLOCK` (and
/// `O_NOFOLLOW` when links are not followed) and the open descriptor checked
/// again, so a FIFO or device swapped in after the check cannot block or be
/// read. At most the applicable cap plus one byte is read: `max_pdf_bytes`
/// when the file is a PDF (@ref is_pdf on its name and first bytes),
/// `max_html_bytes` otherwise; a larger file gives errc::too_large.
///
/// Errors say what is wrong without naming the file (the caller does):
/// errc::not_found ("no such file"), errc::bad_request (the type, see
/// @ref describe_file_type), errc::too_large, errc::refused ("permission
/// denied", "is a symbolic link") or errc::internal (any other system error).
std::variant<std::string, sdk::error> read_local_file(const std::string& path,
                                                      const local_file_limits& limits);

} // namespace quarry::fetch
