// This file is part of the Quarry plugin SDK.
// Masking secret values (API keys, tokens) in text that is shown or logged:
// one rule for the host and every plugin.

#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::sdk {

/// Secrets shorter than this are not masked: no real key is this short, and
/// masking a short value would garble ordinary words ("invalid_api_***ey"
/// for a key `k`) while hiding nothing.
inline constexpr size_t min_masked_secret_size = 8;

namespace detail {

inline bool is_secret_char(char c) noexcept {
  auto u = static_cast<unsigned char>(c);
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
         || c == '-' || u >= 0x80;
}

} // namespace detail

/// Replaces every whole occurrence of `secret` in `text` by `***`: an
/// occurrence inside a longer word or key is left alone, and so is a secret
/// shorter than @ref min_masked_secret_size.
inline std::string mask_secret(std::string text, std::string_view secret) {
  if (secret.size() < min_masked_secret_size)
    return text;
  size_t pos = 0;
  while ((pos = text.find(secret, pos)) != std::string::npos) {
    auto end = pos + secret.size();
    bool whole = (pos == 0 || !detail::is_secret_char(text[pos - 1])
                  || !detail::is_secret_char(secret.front()))
                 && (end == text.size() || !detail::is_secret_char(text[end])
                     || !detail::is_secret_char(secret.back()));
    if (!whole) {
      pos += 1;
      continue;
    }
    text.replace(pos, secret.size(), "***");
    pos += 3;
  }
  return text;
}

/// Applies @ref mask_secret for each of `secrets`.
inline std::string mask_secrets(std::string text, const std::vector<std::string>& secrets) {
  for (const auto& secret : secrets)
    text = mask_secret(std::move(text), secret);
  return text;
}

} // namespace quarry::sdk
