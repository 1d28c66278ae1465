// Streaming of think_tool arguments as reasoning text.

#include "quarry/core/think_stream.hpp"

#include "quarry/core/tool_args.hpp"
#include "quarry/sdk/strings.hpp"

namespace quarry::core {

namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Reads 4 hex digits at `s[i]`; -1 if incomplete or invalid.
int32_t read_hex4(const std::string& s, size_t i) {
  if (i + 4 > s.size())
    return -1;
  int32_t v = 0;
  for (size_t k = 0; k < 4; ++k) {
    auto h = sdk::hex_digit_value(s[i + k]);
    if (h < 0)
      return -2;
    v = v << 4 | h;
  }
  return v;
}

} // namespace

std::string think_stream::feed(const sdk::tool_call_delta& delta) {
  if (!index_) {
    if (delta.name != tool_name)
      return {};
    index_ = delta.index;
  }
  if (delta.index != *index_)
    return {};
  if (!delta.id.empty() && id_.empty())
    id_ = delta.id;
  arguments_ += delta.arguments;
  scan();
  return take();
}

void think_stream::scan() {
  const auto& s = arguments_;
  if (phase_ == phase::prefix) {
    // `{` ws `"reasoning"` ws `:` ws `"`
    size_t i = 0;
    auto skip = [&] {
      while (i < s.size() && is_ws(s[i]))
        ++i;
    };
    skip();
    if (i >= s.size())
      return;
    if (s[i] != '{') {
      phase_ = phase::fallback;
      return;
    }
    ++i;
    skip();
    static constexpr std::string_view key = "\"reasoning\"";
    auto rest = std::string_view{s}.substr(i, key.size());
    if (rest != key.substr(0, rest.size())) {
      phase_ = phase::fallback;
      return;
    }
    if (rest.size() < key.size())
      return;
    i += key.size();
    skip();
    if (i >= s.size())
      return;
    if (s[i] != ':') {
      phase_ = phase::fallback;
      return;
    }
    ++i;
    skip();
    if (i >= s.size())
      return;
    if (s[i] != '"') {
      phase_ = phase::fallback;
      return;
    }
    pos_ = i + 1;
    phase_ = phase::value;
  }
  if (phase_ != phase::value)
    return;
  // Decode the string value up to an incomplete escape or the closing quote.
  while (pos_ < s.size()) {
    auto c = s[pos_];
    if (c == '"') {
      phase_ = phase::done;
      ++pos_;
      return;
    }
    if (c != '\\') {
      reasoning_ += c;
      ++pos_;
      continue;
    }
    if (pos_ + 1 >= s.size())
      return; // wait for the escaped character
    auto e = s[pos_ + 1];
    switch (e) {
      case 'n':
        reasoning_ += '\n';
        break;
      case 't':
        reasoning_ += '\t';
        break;
      case 'r':
        reasoning_ += '\r';
        break;
      case 'b':
        reasoning_ += '\b';
        break;
      case 'f':
        reasoning_ += '\f';
        break;
      case 'u': {
        auto v = read_hex4(s, pos_ + 2);
        if (v == -1)
          return; // incomplete
        if (v < 0) {
          reasoning_ += "\xEF\xBF\xBD";
          pos_ += 2;
          continue;
        }
        auto cp = static_cast<uint32_t>(v);
        size_t used = 6;
        if (cp >= 0xd800 && cp <= 0xdbff) {
          // A high surrogate needs its low half.
          if (pos_ + 12 > s.size())
            return;
          auto low = s[pos_ + 6] == '\\' && s[pos_ + 7] == 'u' ? read_hex4(s, pos_ + 8) : -2;
          if (low >= 0xdc00 && low <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (static_cast<uint32_t>(low) - 0xdc00);
            used = 12;
          } else {
            cp = 0xfffd;
          }
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
          cp = 0xfffd;
        }
        sdk::append_utf8(reasoning_, cp);
        pos_ += used;
        continue;
      }
      default: // `"`, `\`, `/` and anything else: the character itself
        reasoning_ += e;
    }
    pos_ += 2;
  }
}

std::string think_stream::take() {
  // Never split a UTF-8 sequence: hold back an incomplete one at the end.
  auto end = reasoning_.size();
  size_t back = 0;
  while (back < 4 && back < end
         && (static_cast<unsigned char>(reasoning_[end - 1 - back]) & 0xc0) == 0x80)
    ++back;
  if (back < end) {
    auto lead = static_cast<unsigned char>(reasoning_[end - 1 - back]);
    size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    if (need > back + 1)
      end -= back + 1;
  }
  if (end <= emitted_)
    return {};
  auto out = reasoning_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

std::string think_stream::finish() {
  if (finished_ || !index_)
    return {};
  finished_ = true;
  if (phase_ == phase::fallback || phase_ == phase::prefix) {
    // Not the expected shape: read the whole arguments once.
    auto parsed = parse_tool_arguments(arguments_);
    if (auto* obj = std::get_if<nlohmann::json>(&parsed)) {
      if (auto r = obj->find("reasoning"); r != obj->end() && r->is_string())
        reasoning_ = r->get<std::string>();
      else
        for (const auto& [key, value] : obj->items())
          if (value.is_string()) {
            reasoning_ = value.get<std::string>();
            break;
          }
    } else {
      reasoning_ = sanitize_utf8(arguments_);
    }
    emitted_ = 0;
  }
  auto out = reasoning_.substr(std::min(emitted_, reasoning_.size()));
  emitted_ = reasoning_.size();
  return out;
}

std::optional<sdk::tool_call> think_stream::call() const {
  if (!index_)
    return std::nullopt;
  sdk::tool_call out;
  out.id = id_;
  out.name = std::string{tool_name};
  out.arguments = arguments_;
  return out;
}

} // namespace quarry::core
