// libFuzzer target: charset decoding, sniffing and HTML extraction of
// arbitrary bytes must neither crash nor produce invalid UTF-8 from decoding.

#include "quarry/extract/html.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace ce = quarry::extract;

namespace {

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || i + len > s.size())
      return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
        return false;
    i += len;
  }
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes{reinterpret_cast<const char*>(data), size};
  // The first line (up to 64 bytes) doubles as a Content-Type header.
  auto nl = bytes.substr(0, 64).find('\n');
  auto header = nl == std::string_view::npos ? std::string_view{} : bytes.substr(0, nl);
  ce::sniff(header, bytes);
  auto text = ce::decode_to_utf8(bytes, header);
  if (!valid_utf8(text))
    std::abort();
  auto x = ce::extract_html(text, "https://example.com/a/b");
  (void)x;
  ce::html_to_text(text);
  return 0;
}
