// libFuzzer target for the configuration loader: arbitrary bytes go to
// load_config_text, lines starting with `#= ` also become --set overrides.

#include "quarry/core/config.hpp"
#include "quarry/core/duration.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace quarry::core;

// A fixed environment, so that runs are reproducible.
std::optional<std::string> fake_env(const std::string& name) {
  if (name == "SET")
    return std::string{"value"};
  if (name == "NUM")
    return std::string{"42"};
  if (name == "EMPTY")
    return std::string{};
  return std::nullopt;
}

void check(bool condition) {
  if (!condition)
    abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text{reinterpret_cast<const char*>(data), size};
  load_options opts;
  opts.getenv = fake_env;
  // Lines like `#= key.path=value` are YAML comments and overrides.
  for (size_t pos = 0; pos < text.size();) {
    auto end = text.find('\n', pos);
    auto line = text.substr(pos,
                            end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (line.substr(0, 3) == "#= ")
      opts.overrides.emplace_back(line.substr(3));
    if (end == std::string_view::npos)
      break;
    pos = end + 1;
  }
  auto res = load_config_text(text, "fuzz.yaml", opts);
  check(res.config.has_value() == res.errors.empty());
  for (const auto& err : res.errors)
    check(!err.to_string().empty());
  if (res.config) {
    // The rendered configuration must load again to the same tree.
    auto yaml = res.config->render_yaml();
    load_options plain;
    plain.getenv = fake_env;
    auto again = load_config_text(yaml, "rendered.yaml", plain);
    check(again.config.has_value());
    check(again.config->effective == res.config->redacted());
    static_cast<void>(res.config->secret_values());
  }
  // The unit parsers see the raw bytes, too.
  if (size < 64) {
    if (auto d = parse_duration(text))
      check(parse_duration(format_duration(*d)) == d);
    if (auto s = parse_size(text))
      check(parse_size(format_size(*s)) == s);
  }
  return 0;
}
