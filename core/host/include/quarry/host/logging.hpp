// Process-wide logging through spdlog: to stderr, as text or JSON lines, with
// every known secret value masked.

#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::host {

/// Parses `trace`, `debug`, `info`, `warn`, `error` or `off`. Returns false
/// for anything else.
bool valid_log_level(std::string_view level);

/// Installs the default logger: stderr, `format` is `plain` (`quarry:
/// warning: ...`, the look of the command's own messages), `text` (a
/// timestamp and the level first, for diagnosis) or `json`; lines below
/// `level` are dropped. Every occurrence of a string in `secrets`
/// (see sdk::mask_secrets) is written as `***`.
void setup_logging(std::string_view level, std::string_view format,
                   std::vector<std::string> secrets = {});

} // namespace quarry::host
