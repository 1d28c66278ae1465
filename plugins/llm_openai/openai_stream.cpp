// Decoding of OpenAI-style Chat Completions streams: SSE events, chunk JSON,
// tool-call accumulation and error classification.

#include "openai_stream.hpp"

#include "quarry/sdk/http_errors.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

namespace quarry::plugins::llm_openai {

namespace {

using nlohmann::json;

// Longest error message we keep from a body.
constexpr size_t max_message_size = 600;

// Returns the member `key` of `x` if `x` is an object holding it, else null.
const json* member(const json& x, std::string_view key) {
  if (!x.is_object())
    return nullptr;
  auto i = x.find(key);
  return i == x.end() ? nullptr : &*i;
}

// Returns the string member `key`, or an empty view.
std::string_view string_member(const json& x, std::string_view key) {
  auto ptr = member(x, key);
  if (ptr == nullptr || !ptr->is_string())
    return {};
  return ptr->get_ref<const std::string&>();
}

// Returns the numeric member `key` as an integer, if it is a number.
std::optional<int64_t> int_member(const json& x, std::string_view key) {
  auto ptr = member(x, key);
  if (ptr == nullptr)
    return std::nullopt;
  if (ptr->is_number_integer())
    return ptr->get<int64_t>();
  if (ptr->is_number_unsigned()) {
    auto value = ptr->get<uint64_t>();
    return value > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(value);
  }
  if (ptr->is_number_float()) {
    auto value = ptr->get<double>();
    if (std::isfinite(value) && std::fabs(value) < 9.0e18)
      return static_cast<int64_t>(value);
  }
  return std::nullopt;
}

// Shortens a message (never inside a UTF-8 sequence) and repairs its UTF-8.
std::string truncate(std::string x) {
  if (x.size() > max_message_size) {
    x.resize(sdk::utf8_prefix(x, max_message_size).size());
    x += "...";
  }
  sdk::repair_utf8_in_place(x);
  return x;
}

// Returns whether the start of a body looks like an event stream: a field
// line (`data:`, `event:`, `id:`, `retry:`) or a comment.
bool looks_like_sse(std::string_view head) {
  if (head.substr(0, 3) == "\xEF\xBB\xBF")
    head.remove_prefix(3);
  while (!head.empty() && (head.front() == '\n' || head.front() == '\r'))
    head.remove_prefix(1);
  if (head.empty() || head.front() == ':')
    return true;
  for (std::string_view field : {"data", "event", "id", "retry"})
    if (head.substr(0, field.size()) == field
        && (head.size() == field.size() || head[field.size()] == ':' || head[field.size()] == '\n'
            || head[field.size()] == '\r'))
      return true;
  return false;
}

// A one-line preview of a body for error messages.
std::string preview(std::string_view body) {
  std::string text;
  for (auto c : sdk::utf8_prefix(body, 160)) {
    auto blank = c == '\n' || c == '\r' || c == '\t';
    if (blank && !text.empty() && text.back() == ' ')
      continue;
    text += blank ? ' ' : c;
  }
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  sdk::repair_utf8_in_place(text);
  return text;
}

// Parses a duration hint such as `6ms` or `34.4s`, refusing absurdly long
// ones (sdk::parse_duration_hint does not guard against overflow).
std::optional<int64_t> bounded_duration(std::string_view x) {
  if (x.empty() || x.size() > 12)
    return std::nullopt;
  return sdk::parse_duration_hint(x);
}

// Maps the type / code strings of an error without a usable HTTP status.
std::optional<sdk::errc> classify_type(std::string_view x) {
  using sdk::errc;
  if (x == "rate_limit_exceeded" || x == "rate_limit_error" || x == "tokens" || x == "requests"
      || x == "rate_limit")
    return errc::rate_limited;
  if (x == "overloaded_error" || x == "overloaded" || x == "service_unavailable")
    return errc::overloaded;
  if (x == "server_error" || x == "api_error" || x == "internal_error"
      || x == "internal_server_error")
    return errc::server_error;
  if (x == "invalid_request_error" || x == "bad_request")
    return errc::bad_request;
  if (x == "authentication_error" || x == "permission_error" || x == "invalid_api_key"
      || x == "permission_denied")
    return errc::auth;
  if (x == "not_found_error" || x == "not_found")
    return errc::not_found;
  return std::nullopt;
}

// Maps a Google RPC status such as RESOURCE_EXHAUSTED.
std::optional<sdk::errc> classify_google_status(std::string_view x) {
  using sdk::errc;
  if (x == "RESOURCE_EXHAUSTED")
    return errc::rate_limited;
  if (x == "UNAVAILABLE")
    return errc::overloaded;
  if (x == "DEADLINE_EXCEEDED")
    return errc::timeout;
  if (x == "UNAUTHENTICATED" || x == "PERMISSION_DENIED")
    return errc::auth;
  if (x == "NOT_FOUND")
    return errc::not_found;
  if (x == "INVALID_ARGUMENT" || x == "FAILED_PRECONDITION")
    return errc::bad_request;
  if (x == "INTERNAL" || x == "UNKNOWN")
    return errc::server_error;
  return std::nullopt;
}

// -- the common chunk, read without a tree -----------------------------------

// The members of a chunk the decoder uses, read in one pass without building
// a tree (nlohmann's parser, tree or SAX, cost about 4 us per chunk of a few
// hundred bytes, most of the decoder's time): `model`, `usage`, and for each
// element of `choices` its `index`, `finish_reason`, and the text fields and
// `tool_calls` of its `delta` and `message` objects. A member given twice
// counts with its last value, as in the tree.
//
// The reader is strict: it accepts only text nlohmann's parser accepts and
// reads it the same way. Whatever it does not handle itself (an `error` that
// is not null, an index or token count that is not a plain integer, a tool
// call's `arguments` given as an object or array, nesting past the limit,
// anything malformed) makes read() return false, and the chunk is decoded
// from its tree instead, which is the reference (a unit test and the
// `openai` fuzz target compare the two). The text must be valid UTF-8
// (on_event repairs it first).
struct fast_chunk {
  /// One element of `tool_calls`, as tool_call_accumulator::add reads it.
  struct call {
    bool is_object = false;
    std::optional<int64_t> index;
    std::string id, name, arguments;
  };
  struct texts {
    bool is_object = false;
    std::string content, refusal, reasoning_content, reasoning;
    /// The elements of `tool_calls` (its last occurrence), if an array.
    std::vector<call> calls;
  };
  struct choice {
    bool is_object = false;
    std::optional<int64_t> index;
    std::string finish_reason;
    texts delta, message;
  };
  std::string model;
  std::vector<choice> choices;
  /// The counts of `usage` (its last occurrence), if an object.
  struct token_counts {
    std::optional<int64_t> prompt, completion, reasoning, cached;
  };
  std::optional<token_counts> usage;

  bool read(std::string_view text);
};

class fast_chunk_reader {
public:
  fast_chunk_reader(fast_chunk& out, std::string_view text)
    : out_(out), p_(text.data()), end_(text.data() + text.size()) {
    // nop
  }

  bool read() {
    skip_space();
    if (p_ == end_ || *p_ != '{' || !chunk())
      return false;
    skip_space();
    return p_ == end_;
  }

private:
  // The containers whose members the decoder reads.
  enum class container : uint8_t {
    chunk,
    choice,
    texts,
    call,
    function,
    usage,
    completion_details,
    prompt_details
  };

  void skip_space() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r'))
      ++p_;
  }

  bool take(char c) {
    skip_space();
    if (p_ == end_ || *p_ != c)
      return false;
    ++p_;
    return true;
  }

  // Four hex digits of a \u escape.
  bool hex4(uint32_t& x) {
    if (end_ - p_ < 4)
      return false;
    x = 0;
    for (int i = 0; i < 4; ++i) {
      auto c = *p_++;
      x <<= 4;
      if (c >= '0' && c <= '9')
        x |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        x |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        x |= static_cast<uint32_t>(c - 'A' + 10);
      else
        return false;
    }
    return true;
  }

  // The end of the run of a string's bytes that stand for themselves, from
  // `from`: its first `"`, `\\` or control character, or end_. Sixteen bytes
  // at a time (sdk::json_plain_end); a byte of a UTF-8 sequence stands for
  // itself here (the text is valid UTF-8).
  const char* plain_end(const char* from) const {
    std::string_view rest{from, static_cast<size_t>(end_ - from)};
    size_t i = 0;
    for (;;) {
      i = sdk::json_plain_end(rest, i);
      if (i == rest.size() || static_cast<unsigned char>(rest[i]) < 0x80)
        return from + i;
      ++i;
    }
  }

  // A member's key at p_ (its opening quote), into key_view_: in place when
  // it holds no escape (as keys do), else decoded into key_.
  bool key() {
    if (p_ == end_ || *p_ != '"')
      return false;
    auto start = p_ + 1;
    auto q = plain_end(start);
    if (q != end_ && *q == '"') {
      key_view_ = std::string_view{start, static_cast<size_t>(q - start)};
      p_ = q + 1;
      return true;
    }
    if (!string(&key_))
      return false;
    key_view_ = key_;
    return true;
  }

  // A string at p_ (its opening quote); its value goes to `out` if given.
  bool string(std::string* out) {
    if (p_ == end_ || *p_ != '"')
      return false;
    ++p_;
    if (out != nullptr)
      out->clear();
    for (;;) {
      auto run = p_;
      p_ = plain_end(p_);
      if (out != nullptr)
        out->append(run, p_);
      if (p_ == end_ || static_cast<unsigned char>(*p_) < 0x20)
        return false;
      if (*p_++ == '"')
        return true;
      if (p_ == end_)
        return false;
      char c = *p_++;
      char plain = 0;
      switch (c) {
        case '"':
        case '\\':
        case '/':
          plain = c;
          break;
        case 'b':
          plain = '\b';
          break;
        case 'f':
          plain = '\f';
          break;
        case 'n':
          plain = '\n';
          break;
        case 'r':
          plain = '\r';
          break;
        case 't':
          plain = '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(cp))
            return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF)
            return false; // a low surrogate first
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u')
              return false;
            p_ += 2;
            if (!hex4(low) || low < 0xDC00 || low > 0xDFFF)
              return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          if (out != nullptr)
            sdk::append_utf8(*out, cp); // cp is a scalar value here
          continue;
        }
        default:
          return false;
      }
      if (out != nullptr)
        out->push_back(plain);
    }
  }

  static bool is_digit(char c) {
    return c >= '0' && c <= '9';
  }

  // A number at p_ (JSON's grammar). `integer`, if given, receives its value
  // when it is an integer of at most 18 digits; false otherwise (the tree
  // reads the rest).
  bool number(std::optional<int64_t>* integer) {
    auto negative = p_ != end_ && *p_ == '-';
    if (negative)
      ++p_;
    if (p_ == end_ || !is_digit(*p_))
      return false;
    auto digits = p_;
    if (*p_ == '0')
      ++p_;
    else
      while (p_ != end_ && is_digit(*p_))
        ++p_;
    auto n = p_ - digits;
    auto plain = true;
    if (p_ != end_ && *p_ == '.') {
      plain = false;
      ++p_;
      if (p_ == end_ || !is_digit(*p_))
        return false;
      while (p_ != end_ && is_digit(*p_))
        ++p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      plain = false;
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-'))
        ++p_;
      if (p_ == end_ || !is_digit(*p_))
        return false;
      while (p_ != end_ && is_digit(*p_))
        ++p_;
    }
    if (integer == nullptr)
      return true;
    if (!plain || n > 18)
      return false;
    int64_t v = 0;
    for (auto q = digits; q != digits + n; ++q)
      v = v * 10 + (*q - '0');
    *integer = negative ? -v : v;
    return true;
  }

  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view{p_, word.size()} != word)
      return false;
    p_ += word.size();
    return true;
  }

  // Any value, read for its grammar only.
  bool skip_value() {
    skip_space();
    if (p_ == end_)
      return false;
    switch (*p_) {
      case '"':
        return string(nullptr);
      case '{':
        return members(nullptr);
      case '[':
        return elements(false);
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default:
        return number(nullptr);
    }
  }

  // A value whose text is kept if it is a string (else `out` stays empty).
  bool text_value(std::string& out) {
    out.clear();
    skip_space();
    if (p_ != end_ && *p_ == '"')
      return string(&out);
    return skip_value();
  }

  bool is_null_value() {
    skip_space();
    return literal("null");
  }

  // An integer member (int_member in the tree): a plain integer is read, a
  // value of another type leaves `out` empty, any other number gives up.
  bool int_value(std::optional<int64_t>& out) {
    out.reset();
    skip_space();
    if (p_ != end_ && (*p_ == '-' || is_digit(*p_)))
      return number(&out);
    return skip_value();
  }

  // An object whose members `kind` reads; any other value is skipped.
  bool object_value(container kind) {
    skip_space();
    if (p_ == end_ || *p_ != '{')
      return skip_value();
    return members(&kind);
  }

  // The members of an object at p_ ('{'); `kind` says which are read.
  bool members(const container* kind) {
    return items('}', [&] {
      return key() && take(':') && (kind == nullptr ? skip_value() : member(*kind));
    });
  }

  // The comma-separated items of the container at p_ (its opening bracket)
  // up to `close`: `item()` reads one, at p_ after any space.
  template <class F>
  bool items(char close, F&& item) {
    ++p_;
    if (++depth_ > sdk::default_max_json_depth)
      return false;
    skip_space();
    if (p_ != end_ && *p_ == close) {
      ++p_;
      --depth_;
      return true;
    }
    for (;;) {
      skip_space();
      if (!item())
        return false;
      skip_space();
      if (p_ == end_)
        return false;
      if (*p_ == close) {
        ++p_;
        --depth_;
        return true;
      }
      if (*p_++ != ',')
        return false;
    }
  }

  // Whether the key just read (key_view_) is `name`: lengths first, then
  // bytes.
  bool is(std::string_view name) const {
    return key_view_ == name;
  }

  // One member's value, after its key (key_).
  bool member(container kind) {
    switch (kind) {
      case container::chunk:
        if (is("model"))
          return text_value(out_.model);
        if (is("choices"))
          return choices();
        if (is("error"))
          return is_null_value(); // anything else by the tree
        if (is("usage")) {
          // Counts only from an object, as in the tree.
          out_.usage.reset();
          skip_space();
          if (p_ == end_ || *p_ != '{')
            return skip_value();
          out_.usage.emplace();
          return object_value(container::usage);
        }
        return skip_value();
      case container::choice: {
        auto& c = out_.choices.back();
        if (is("index")) {
          c.index.reset();
          skip_space();
          if (p_ != end_ && (*p_ == '-' || is_digit(*p_)))
            return number(&c.index);
          return skip_value(); // not a number: no index, as in the tree
        }
        if (is("finish_reason"))
          return text_value(c.finish_reason);
        if (is("delta"))
          return texts_value(c.delta);
        if (is("message"))
          return texts_value(c.message);
        return skip_value();
      }
      case container::texts: {
        auto& t = *texts_;
        if (is("content"))
          return text_value(t.content);
        if (is("refusal"))
          return text_value(t.refusal);
        if (is("reasoning_content"))
          return text_value(t.reasoning_content);
        if (is("reasoning"))
          return text_value(t.reasoning);
        if (is("tool_calls")) {
          t.calls.clear();
          skip_space();
          if (p_ == end_ || *p_ != '[')
            return skip_value(); // not an array: no calls, as in the tree
          return calls_value(t.calls);
        }
        return skip_value();
      }
      case container::call: {
        auto& c = *call_;
        if (is("index"))
          return int_value(c.index);
        if (is("id"))
          return text_value(c.id);
        if (is("function")) {
          c.name.clear();
          c.arguments.clear();
          return object_value(container::function);
        }
        return skip_value();
      }
      case container::function: {
        auto& c = *call_;
        if (is("name"))
          return text_value(c.name);
        if (is("arguments")) {
          skip_space();
          if (p_ != end_ && (*p_ == '{' || *p_ == '['))
            return false; // arguments as a JSON value: the tree dumps them
          return text_value(c.arguments);
        }
        return skip_value();
      }
      case container::usage: {
        auto& u = *out_.usage;
        if (is("prompt_tokens"))
          return int_value(u.prompt);
        if (is("completion_tokens"))
          return int_value(u.completion);
        if (is("completion_tokens_details")) {
          u.reasoning.reset();
          return object_value(container::completion_details);
        }
        if (is("prompt_tokens_details")) {
          u.cached.reset();
          return object_value(container::prompt_details);
        }
        return skip_value();
      }
      case container::completion_details:
        if (is("reasoning_tokens"))
          return int_value(out_.usage->reasoning);
        return skip_value();
      case container::prompt_details:
        if (is("cached_tokens"))
          return int_value(out_.usage->cached);
        return skip_value();
    }
    return false;
  }

  // The elements of a `tool_calls` array at p_ ('[').
  bool calls_value(std::vector<fast_chunk::call>& calls) {
    return items(']', [&] {
      calls.emplace_back();
      if (p_ == end_ || *p_ != '{')
        return skip_value();
      calls.back().is_object = true;
      auto* outer = call_;
      call_ = &calls.back();
      auto kind = container::call;
      auto ok = members(&kind);
      call_ = outer;
      return ok;
    });
  }

  bool texts_value(fast_chunk::texts& t) {
    t = {};
    skip_space();
    if (p_ == end_ || *p_ != '{')
      return skip_value();
    t.is_object = true;
    auto* outer = texts_;
    texts_ = &t;
    auto kind = container::texts;
    auto ok = members(&kind);
    texts_ = outer;
    return ok;
  }

  bool choices() {
    out_.choices.clear();
    skip_space();
    if (p_ == end_ || *p_ != '[')
      return skip_value(); // not an array: no choices, as in the tree
    return elements(true);
  }

  // The elements of an array at p_ ('['); as choices if `as_choices`.
  bool elements(bool as_choices) {
    return items(']', [&] {
      if (!as_choices)
        return skip_value();
      out_.choices.emplace_back();
      if (p_ == end_ || *p_ != '{')
        return skip_value();
      out_.choices.back().is_object = true;
      auto kind = container::choice;
      return members(&kind);
    });
  }

  bool chunk() {
    auto kind = container::chunk;
    return members(&kind);
  }

  fast_chunk& out_;
  const char* p_;
  const char* end_;
  size_t depth_ = 0;
  std::string key_;
  std::string_view key_view_;
  fast_chunk::texts* texts_ = nullptr;
  fast_chunk::call* call_ = nullptr;
};

bool fast_chunk::read(std::string_view text) {
  return fast_chunk_reader{*this, text}.read();
}

} // namespace

// -- tool_call_accumulator ----------------------------------------------------

size_t tool_call_accumulator::select(const fields& item, size_t position, size_t count) {
  auto id = item.id;
  if (auto idx = item.index) {
    for (size_t i = calls_.size(); i-- > 0;) {
      if (calls_[i].server_index != *idx)
        continue;
      // The same index with a different id: a server that reuses indices.
      if (!id.empty() && !calls_[i].id.empty() && calls_[i].id != id)
        break;
      return i;
    }
    calls_.emplace_back();
    calls_.back().server_index = *idx;
    return calls_.size() - 1;
  }
  if (!id.empty()) {
    for (size_t i = 0; i < calls_.size(); ++i)
      if (calls_[i].id == id)
        return i;
    calls_.emplace_back();
    return calls_.size() - 1;
  }
  if (calls_.empty()) {
    calls_.emplace_back();
    return 0;
  }
  // No index and no id: continue the last call, or, for several elements in
  // one delta, the last `count` calls by position.
  if (count > 1 && calls_.size() >= count)
    return calls_.size() - count + position;
  return calls_.size() - 1;
}

std::optional<sdk::tool_call_delta> tool_call_accumulator::add(const json& item, size_t position,
                                                               size_t count) {
  if (!item.is_object())
    return std::nullopt;
  fields parts;
  parts.index = int_member(item, "index");
  parts.id = string_member(item, "id");
  std::string dumped;
  if (auto fn = member(item, "function"); fn != nullptr && fn->is_object()) {
    parts.name = string_member(*fn, "name");
    if (auto a = member(*fn, "arguments"); a != nullptr) {
      if (a->is_string()) {
        parts.arguments = a->get_ref<const std::string&>();
      } else if (a->is_object() || a->is_array()) {
        // Some servers send the arguments as a JSON value.
        dumped = sdk::dump_json(*a);
        parts.arguments = dumped;
      }
    }
  }
  return add(parts, position, count);
}

std::optional<sdk::tool_call_delta> tool_call_accumulator::add(const fields& item, size_t position,
                                                               size_t count) {
  // A metadata-only element (e.g. Gemini's `extra_content`) names no call.
  if (!item.index && item.id.empty() && item.name.empty() && item.arguments.empty())
    return std::nullopt;
  auto before = calls_.size();
  auto i = select(item, position, count);
  auto& call = calls_[i];
  if (call.id.empty() && !item.id.empty())
    call.id = std::string{item.id};
  // A repeated (often empty) name never overwrites the first one.
  if (call.name.empty() && !item.name.empty())
    call.name = std::string{item.name};
  call.arguments.append(item.arguments.data(), item.arguments.size());
  sdk::tool_call_delta delta;
  delta.index = static_cast<int>(i);
  if (!call.id_reported && !call.id.empty()) {
    delta.id = call.id;
    call.id_reported = true;
  }
  if (!call.name_reported && !call.name.empty()) {
    delta.name = call.name;
    call.name_reported = true;
  }
  delta.arguments = std::string{item.arguments};
  if (calls_.size() == before && delta.id.empty() && delta.name.empty() && delta.arguments.empty())
    return std::nullopt;
  return delta;
}

std::vector<sdk::tool_call> tool_call_accumulator::calls() const {
  std::vector<sdk::tool_call> result;
  for (size_t i = 0; i < calls_.size(); ++i) {
    const auto& x = calls_[i];
    if (x.name.empty() && x.arguments.empty())
      continue;
    sdk::tool_call call;
    call.id = x.id.empty() ? "call_" + std::to_string(i + 1) : x.id;
    call.name = x.name;
    call.arguments = x.arguments.empty() ? "{}" : x.arguments;
    result.push_back(std::move(call));
  }
  return result;
}

// -- error classification -----------------------------------------------------

std::optional<int64_t> retry_hint_from_message(std::string_view message) {
  auto msg = sdk::to_lower(message);
  constexpr std::string_view marker = "try again in ";
  auto pos = msg.find(marker);
  if (pos == std::string::npos)
    return std::nullopt;
  pos += marker.size();
  auto end = pos;
  while (end < msg.size()
         && (std::isalnum(static_cast<unsigned char>(msg[end])) || msg[end] == '.'))
    ++end;
  auto token = std::string_view{msg}.substr(pos, end - pos);
  while (!token.empty() && token.back() == '.')
    token.remove_suffix(1);
  return bounded_duration(token);
}

sdk::error classify_error(int status, const sdk::http_headers& headers, const json& body) {
  const json* root = &body;
  if (root->is_array() && !root->empty())
    root = &(*root)[0]; // Google's non-SSE streams wrap errors in an array
  const json* err = root;
  std::string message;
  if (auto e = member(*root, "error"); e != nullptr) {
    if (e->is_object())
      err = e;
    else if (e->is_string())
      message = e->get<std::string>();
  }
  if (message.empty())
    message = std::string{string_member(*err, "message")};
  if (message.empty())
    message = std::string{string_member(*root, "detail")};
  if (message.empty())
    message = std::string{string_member(*root, "message")};
  auto type = std::string{string_member(*err, "type")};
  auto code = std::string{string_member(*err, "code")};
  auto google_status = std::string{string_member(*err, "status")};
  // In-stream errors carry their status inside (OpenRouter `code`, Groq
  // `status_code`).
  auto effective = status;
  if (effective == 0) {
    for (auto key : {"code", "status_code", "status"})
      if (auto x = int_member(*err, key); x && *x >= 400 && *x <= 599) {
        effective = static_cast<int>(*x);
        break;
      }
  }
  auto result = sdk::make_error(sdk::errc::server_error, {}, status);
  if (effective != 0)
    result.code = sdk::classify_http_status(effective);
  else if (auto c = classify_type(code))
    result.code = *c;
  else if (auto c = classify_type(type))
    result.code = *c;
  if (auto c = classify_google_status(google_status); c && effective == 0)
    result.code = *c;
  else if (c && (*c == sdk::errc::rate_limited || *c == sdk::errc::overloaded))
    result.code = *c;
  if (code == "insufficient_quota" || type == "insufficient_quota"
      || code == "billing_hard_limit_reached") {
    result.code = sdk::errc::quota;
  } else if (code == "context_length_exceeded" || type == "exceed_context_size_error"
             || code == "string_above_max_length") {
    result.code = sdk::errc::context_too_long;
  } else if (code == "model_not_found") {
    result.code = sdk::errc::not_found;
  } else if (auto cause = sdk::cause_in_message(message)) {
    // The cause the message states wins over a relayed code (a gateway's
    // 502 around an upstream's context-length error): no retry can help.
    result.code = *cause;
  }
  // Retry delay: headers, then Google's RetryInfo, then the message.
  result.retry_after_ms = sdk::retry_after_ms(headers);
  if (!result.retry_after_ms) {
    if (auto details = member(*err, "details"); details && details->is_array())
      for (const auto& d : *details)
        if (auto delay = string_member(d, "retryDelay"); !delay.empty())
          if ((result.retry_after_ms = bounded_duration(delay)))
            break;
  }
  if (!result.retry_after_ms)
    result.retry_after_ms = retry_hint_from_message(message);
  result.retry_hint = sdk::should_retry_header(headers);
  std::string text;
  if (!code.empty())
    text = code;
  else if (!type.empty())
    text = type;
  else if (!google_status.empty())
    text = google_status;
  if (!message.empty())
    text += text.empty() ? message : ": " + message;
  if (text.empty())
    text = effective != 0 ? "HTTP " + std::to_string(effective) : "error";
  result.message = truncate(std::move(text));
  return result;
}

sdk::error classify_error(int status, const sdk::http_headers& headers, std::string_view body) {
  auto parsed = sdk::parse_json(body);
  if (!parsed.is_discarded() && (parsed.is_object() || parsed.is_array()))
    return classify_error(status, headers, parsed);
  // Not JSON: a proxy's HTML page or plain text.
  auto result = sdk::make_error(
    status != 0 ? sdk::classify_http_status(status) : sdk::errc::server_error, {}, status);
  std::string text;
  for (auto c : sdk::utf8_prefix(body, max_message_size)) {
    auto blank = c == '\n' || c == '\r' || c == '\t';
    text += blank ? ' ' : c;
  }
  sdk::repair_utf8_in_place(text);
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  if (auto cause = sdk::cause_in_message(text))
    result.code = *cause;
  result.retry_after_ms = sdk::retry_after_ms(headers);
  if (!result.retry_after_ms)
    result.retry_after_ms = retry_hint_from_message(text);
  result.retry_hint = sdk::should_retry_header(headers);
  result.message = text.empty() ? "HTTP " + std::to_string(status) : truncate(std::move(text));
  return result;
}

// -- stream_decoder -----------------------------------------------------------

sdk::finish_reason map_finish_reason(std::string_view reason, bool saw_tools, bool refused) {
  auto x = sdk::to_lower(reason);
  if (x == "tool_calls" || x == "function_call" || x == "tool_use")
    return sdk::finish_reason::tool_calls;
  if (x == "length" || x == "max_tokens")
    return sdk::finish_reason::length;
  if (x == "content_filter" || x == "refusal" || x == "safety")
    return sdk::finish_reason::content_filter;
  if (x.empty())
    return sdk::finish_reason::unknown;
  if (x == "stop" || x == "end_turn" || x == "eos") {
    if (saw_tools)
      return sdk::finish_reason::tool_calls;
    return refused ? sdk::finish_reason::content_filter : sdk::finish_reason::stop;
  }
  return sdk::finish_reason::other;
}

stream_decoder::state stream_decoder::feed(std::string_view bytes, stream_handler& handler) {
  if (state_ != state::running)
    return state_;
  if (head_.size() < max_head_size)
    head_.append(bytes.substr(0, max_head_size - head_.size()));
  auto ok = sse_.feed(bytes,
                      [this, &handler](const sdk::sse_event& ev) { return on_event(ev, handler); });
  if (!ok && state_ == state::running)
    fail(
      sdk::make_error(sdk::errc::invalid_response, "stream event larger than the parser's limit"));
  return state_;
}

stream_decoder::state stream_decoder::finish(stream_handler& handler) {
  if (state_ != state::running)
    return state_;
  sse_.finish([this, &handler](const sdk::sse_event& ev) { return on_event(ev, handler); });
  if (state_ != state::running)
    return state_;
  if (finish_)
    complete(handler);
  else if (events_ == 0 && !head_.empty() && !looks_like_sse(head_))
    // An HTML page or other document served with status 200 (a proxy, a
    // login page, a wrong base URL): retrying will not help.
    fail(sdk::make_error(sdk::errc::invalid_response,
                         "the server's answer is not an event stream: " + preview(head_)));
  else
    fail(sdk::make_error(sdk::errc::network, "stream ended early (no finish reason, no [DONE])"));
  return state_;
}

stream_decoder::state stream_decoder::finish_document(stream_handler& handler) {
  if (state_ == state::running)
    complete(handler);
  return state_;
}

sdk::chat_result stream_decoder::result() const {
  sdk::chat_result result;
  result.text = text_;
  result.reasoning = reasoning_;
  if (!tag_reasoning_.empty()) {
    if (!result.reasoning.empty() && result.reasoning.back() != '\n')
      result.reasoning += '\n';
    result.reasoning += tag_reasoning_;
  }
  result.tool_calls = tools_.calls();
  result.finish = map_finish_reason(finish_ ? *finish_ : std::string{}, !result.tool_calls.empty(),
                                    refused_);
  result.usage = usage_;
  result.model = model_;
  return result;
}

void stream_decoder::emit(const sdk::reasoning_tag_splitter::output& out, stream_handler& handler) {
  if (!out.reasoning.empty()) {
    tag_reasoning_ += out.reasoning;
    streamed_ = true;
    handler.on_reasoning(out.reasoning);
  }
  if (!out.text.empty()) {
    text_ += out.text;
    streamed_ = true;
    handler.on_text(out.text);
  }
}

void stream_decoder::end_text(stream_handler& handler) {
  if (text_ended_)
    return;
  text_ended_ = true;
  auto out = splitter_.finish();
  if (out.moved_to_text) {
    // What streamed as reasoning was the answer: the result says so, and the
    // handler receives it as text now.
    tag_reasoning_.clear();
  }
  emit(out, handler);
  if (out.split_late && !refused_) {
    // The text that streamed closed a thought it never opened: the result
    // holds the split (the provider opens the next answers inside the
    // thought).
    text_ = splitter_.text_total();
    tag_reasoning_ = splitter_.reasoning_total();
  }
}

bool stream_decoder::complete(stream_handler& handler) {
  state_ = state::done;
  end_text(handler);
  return false;
}

bool stream_decoder::fail(sdk::error err) {
  state_ = state::failed;
  failure_ = std::move(err);
  return false;
}

bool stream_decoder::on_event(const sdk::sse_event& ev, stream_handler& handler) {
  if (state_ != state::running)
    return false;
  ++events_;
  // Bytes that are not UTF-8 become U+FFFD here, before anything is decoded,
  // so that no invalid text reaches the handler, the result or a message.
  std::string repaired;
  std::string_view data{ev.data};
  if (!sdk::is_valid_utf8(data)) {
    repaired = sdk::repair_utf8(data);
    data = repaired;
  }
  if (ev.type == "error") {
    auto err = classify_error(0, {}, data);
    return fail(std::move(err));
  }
  if (!ev.type.empty() && ev.type != "message")
    return true; // unknown event types are ignored
  while (!data.empty() && std::isspace(static_cast<unsigned char>(data.front())))
    data.remove_prefix(1);
  while (!data.empty() && std::isspace(static_cast<unsigned char>(data.back())))
    data.remove_suffix(1);
  if (data.empty())
    return true;
  if (data == "[DONE]") {
    done_marker_ = true;
    return complete(handler);
  }
  if (!on_chunk(data, handler))
    return false;
  // Some servers never send [DONE] (and some keep the connection open): a
  // finish reason plus the usage the request asked for end the answer.
  if (finish_ && usage_seen_)
    return complete(handler);
  return true;
}

void stream_decoder::apply_delta(std::string_view content, std::string_view refusal,
                                 std::string_view reasoning, stream_handler& handler) {
  if (!content.empty())
    emit(splitter_.feed(content), handler);
  if (!refusal.empty()) {
    refused_ = true;
    text_.append(refusal.data(), refusal.size());
    streamed_ = true;
    handler.on_text(refusal);
  }
  if (!reasoning.empty()) {
    reasoning_.append(reasoning.data(), reasoning.size());
    streamed_ = true;
    handler.on_reasoning(reasoning);
  }
}

bool stream_decoder::on_finish_reason(std::string_view reason) {
  // Gemini's and OpenRouter's servers end a failed generation with `error`:
  // the answer is broken, whatever arrived before.
  if (sdk::to_lower(reason) == "error")
    return fail(sdk::make_error(sdk::errc::server_error,
                                "the model server ended the answer with finish reason \"error\""));
  finish_ = std::string{reason};
  return true;
}

void stream_decoder::apply_usage(const json& u, stream_handler& handler) {
  sdk::usage counts;
  counts.input_tokens = int_member(u, "prompt_tokens").value_or(0);
  counts.output_tokens = int_member(u, "completion_tokens").value_or(0);
  if (auto d = member(u, "completion_tokens_details"))
    counts.reasoning_tokens = int_member(*d, "reasoning_tokens").value_or(0);
  if (auto d = member(u, "prompt_tokens_details"))
    counts.cached_input_tokens = int_member(*d, "cached_tokens").value_or(0);
  apply_usage(counts, handler);
}

void stream_decoder::apply_usage(const sdk::usage& counts, stream_handler& handler) {
  usage_ = counts;
  usage_seen_ = true;
  handler.on_usage(counts);
}

bool stream_decoder::on_chunk(std::string_view data, stream_handler& handler) {
  // Chunks are read without a tree; what the reader leaves (see
  // fast_chunk) takes the tree below, which is the reference.
  fast_chunk fast;
  if (!trees_only_ && fast.read(data)) {
    if (model_.empty())
      model_ = std::move(fast.model);
    for (const auto& choice : fast.choices) {
      if (!choice.is_object || (choice.index && *choice.index != 0))
        continue;
      choice_seen_ = true;
      const auto* t = choice.delta.is_object     ? &choice.delta
                      : choice.message.is_object ? &choice.message
                                                 : nullptr;
      if (t != nullptr) {
        apply_delta(t->content, t->refusal,
                    t->reasoning_content.empty() ? t->reasoning : t->reasoning_content, handler);
        for (size_t i = 0; i < t->calls.size(); ++i) {
          const auto& call = t->calls[i];
          if (!call.is_object)
            continue;
          tool_call_accumulator::fields parts;
          parts.index = call.index;
          parts.id = call.id;
          parts.name = call.name;
          parts.arguments = call.arguments;
          if (auto d = tools_.add(parts, i, t->calls.size())) {
            streamed_ = true;
            handler.on_tool_call(*d);
          }
        }
      }
      if (!choice.finish_reason.empty() && !on_finish_reason(choice.finish_reason))
        return false;
    }
    if (fast.usage) {
      sdk::usage counts;
      counts.input_tokens = fast.usage->prompt.value_or(0);
      counts.output_tokens = fast.usage->completion.value_or(0);
      counts.reasoning_tokens = fast.usage->reasoning.value_or(0);
      counts.cached_input_tokens = fast.usage->cached.value_or(0);
      apply_usage(counts, handler);
    }
    return true;
  }
  std::string why;
  auto chunk = sdk::parse_json(data, &why);
  if (chunk.is_discarded() || !chunk.is_object()) {
    auto shown = std::string{sdk::utf8_prefix(data, 120)};
    if (!why.empty())
      shown += " (" + why + ")";
    return fail(sdk::make_error(sdk::errc::invalid_response, "malformed stream chunk: " + shown));
  }
  if (auto e = member(chunk, "error"); e != nullptr && !e->is_null())
    return fail(classify_error(0, {}, chunk));
  if (model_.empty())
    model_ = std::string{string_member(chunk, "model")};
  if (auto choices = member(chunk, "choices"); choices && choices->is_array()) {
    for (const auto& choice : *choices) {
      if (!choice.is_object())
        continue;
      // Only choice 0 is used; a missing index counts as 0.
      if (auto idx = int_member(choice, "index"); idx && *idx != 0)
        continue;
      choice_seen_ = true;
      const json* delta = member(choice, "delta");
      if (delta == nullptr || !delta->is_object())
        delta = member(choice, "message");
      if (delta != nullptr && delta->is_object()) {
        auto thought = string_member(*delta, "reasoning_content");
        if (thought.empty())
          thought = string_member(*delta, "reasoning");
        apply_delta(string_member(*delta, "content"), string_member(*delta, "refusal"), thought,
                    handler);
        if (auto calls = member(*delta, "tool_calls"); calls && calls->is_array()) {
          for (size_t i = 0; i < calls->size(); ++i) {
            if (auto d = tools_.add((*calls)[i], i, calls->size())) {
              streamed_ = true;
              handler.on_tool_call(*d);
            }
          }
        }
      }
      if (auto reason = string_member(choice, "finish_reason"); !reason.empty())
        if (!on_finish_reason(reason))
          return false;
    }
  }
  if (auto u = member(chunk, "usage"); u != nullptr && u->is_object())
    apply_usage(*u, handler);
  return true;
}

} // namespace quarry::plugins::llm_openai
