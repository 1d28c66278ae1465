// Charset detection with uchardet.

#include "quarry/extract/charset_detect.hpp"

#include "quarry/sdk/strings.hpp"

#include <uchardet.h>

#include <memory>
#include <string_view>
#include <utility>

namespace quarry::extract {

namespace {

// uchardet's names that the decoder knows under another label.
constexpr std::pair<std::string_view, std::string_view> aliases[] = {
  {"uhc", "euc-kr"}, // windows-949, which EUC-KR is read as
  {"mac-cyrillic", "x-mac-cyrillic"},
  {"ascii", "windows-1252"}, // only for bytes that are not UTF-8
};

// Longest name uchardet gives that is taken.
constexpr size_t max_name = 64;

struct detector_deleter {
  void operator()(uchardet* x) const noexcept {
    uchardet_delete(x);
  }
};

} // namespace

std::string detect_charset(std::string_view bytes) {
  std::unique_ptr<uchardet, detector_deleter> ud{uchardet_new()};
  if (!ud)
    return {};
  bytes = bytes.substr(0, max_detect_bytes);
  if (uchardet_handle_data(ud.get(), bytes.data(), bytes.size()) != 0)
    return {};
  uchardet_data_end(ud.get());
  const char* name = uchardet_get_charset(ud.get());
  if (name == nullptr)
    return {};
  std::string_view found{name};
  if (found.size() > max_name)
    return {};
  auto label = sdk::to_lower(found);
  for (const auto& [from, to] : aliases)
    if (label == from)
      return std::string{to};
  return label;
}

charset_detector make_charset_detector() {
  return [](std::string_view bytes) { return detect_charset(bytes); };
}

} // namespace quarry::extract
