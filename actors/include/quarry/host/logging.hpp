// Process-wide logging through spdlog: to stderr, as text or JSON lines, with
// every known secret value masked.

#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::host {

/// Parses `trace`, `debug`, `info`, `warn`, `error` or `off`. Returns false
/// for anything else.
bool valid_log_level(std::string_view level);

/// Installs the default logger: stderr, `format` is `text` or `json`, lines
/// below `level` are dropped. Every occurrence of a string in `secrets`
/// (values shorter than 4 characters are ignored) is written as `***`.
void setup_logging(std::string_view level, std::string_view format,
                   std::vector<std::string> secrets = {});

/// Replaces every occurrence of each secret in `line` by `***`.
std::string mask_secrets(std::string line, const std::vector<std::string>& secrets);

} // namespace quarry::host
