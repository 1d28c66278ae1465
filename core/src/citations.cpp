// Citation machinery of deep research: a hand-written, resumable marker
// scanner (linear time), the streaming processor, collapse and extraction.

#include "quarry/core/citations.hpp"

#include "quarry/sdk/types.hpp"

#include <algorithm>
#include <climits>

namespace quarry::core {

namespace {

// -- characters ---------------------------------------------------------------

// UTF-8 encodings of the Unicode brackets Onyx accepts.
constexpr std::string_view lenticular_open = "\xE3\x80\x90";  // U+3010
constexpr std::string_view lenticular_close = "\xE3\x80\x91"; // U+3011
constexpr std::string_view fullwidth_open = "\xEF\xBC\xBB";   // U+FF3B
constexpr std::string_view fullwidth_close = "\xEF\xBC\xBD";  // U+FF3D

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool is_lead(unsigned char c) noexcept {
  return c == 0xE3 || c == 0xEF;
}

// Onyx's remove-mode rule: the whitespace before a removed marker goes when
// the marker is followed by whitespace or one of these.
bool strips_before(char c) noexcept {
  if (is_space(c))
    return true;
  switch (c) {
    case '.':
    case ',':
    case ';':
    case ':':
    case '!':
    case '?':
    case ')':
    case ']':
    case '}':
      return true;
    default:
      return false;
  }
}

enum class cls : uint8_t { digit, comma, space, open, close, other, incomplete };

struct char_class {
  cls kind;
  std::size_t len;
};

bool is_bracket_prefix(std::string_view x) noexcept {
  for (auto b : {lenticular_open, lenticular_close, fullwidth_open, fullwidth_close})
    if (b.substr(0, x.size()) == x)
      return true;
  return false;
}

// Classifies the character at `p`. Without `final`, a truncated UTF-8
// sequence that may still become a bracket is `incomplete`.
char_class classify(std::string_view s, std::size_t p, bool final) noexcept {
  auto c = static_cast<unsigned char>(s[p]);
  if (c >= '0' && c <= '9')
    return {cls::digit, 1};
  switch (c) {
    case ',':
      return {cls::comma, 1};
    case ' ':
      return {cls::space, 1};
    case '[':
      return {cls::open, 1};
    case ']':
      return {cls::close, 1};
    default:
      break;
  }
  if (is_lead(c)) {
    auto rest = s.substr(p, 3);
    if (rest.size() == 3) {
      if (rest == lenticular_open || rest == fullwidth_open)
        return {cls::open, 3};
      if (rest == lenticular_close || rest == fullwidth_close)
        return {cls::close, 3};
      return {cls::other, 1};
    }
    if (!final && is_bracket_prefix(rest))
      return {cls::incomplete, rest.size()};
  }
  return {cls::other, 1};
}

// -- the marker automaton -------------------------------------------------------

// States of a deterministic automaton for Onyx's complete-citation pattern
// `([\[【［]{2}\d+[\]】］]{2})|([\[【［]\d+(?:, ?\d+)*[\]】］])` anchored at an
// opening bracket (with `loose`, the replay pattern's ` *, *` separators).
// The regex never needs backtracking to decide, so neither do we.
enum scan_state : uint8_t {
  s_start,
  s_open1,
  s_g1_open2,
  s_g1_digits,
  s_g1_close1,
  s_g2_digits,
  s_g2_comma,
  s_g2_comma_space,
  s_g2_space,
  s_matched,
  s_fail,
};

uint8_t step(uint8_t state, cls k, bool loose) noexcept {
  switch (state) {
    case s_start:
      return k == cls::open ? s_open1 : s_fail;
    case s_open1:
      if (k == cls::open)
        return s_g1_open2;
      return k == cls::digit ? s_g2_digits : s_fail;
    case s_g1_open2:
      return k == cls::digit ? s_g1_digits : s_fail;
    case s_g1_digits:
      if (k == cls::digit)
        return s_g1_digits;
      return k == cls::close ? s_g1_close1 : s_fail;
    case s_g1_close1:
      return k == cls::close ? s_matched : s_fail;
    case s_g2_digits:
      switch (k) {
        case cls::digit:
          return s_g2_digits;
        case cls::comma:
          return s_g2_comma;
        case cls::close:
          return s_matched;
        case cls::space:
          return loose ? s_g2_space : s_fail;
        default:
          return s_fail;
      }
    case s_g2_comma:
      if (k == cls::space)
        return loose ? s_g2_comma : s_g2_comma_space;
      return k == cls::digit ? s_g2_digits : s_fail;
    case s_g2_comma_space:
      return k == cls::digit ? s_g2_digits : s_fail;
    case s_g2_space:
      if (k == cls::space)
        return s_g2_space;
      return k == cls::comma ? s_g2_comma : s_fail;
    default:
      return s_fail;
  }
}

enum class scan_status : uint8_t { need_more, fail, match };

// Runs the automaton from `pos` in `state`; on a match, `pos` is the end of
// the marker. Resumable: on need_more, `pos` and `state` are where to go on.
scan_status scan_marker(std::string_view s, std::size_t& pos, uint8_t& state, bool loose,
                        bool final) noexcept {
  for (;;) {
    if (state == s_matched)
      return scan_status::match;
    if (pos >= s.size())
      return final ? scan_status::fail : scan_status::need_more;
    auto cc = classify(s, pos, final);
    if (cc.kind == cls::incomplete)
      return scan_status::need_more;
    auto next = step(state, cc.kind, loose);
    if (next == s_fail)
      return scan_status::fail;
    pos += cc.len;
    state = next;
  }
}

// Calls `on_text(text)` for text and `on_marker(marker, end)` for each marker
// outside fenced code (fence state: parity of non-overlapping ``` so far).
template <class OnText, class OnMarker>
void for_each_marker(std::string_view s, bool loose, OnText&& on_text, OnMarker&& on_marker) {
  bool in_code = false;
  std::size_t head = 0;
  std::size_t p = 0;
  while (p < s.size()) {
    auto c = static_cast<unsigned char>(s[p]);
    if (c == '`') {
      auto e = p;
      while (e < s.size() && s[e] == '`')
        ++e;
      if ((e - p) / 3 % 2 == 1)
        in_code = !in_code;
      p = e;
      continue;
    }
    if (!in_code && (c == '[' || is_lead(c))) {
      auto cc = classify(s, p, true);
      if (cc.kind == cls::open) {
        auto pos = p;
        uint8_t state = s_start;
        if (scan_marker(s, pos, state, loose, true) == scan_status::match) {
          on_text(s.substr(head, p - head));
          on_marker(s.substr(p, pos - p), pos);
          head = p = pos;
          continue;
        }
      }
      p += cc.len;
      continue;
    }
    ++p;
  }
  on_text(s.substr(head));
}

// The digit runs of a marker, i.e. its numbers as written.
std::vector<std::string_view> digit_runs(std::string_view marker) {
  std::vector<std::string_view> result;
  std::size_t i = 0;
  while (i < marker.size()) {
    if (!is_digit(marker[i])) {
      ++i;
      continue;
    }
    auto j = i;
    while (j < marker.size() && is_digit(marker[j]))
      ++j;
    result.push_back(marker.substr(i, j - i));
    i = j;
  }
  return result;
}

// Parses ASCII digits; nothing if the value does not fit an int.
std::optional<int> parse_number(std::string_view digits) noexcept {
  long long value = 0;
  for (auto c : digits) {
    value = value * 10 + (c - '0');
    if (value > INT_MAX)
      return std::nullopt;
  }
  return static_cast<int>(value);
}

void append_link(std::string& out, int number, const std::string& link) {
  out += "[[";
  out += std::to_string(number);
  out += "]](";
  out += link;
  out += ')';
}

void rstrip_spaces(std::string& x) {
  while (!x.empty() && is_space(x.back()))
    x.pop_back();
}

} // namespace

// -- documents and mappings ---------------------------------------------------

document_ref make_document_ref(const sdk::document& doc) {
  return document_ref{doc.id, doc.url, doc.title};
}

citation_mapping::citation_mapping(std::initializer_list<value_type> entries) {
  for (const auto& entry : entries)
    insert(entry.first, entry.second);
}

bool citation_mapping::insert(int number, document_ref doc) {
  if (index_.count(number) != 0)
    return false;
  index_.emplace(number, entries_.size());
  entries_.emplace_back(number, std::move(doc));
  return true;
}

void citation_mapping::insert_or_assign(int number, document_ref doc) {
  if (auto i = index_.find(number); i != index_.end())
    entries_[i->second].second = std::move(doc);
  else
    insert(number, std::move(doc));
}

void citation_mapping::merge(const citation_mapping& other, bool overwrite) {
  for (const auto& [number, doc] : other) {
    if (overwrite)
      insert_or_assign(number, doc);
    else
      insert(number, doc);
  }
}

const document_ref* citation_mapping::find(int number) const noexcept {
  auto i = index_.find(number);
  return i == index_.end() ? nullptr : &entries_[i->second].second;
}

std::optional<int> citation_mapping::max_number() const noexcept {
  if (entries_.empty())
    return std::nullopt;
  auto result = entries_.front().first;
  for (const auto& entry : entries_)
    result = std::max(result, entry.first);
  return result;
}

int citation_mapping::next_number() const noexcept {
  auto x = max_number();
  if (!x)
    return 1;
  // Saturates instead of overflowing (a mapping never gets near INT_MAX).
  return *x == INT_MAX ? INT_MAX : *x + 1;
}

std::vector<int> citation_mapping::numbers() const {
  std::vector<int> result;
  result.reserve(entries_.size());
  for (const auto& entry : entries_)
    result.push_back(entry.first);
  return result;
}

// -- streaming processor ------------------------------------------------------

const char* to_string(citation_mode x) noexcept {
  switch (x) {
    case citation_mode::hyperlink:
      return "hyperlink";
    case citation_mode::keep_markers:
      return "keep_markers";
    case citation_mode::remove:
      return "remove";
  }
  return "hyperlink";
}

citation_processor::citation_processor(citation_mode mode) : mode_(mode) {
  // nop
}

void citation_processor::update_mapping(const citation_mapping& update, bool overwrite) {
  mapping_.merge(update, overwrite);
}

citation_chunk citation_processor::process(std::string_view token) {
  citation_chunk out;
  buf_.append(token);
  drain(false, out);
  return out;
}

citation_chunk citation_processor::finish() {
  citation_chunk out;
  drain(true, out);
  flush_pending(out);
  buf_.clear();
  cand_scanned_ = 0;
  cand_state_ = s_start;
  in_code_ = false;
  has_emitted_ = false;
  last_emitted_ = '\0';
  last_was_link_ = false;
  return out;
}

std::vector<std::string> citation_processor::cited_document_ids() const {
  std::vector<std::string> result;
  result.reserve(cited_docs_.size());
  for (const auto& doc : cited_docs_)
    result.push_back(doc.document_id);
  return result;
}

void citation_processor::drain(bool final, citation_chunk& out) {
  std::string_view b = buf_;
  std::size_t head = 0;
  while (head < b.size()) {
    auto c = static_cast<unsigned char>(b[head]);
    if (c == '`') {
      // A run of backticks: its length decides the fences, and the character
      // after it whether an opening fence gets labelled.
      auto end = head + std::max<std::size_t>(cand_scanned_, 1);
      while (end < b.size() && b[end] == '`')
        ++end;
      if (end == b.size() && !final) {
        cand_scanned_ = end - head;
        break;
      }
      cand_scanned_ = 0;
      auto len = end - head;
      if (len / 3 % 2 == 1)
        in_code_ = !in_code_;
      auto label = len % 3 == 0 && in_code_ && end < b.size() && b[end] == '\n';
      emit(b.substr(head, len), out);
      if (label)
        emit("plaintext", out);
      head = end;
      continue;
    }
    if (!in_code_ && (c == '[' || is_lead(c))) {
      auto cc = classify(b, head, final);
      if (cc.kind == cls::incomplete)
        break;
      if (cc.kind == cls::open) {
        auto pos = head + cand_scanned_;
        uint8_t state = cand_scanned_ != 0 ? cand_state_ : uint8_t{s_start};
        auto status = scan_marker(b, pos, state, false, final);
        if (status == scan_status::need_more) {
          cand_scanned_ = pos - head;
          cand_state_ = state;
          break;
        }
        cand_scanned_ = 0;
        if (status == scan_status::fail) {
          emit(b.substr(head, cc.len), out);
          head += cc.len;
          continue;
        }
        auto marker = b.substr(head, pos - head);
        if (pos == b.size() && !final && would_remove(marker)) {
          // The spacing rule needs the next character.
          cand_scanned_ = pos - head;
          cand_state_ = s_matched;
          break;
        }
        auto next = pos < b.size() ? static_cast<int>(static_cast<unsigned char>(b[pos])) : -1;
        handle_marker(marker, next, out);
        head = pos;
        continue;
      }
      emit(b.substr(head, 1), out);
      ++head;
      continue;
    }
    // Plain text up to the next character that may start something.
    auto p = head + 1;
    while (p < b.size()) {
      auto d = static_cast<unsigned char>(b[p]);
      if (d == '`' || (!in_code_ && (d == '[' || is_lead(d))))
        break;
      ++p;
    }
    emit(b.substr(head, p - head), out);
    head = p;
  }
  buf_.erase(0, head);
}

void citation_processor::emit(std::string_view text, citation_chunk& out) {
  if (text.empty())
    return;
  last_was_link_ = false;
  if (mode_ == citation_mode::keep_markers) {
    // Nothing is ever removed in this mode, so whitespace is never held.
    out.text.append(text);
    has_emitted_ = true;
    last_emitted_ = text.back();
    return;
  }
  auto k = text.size();
  while (k > 0 && is_space(text[k - 1]))
    --k;
  if (k == 0) {
    pending_ws_.append(text);
    return;
  }
  out.text += pending_ws_;
  pending_ws_.clear();
  out.text.append(text.substr(0, k));
  has_emitted_ = true;
  last_emitted_ = text[k - 1];
  pending_ws_.assign(text.substr(k));
}

void citation_processor::flush_pending(citation_chunk& out) {
  if (pending_ws_.empty())
    return;
  out.text += pending_ws_;
  has_emitted_ = true;
  last_emitted_ = pending_ws_.back();
  pending_ws_.clear();
}

bool citation_processor::would_remove(std::string_view marker) const {
  switch (mode_) {
    case citation_mode::keep_markers:
      return false;
    case citation_mode::remove:
      return true;
    case citation_mode::hyperlink:
      break;
  }
  for (auto digits : digit_runs(marker))
    if (auto n = parse_number(digits); n && mapping_.contains(*n))
      return false;
  return true;
}

void citation_processor::note_unknown(int number, citation_chunk& out) {
  if (unknown_set_.insert(number).second) {
    unknown_.push_back(number);
    out.unknown.push_back(number);
  }
}

void citation_processor::handle_marker(std::string_view marker, int next, citation_chunk& out) {
  std::string links;
  std::vector<citation_info> infos;
  for (auto digits : digit_runs(marker)) {
    auto n = parse_number(digits);
    if (!n)
      continue; // cannot be in any mapping
    const auto* doc = mapping_.find(*n);
    if (doc == nullptr) {
      note_unknown(*n, out);
      continue;
    }
    seen_.insert_or_assign(*n, *doc);
    if (mode_ != citation_mode::hyperlink)
      continue;
    if (!links.empty())
      links += ' ';
    append_link(links, *n, doc->link);
    if (cited_ids_.insert(doc->document_id).second) {
      cited_docs_.push_back(*doc);
      infos.push_back(citation_info{*n, doc->document_id});
    }
  }
  if (mode_ == citation_mode::keep_markers) {
    emit(marker, out);
    return;
  }
  if (!links.empty()) {
    // A space unless the output is empty, ends with whitespace or with
    // another citation link (Onyx keeps consecutive citations together).
    auto has_space = !pending_ws_.empty() || !has_emitted_ || is_space(last_emitted_)
                     || last_was_link_;
    flush_pending(out);
    for (auto& info : infos)
      out.citations.push_back(citation_event{out.text.size(), std::move(info)});
    if (!has_space)
      links.insert(0, 1, ' ');
    emit(links, out);
    last_was_link_ = true;
    return;
  }
  // Removed (remove mode, or a hyperlink marker without a known number).
  if (!pending_ws_.empty() && next >= 0 && strips_before(static_cast<char>(next)))
    pending_ws_.clear();
}

// -- helpers ------------------------------------------------------------------

namespace {

bool ends_with_partial_citation_impl(std::string_view text) {
  // The text after the brackets consists of digits, commas and spaces only,
  // and must directly follow an opening bracket, so it is the longest such
  // suffix.
  auto k = text.size();
  while (k > 0 && (is_digit(text[k - 1]) || text[k - 1] == ',' || text[k - 1] == ' '))
    --k;
  auto head = text.substr(0, k);
  auto ends_with = [&](std::string_view x) {
    return head.size() >= x.size() && head.substr(head.size() - x.size()) == x;
  };
  if (!ends_with("[") && !ends_with(lenticular_open) && !ends_with(fullwidth_open))
    return false;
  // The tail must be empty or `\d+(?:, ?\d+)*(?:, ?)?`.
  enum { start, digits, comma, comma_space } state = start;
  for (auto c : text.substr(k)) {
    switch (state) {
      case start:
        if (!is_digit(c))
          return false;
        state = digits;
        break;
      case digits:
        if (c == ',')
          state = comma;
        else if (!is_digit(c))
          return false;
        break;
      case comma:
        if (c == ' ')
          state = comma_space;
        else if (is_digit(c))
          state = digits;
        else
          return false;
        break;
      case comma_space:
        if (!is_digit(c))
          return false;
        state = digits;
        break;
    }
  }
  return true;
}

} // namespace

bool ends_with_partial_citation(std::string_view text) {
  if (ends_with_partial_citation_impl(text))
    return true;
  // Python's `$` also matches just before a newline that ends the string.
  if (!text.empty() && text.back() == '\n')
    return ends_with_partial_citation_impl(text.substr(0, text.size() - 1));
  return false;
}

collapse_result collapse_citations(std::string_view text, const citation_mapping& existing,
                                   const citation_mapping& new_citations) {
  collapse_result result;
  // Document id -> existing number (a later duplicate wins, as in Onyx's dict
  // comprehension).
  std::unordered_map<std::string, int> existing_by_id;
  for (const auto& [number, doc] : existing)
    existing_by_id[doc.document_id] = number;
  auto next = existing.next_number();
  std::unordered_map<int, int> old_to_new;
  std::unordered_map<std::string, int> assigned_by_id;
  citation_mapping additional;
  for (const auto& [old_number, doc] : new_citations) {
    int target = 0;
    if (auto i = existing_by_id.find(doc.document_id); i != existing_by_id.end()) {
      target = i->second;
    } else if (auto j = assigned_by_id.find(doc.document_id); j != assigned_by_id.end()) {
      target = j->second;
    } else {
      target = next;
      if (next < INT_MAX)
        ++next;
      additional.insert(target, doc);
      assigned_by_id.emplace(doc.document_id, target);
    }
    old_to_new.emplace(old_number, target);
    result.renumbered.emplace_back(old_number, target);
  }
  std::unordered_set<int> removed;
  auto& out = result.text;
  out.reserve(text.size());
  for_each_marker(
    text, false, [&](std::string_view plain) { out.append(plain); },
    [&](std::string_view marker, std::size_t end) {
      auto runs = digit_runs(marker);
      std::string inner;
      for (auto digits : runs) {
        auto n = parse_number(digits);
        auto i = n ? old_to_new.find(*n) : old_to_new.end();
        if (i == old_to_new.end()) {
          if (n && removed.insert(*n).second)
            result.removed.push_back(*n);
          continue;
        }
        if (!inner.empty())
          inner += ", ";
        inner += std::to_string(i->second);
      }
      if (!inner.empty()) {
        // Keep the brackets exactly as written, e.g. "【【" ... "】】".
        auto first = static_cast<std::size_t>(runs.front().data() - marker.data());
        auto last = static_cast<std::size_t>(runs.back().data() - marker.data())
                    + runs.back().size();
        out.append(marker.substr(0, first));
        out += inner;
        out.append(marker.substr(last));
        return;
      }
      if (end < text.size() && strips_before(text[end]))
        rstrip_spaces(out);
    });
  result.mapping = existing;
  result.mapping.merge(additional);
  return result;
}

std::vector<int> extract_citation_order(std::string_view text) {
  std::vector<int> order;
  std::unordered_set<int> seen;
  for_each_marker(
    text, true, [](std::string_view) {},
    [&](std::string_view marker, std::size_t) {
      for (auto digits : digit_runs(marker))
        if (auto n = parse_number(digits); n && seen.insert(*n).second)
          order.push_back(*n);
    });
  return order;
}

} // namespace quarry::core
