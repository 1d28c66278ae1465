// Charset detection for documents that name no charset: uchardet (Mozilla's
// universal charset detector, Debian's libuchardet) behind the decoder's
// charset_detector. Used by open_url and `quarry extract`.
#pragma once

#include "quarry/extract/html.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace quarry::extract {

/// Most bytes of a page given to the detector: its guess settles within the
/// first few kilobytes of text, and the cost stays bounded for a 20 MiB
/// page.
inline constexpr size_t max_detect_bytes = 256 * 1024;

/// Guesses the encoding of `bytes` (at most `max_detect_bytes` of them) with
/// uchardet: its answer in lower case (`gb18030`, `shift_jis`,
/// `windows-1251`), with the names the decoder knows under another label
/// mapped (`uhc` to `euc-kr`, `mac-cyrillic` to `x-mac-cyrillic`), or ""
/// when uchardet is unsure. A name the decoder does not read (EUC-TW,
/// ISO-2022-CN/KR, HZ, VISCII...) leaves the decision to the windows-1252
/// fallback, as an empty answer does.
std::string detect_charset(std::string_view bytes);

/// detect_charset as the decoder's detector.
charset_detector make_charset_detector();

} // namespace quarry::extract
