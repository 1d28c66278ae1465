// Writing a report to the path a user named (`--out`, `--html`), whatever is
// there: a regular file is replaced atomically and keeps its mode and owner, a
// symbolic link is followed to its target (the link stays), a character device
// or a FIFO is written through, anything else is refused.

#pragma once

#include <optional>
#include <string>
#include <vector>

namespace quarry::app {

/// Why `path` cannot take a report, or nothing when it can. Checked before
/// the research starts so that a bad path fails in a second, not at the end:
/// refuses folders, block devices, sockets, dangling symbolic links and
/// paths whose folder does not exist or cannot be written. Also refuses a
/// path that is (by name once links are followed, or by inode for a hard
/// link) one of `databases` or its `-wal`, `-shm` or `-journal` file:
/// replacing it would destroy the database under every process that uses
/// it. Only stat() looks at them; none is opened.
std::optional<std::string> check_output_path(const std::string& path,
                                             const std::vector<std::string>& databases = {});

/// Quarry's database files in `data_dir`: `*.db` files of the folder and of
/// its subfolders two levels down (the corpus indexes), plus `store_file`.
std::vector<std::string> database_files(const std::string& data_dir, const std::string& store_file);

/// Writes `text` to `path` (see the file comment). Returns the reason on
/// failure, naming `path` (never a temporary file) and the system's error.
/// A FIFO with no reader is an error, not a wait.
std::optional<std::string> write_output_file(const std::string& path, const std::string& text);

} // namespace quarry::app
