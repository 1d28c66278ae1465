// Claim-by-claim verification (see verification.hpp).

#include "quarry/core/verification.hpp"

#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

namespace quarry::core::verification {

using nlohmann::json;

namespace {

/// The longest sentence kept whole; longer runs are cut at a space.
constexpr size_t max_sentence_bytes = 2000;

/// The longest quote kept.
constexpr size_t max_quote_bytes = 1200;

/// The longest link target after a marker.
constexpr size_t max_link_bytes = 2048;

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

bool is_upper(char c) noexcept {
  return c >= 'A' && c <= 'Z';
}

bool is_space(char c) noexcept {
  return sdk::is_ascii_space(c);
}

/// A citation marker at `pos`: `[1]`, `[1, 2]` or `[[1]](url)`; its end and
/// numbers, or nothing.
struct marker {
  size_t end = 0;
  std::vector<int> numbers;
};

std::optional<marker> marker_at(std::string_view text, size_t pos) {
  if (pos >= text.size() || text[pos] != '[')
    return std::nullopt;
  auto numbers_in = [&](size_t from, size_t& at, std::vector<int>& out) {
    for (;;) {
      size_t start = at;
      int value = 0;
      while (at < text.size() && is_digit(text[at]) && at - start < 6)
        value = value * 10 + (text[at++] - '0');
      if (at == start)
        return false;
      out.push_back(value);
      if (at < text.size() && text[at] == ',') {
        ++at;
        while (at < text.size() && text[at] == ' ')
          ++at;
        continue;
      }
      return at > from;
    }
  };
  marker m;
  // [[n]](url)
  if (pos + 1 < text.size() && text[pos + 1] == '[') {
    size_t at = pos + 2;
    if (!numbers_in(pos + 2, at, m.numbers) || at + 1 >= text.size() || text[at] != ']'
        || text[at + 1] != ']')
      return std::nullopt;
    at += 2;
    if (at < text.size() && text[at] == '(') {
      // Bounded: a hostile text of unclosed links stays linear.
      auto close = text.substr(at, max_link_bytes).find(')');
      if (close == std::string_view::npos)
        return std::nullopt;
      at += close + 1;
    }
    m.end = at;
    return m;
  }
  size_t at = pos + 1;
  if (!numbers_in(pos + 1, at, m.numbers) || at >= text.size() || text[at] != ']')
    return std::nullopt;
  m.end = at + 1;
  // `[1](url)`: a link whose text is the number counts as a marker too.
  if (m.end < text.size() && text[m.end] == '(') {
    auto close = text.substr(m.end, max_link_bytes).find(')');
    if (close != std::string_view::npos)
      m.end += close + 1;
  }
  return m;
}

const std::set<std::string, std::less<>>& abbreviations() {
  static const std::set<std::string, std::less<>> words{
    "e.g", "i.e", "etc", "vs",  "dr", "mr", "mrs", "ms",  "prof", "fig", "no", "approx", "st",
    "jr",  "sr",  "inc", "ltd", "co", "al", "cf",  "u.s", "u.k",  "ca",  "p",  "pp"};
  return words;
}

/// Whether the word ending just before `dot` (exclusive) is an abbreviation
/// or a single letter (an initial).
bool abbreviation_before(std::string_view text, size_t begin, size_t dot) {
  size_t w = dot;
  while (w > begin && !is_space(text[w - 1]) && text[w - 1] != '(')
    --w;
  auto word = sdk::to_lower(text.substr(w, dot - w));
  if (word.size() == 1 && std::isalpha(static_cast<unsigned char>(word[0])))
    return true;
  return abbreviations().count(word) != 0;
}

/// Sentence ranges of text[begin, end): at `.`, `!`, `?` followed by white
/// space (and a capital, digit, quote, bracket or non-ASCII byte), with the
/// citation markers that follow the stop. Long runs are cut at a space.
std::vector<std::pair<size_t, size_t>> sentence_ranges(std::string_view text, size_t begin,
                                                       size_t end) {
  std::vector<std::pair<size_t, size_t>> out;
  auto push = [&](size_t b, size_t e) {
    while (b < e && is_space(text[b]))
      ++b;
    while (e > b && is_space(text[e - 1]))
      --e;
    if (e > b)
      out.emplace_back(b, e);
  };
  size_t start = begin;
  for (size_t i = begin; i < end; ++i) {
    auto c = text[i];
    if (i - start > max_sentence_bytes && is_space(c)) {
      push(start, i);
      start = i + 1;
      continue;
    }
    if (c != '.' && c != '!' && c != '?')
      continue;
    size_t stop = i + 1;
    // Closing quotes and brackets stay with the sentence.
    while (stop < end && (text[stop] == '"' || text[stop] == '\'' || text[stop] == ')'))
      ++stop;
    // Markers right after the stop belong to it: "falls. [1]" or "falls.[1]".
    size_t after = stop;
    for (;;) {
      size_t probe = after;
      while (probe < end && text[probe] == ' ')
        ++probe;
      auto m = marker_at(text.substr(0, end), probe);
      if (!m)
        break;
      after = m->end;
    }
    if (after < end && !is_space(text[after]))
      continue; // "3.5", "example.org"
    if (c == '.' && abbreviation_before(text, start, i))
      continue;
    size_t next = after;
    while (next < end && is_space(text[next]))
      ++next;
    if (next < end && c == '.') {
      auto n = text[next];
      if (!is_upper(n) && !is_digit(n) && n != '"' && n != '\'' && n != '(' && n != '[' && n != '*'
          && n != '_' && static_cast<unsigned char>(n) < 0x80)
        continue;
    }
    push(start, after);
    start = after;
    i = after == 0 ? 0 : after - 1;
  }
  push(start, end);
  return out;
}

/// The sentence without markers and Markdown emphasis, white space
/// collapsed; the markers' numbers go to `numbers`.
std::string clean_sentence(std::string_view s, std::vector<int>& numbers) {
  std::string out;
  bool space = false;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '[') {
      if (auto m = marker_at(s, i)) {
        for (auto n : m->numbers)
          if (std::find(numbers.begin(), numbers.end(), n) == numbers.end())
            numbers.push_back(n);
        i = m->end;
        continue;
      }
    }
    auto c = s[i++];
    if (c == '*' || c == '`' || (c == '_' && (i < 2 || s[i - 2] == ' ')))
      continue;
    if (is_space(c)) {
      space = !out.empty();
      continue;
    }
    if (space) {
      // No space before punctuation that a removed marker left apart.
      if (c != '.' && c != ',' && c != ';' && c != ':' && c != '!' && c != '?')
        out += ' ';
      space = false;
    }
    out += c;
  }
  return out;
}

size_t word_count(std::string_view s) {
  return lexical::count_words(s);
}

/// A fact-stating sentence: six words or more, not a question, with a
/// number or a capitalised word after the first.
bool states_fact(std::string_view s) {
  if (word_count(s) < 6 || s.empty() || s.back() == '?' || s.back() == ':')
    return false;
  bool first = true;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i]))
      ++i;
    size_t w = i;
    while (i < s.size() && !is_space(s[i]))
      ++i;
    auto word = s.substr(w, i - w);
    if (word.empty())
      break;
    for (auto c : word)
      if (is_digit(c))
        return true;
    if (!first && word.size() > 1 && is_upper(word[0]) && word != "I")
      return true;
    first = false;
  }
  return false;
}

/// The heading's text in lower case, or nothing when `line` is not a
/// heading.
std::optional<std::string> heading_text(std::string_view line) {
  auto t = sdk::trim(line);
  if (t.empty() || t[0] != '#')
    return std::nullopt;
  size_t i = 0;
  while (i < t.size() && t[i] == '#')
    ++i;
  if (i < t.size() && t[i] != ' ')
    return std::nullopt;
  return sdk::to_lower(sdk::trim(t.substr(i)));
}

bool closing_section(const std::string& heading) {
  return heading == "sources" || heading == "references" || heading == "verification"
         || heading == "bibliography" || heading == "works cited";
}

/// Lower-case text with runs of white space as one space.
std::string normalized(std::string_view s) {
  std::string out;
  bool space = false;
  for (auto c : s) {
    if (is_space(c)) {
      space = !out.empty();
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += sdk::ascii_lower(c);
  }
  return out;
}

std::set<std::string> term_set(std::string_view s) {
  auto t = lexical::tokenize(s);
  return {t.begin(), t.end()};
}

bool has_digit(const std::string& s) {
  return std::any_of(s.begin(), s.end(), is_digit);
}

std::string clip(std::string_view s, size_t limit) {
  return std::string{sdk::utf8_prefix(s, limit)};
}

} // namespace

// -- names ---------------------------------------------------------------------

const char* to_string(verdict x) noexcept {
  switch (x) {
    case verdict::supported:
      return "supported";
    case verdict::partly_supported:
      return "partly_supported";
    case verdict::unsupported:
      return "unsupported";
    case verdict::no_evidence:
      return "no_evidence";
    case verdict::unverified:
      return "unverified";
  }
  return "unverified";
}

std::optional<verdict> parse_verdict(std::string_view x) {
  auto s = sdk::to_lower(sdk::trim(x));
  for (auto v : {verdict::supported, verdict::partly_supported, verdict::unsupported,
                 verdict::no_evidence, verdict::unverified})
    if (s == to_string(v))
      return v;
  if (s == "partly supported" || s == "partially_supported" || s == "partial")
    return verdict::partly_supported;
  if (s == "no evidence")
    return verdict::no_evidence;
  return std::nullopt;
}

const char* to_string(action x) noexcept {
  return x == action::drop ? "drop" : "mark";
}

std::optional<action> parse_action(std::string_view x) {
  auto s = sdk::to_lower(sdk::trim(x));
  if (s == "mark")
    return action::mark;
  if (s == "drop")
    return action::drop;
  return std::nullopt;
}

// -- 1. claims ------------------------------------------------------------------

std::vector<claim> split_claims(std::string_view report, size_t max_claims) {
  std::vector<claim> out;
  auto add_segment = [&](size_t begin, size_t end) {
    for (auto [b, e] : sentence_ranges(report, begin, end)) {
      if (out.size() >= max_claims)
        return;
      claim c;
      c.text = clean_sentence(report.substr(b, e - b), c.citations);
      if (c.text.empty())
        continue;
      if (c.citations.empty() && !states_fact(c.text))
        continue;
      c.index = out.size();
      c.begin = b;
      c.end = e;
      out.push_back(std::move(c));
    }
  };
  bool in_code = false;
  bool closed = false;
  size_t para_begin = std::string_view::npos;
  size_t para_end = 0;
  auto flush = [&] {
    if (para_begin != std::string_view::npos)
      add_segment(para_begin, para_end);
    para_begin = std::string_view::npos;
  };
  size_t pos = 0;
  while (pos < report.size() && out.size() < max_claims) {
    auto nl = report.find('\n', pos);
    auto line_end = nl == std::string_view::npos ? report.size() : nl;
    auto line = report.substr(pos, line_end - pos);
    auto trimmed = sdk::trim(line);
    auto next = nl == std::string_view::npos ? report.size() : nl + 1;
    auto lead = static_cast<size_t>(trimmed.empty() ? 0 : trimmed.data() - line.data());
    if (sdk::starts_with(trimmed, "```") || sdk::starts_with(trimmed, "~~~")) {
      flush();
      in_code = !in_code;
    } else if (in_code) {
      // nothing
    } else if (auto h = heading_text(line)) {
      flush();
      closed = closing_section(*h);
    } else if (closed) {
      // The Sources list or an earlier verification section.
    } else if (trimmed.empty() || trimmed[0] == '>') {
      flush();
    } else if (trimmed[0] == '|') {
      flush();
      // Table cells, one by one; the separator row has no words.
      size_t cell = pos + lead + 1;
      while (cell < line_end) {
        auto bar = report.find('|', cell);
        if (bar == std::string_view::npos || bar > line_end)
          bar = line_end;
        add_segment(cell, bar);
        cell = bar + 1;
      }
    } else {
      // A list item starts a segment of its own.
      size_t body = pos + lead;
      bool item = false;
      if (trimmed.size() > 1 && (trimmed[0] == '-' || trimmed[0] == '*' || trimmed[0] == '+')
          && trimmed[1] == ' ') {
        item = true;
        body += 2;
      } else {
        size_t d = 0;
        while (d < trimmed.size() && is_digit(trimmed[d]))
          ++d;
        if (d > 0 && d + 1 < trimmed.size() && (trimmed[d] == '.' || trimmed[d] == ')')
            && trimmed[d + 1] == ' ') {
          item = true;
          body += d + 2;
        }
      }
      if (item)
        flush();
      if (para_begin == std::string_view::npos)
        para_begin = body;
      para_end = line_end;
    }
    pos = next;
  }
  flush();
  return out;
}

// -- 2. claims to documents ----------------------------------------------------

indexed_document index_document(source_text doc, size_t words, size_t max_passages) {
  indexed_document out;
  out.source = std::move(doc);
  std::string_view text = out.source.text;
  words = std::max<size_t>(words, 10);
  // Sentences within lines: a line break ends a sentence too.
  std::vector<std::pair<size_t, size_t>> sentences;
  size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    auto e = nl == std::string_view::npos ? text.size() : nl;
    for (auto r : sentence_ranges(text, pos, e))
      sentences.push_back(r);
    pos = e + 1;
  }
  size_t i = 0;
  while (i < sentences.size() && out.passages.size() < max_passages) {
    passage p;
    p.begin = sentences[i].first;
    size_t n = 0;
    size_t j = i;
    while (j < sentences.size() && (n < words || j == i)) {
      n += word_count(text.substr(sentences[j].first, sentences[j].second - sentences[j].first));
      p.end = sentences[j].second;
      ++j;
    }
    out.tokens.push_back(lexical::tokenize(text.substr(p.begin, p.end - p.begin)));
    out.passages.push_back(p);
    // Overlap by one sentence, unless the passage was a single one.
    i = j - i > 1 ? j - 1 : j;
  }
  return out;
}

claim_sources map_claim(const claim& c, const std::map<int, indexed_document>& docs) {
  claim_sources out;
  for (auto n : c.citations) {
    auto it = docs.find(n);
    if (it == docs.end() || it->second.passages.empty())
      out.missing.push_back(n);
    else
      out.with_text.push_back(n);
  }
  return out;
}

// -- 3. passages ------------------------------------------------------------------

std::vector<size_t> candidate_passages(std::string_view claim_text, const indexed_document& doc,
                                       size_t k) {
  auto query = lexical::tokenize(claim_text);
  return lexical::top_k(lexical::bm25_scores(doc.tokens, query), k);
}

// -- 4. evidence ------------------------------------------------------------------

evidence select_evidence(std::string_view claim_text, std::string_view passage_text) {
  evidence best;
  auto terms = term_set(claim_text);
  std::vector<std::string> numbers;
  for (const auto& t : terms)
    if (has_digit(t))
      numbers.push_back(t);
  auto sentences = sentence_ranges(passage_text, 0, passage_text.size());
  std::vector<std::set<std::string>> sentence_terms;
  for (auto [b, e] : sentences)
    sentence_terms.push_back(term_set(passage_text.substr(b, e - b)));
  double best_score = -1;
  size_t best_len = 0;
  for (size_t i = 0; i < sentences.size(); ++i) {
    std::set<std::string> window;
    for (size_t len = 1; len <= 3 && i + len <= sentences.size(); ++len) {
      window.insert(sentence_terms[i + len - 1].begin(), sentence_terms[i + len - 1].end());
      size_t held = 0;
      for (const auto& t : terms)
        held += window.count(t);
      auto coverage = terms.empty() ? 1.0 : static_cast<double>(held) / terms.size();
      bool numbers_ok = std::all_of(numbers.begin(), numbers.end(),
                                    [&](const std::string& n) { return window.count(n) != 0; });
      // Numbers count as much as a tenth of coverage; shorter wins ties.
      auto score = coverage + (numbers_ok ? 0.1 : 0.0);
      if (score > best_score + 1e-9 || (std::abs(score - best_score) <= 1e-9 && len < best_len)) {
        best_score = score;
        best_len = len;
        best.coverage = coverage;
        best.numbers_match = numbers_ok;
        auto b = sentences[i].first;
        auto e = sentences[i + len - 1].second;
        best.quote = clip(passage_text.substr(b, e - b), max_quote_bytes);
        best.begin = b;
        best.end = e;
      }
    }
  }
  if (best_score < 0) {
    best.coverage = 0;
    best.numbers_match = numbers.empty();
  }
  return best;
}

std::optional<evidence> best_evidence(std::string_view claim_text, const indexed_document& doc) {
  std::optional<evidence> best;
  std::string_view text = doc.source.text;
  for (auto i : candidate_passages(claim_text, doc, 3)) {
    const auto& p = doc.passages[i];
    auto ev = select_evidence(claim_text, text.substr(p.begin, p.end - p.begin));
    ev.number = doc.source.number;
    ev.begin += p.begin;
    ev.end += p.begin;
    ev.snippet_only = doc.source.snippet_only;
    auto better = !best || ev.coverage > best->coverage + 1e-9
                  || (std::abs(ev.coverage - best->coverage) <= 1e-9 && ev.numbers_match
                      && !best->numbers_match);
    if (better && !ev.quote.empty())
      best = std::move(ev);
  }
  return best;
}

// -- 5. judging ---------------------------------------------------------------------

judgement judge_lexically(std::string_view claim_text, const std::optional<evidence>& ev) {
  judgement out;
  out.judge = "lexical";
  if (!ev || ev->quote.empty()) {
    out.result = verdict::no_evidence;
    return out;
  }
  out.quote = ev->quote;
  out.number = ev->number;
  out.begin = ev->begin;
  out.end = ev->end;
  out.snippet_only = ev->snippet_only;
  static_cast<void>(claim_text);
  lexical::overlap o;
  o.coverage = ev->coverage;
  o.numbers_match = ev->numbers_match;
  out.result = parse_verdict(lexical::lexical_verdict(o)).value_or(verdict::unsupported);
  return out;
}

sdk::tool_definition judge_tool() {
  sdk::tool_definition t;
  t.name = "judge_claims";
  t.description = "Judge each claim against the evidence quoted from the source it cites.";
  json item = {
    {"type", "object"},
    {"properties",
     {{"id", {{"type", "integer"}}},
      {"verdict",
       {{"type", "string"},
        {"enum", {"supported", "partly_supported", "unsupported", "no_evidence"}},
        {"description", "supported: the evidence states the claim; partly_supported: some of "
                        "it; unsupported: the evidence contradicts it or says something else; "
                        "no_evidence: the evidence is not about the claim."}}},
      {"quote",
       {{"type", "string"},
        {"description", "The words of the evidence that decide, copied exactly."}}}}},
    {"required", json::array({"id", "verdict"})}};
  t.parameters = {{"type", "object"},
                  {"properties", {{"verdicts", {{"type", "array"}, {"items", item}}}}},
                  {"required", json::array({"verdicts"})}};
  return t;
}

std::string judge_prompt(const std::vector<claim>& claims,
                         const std::vector<std::optional<evidence>>& ev) {
  std::string out = "Judge each claim only against its evidence. Call judge_claims with one "
                    "verdict per claim id.\n";
  for (size_t i = 0; i < claims.size(); ++i) {
    out += "\nClaim " + std::to_string(i) + ": " + claims[i].text + "\n";
    if (i < ev.size() && ev[i])
      out += "Evidence from source [" + std::to_string(ev[i]->number) + "]"
             + (ev[i]->snippet_only ? " (a search snippet only: the page was not read)" : "")
             + ": \"" + ev[i]->quote + "\"\n";
    else
      out += "Evidence: none found in the cited sources.\n";
  }
  return out;
}

sdk::research_context judge_context(const std::vector<claim>& claims,
                                    const std::vector<std::optional<evidence>>& ev) {
  sdk::research_context out;
  for (size_t i = 0; i < claims.size(); ++i)
    out.claims.push_back({claims[i].text, i < ev.size() && ev[i] ? ev[i]->quote : std::string{}});
  return out;
}

std::variant<std::vector<judgement>, std::string>
read_judgements(const json& args, const std::vector<std::optional<evidence>>& ev) {
  if (!args.is_object() || !args.contains("verdicts") || !args["verdicts"].is_array())
    return std::string{"verdicts must be a list of {id, verdict, quote}."};
  std::vector<judgement> out(ev.size());
  size_t used = 0;
  for (const auto& x : args["verdicts"]) {
    if (!x.is_object() || !x.contains("id") || !x["id"].is_number_integer()
        || !x.contains("verdict") || !x["verdict"].is_string())
      continue;
    auto id = x["id"].get<int64_t>();
    if (id < 0 || static_cast<size_t>(id) >= ev.size())
      continue;
    auto v = parse_verdict(x["verdict"].get<std::string>());
    if (!v || *v == verdict::unverified)
      continue;
    auto& j = out[static_cast<size_t>(id)];
    const auto& e = ev[static_cast<size_t>(id)];
    ++used;
    j.judge = "model";
    if (!e) {
      j.result = verdict::no_evidence;
      continue;
    }
    j.number = e->number;
    j.begin = e->begin;
    j.end = e->end;
    j.snippet_only = e->snippet_only;
    j.result = *v;
    std::string quote;
    if (x.contains("quote") && x["quote"].is_string())
      quote = clip(sdk::trim(x["quote"].get<std::string>()), max_quote_bytes);
    auto in_evidence = !quote.empty()
                       && normalized(e->quote).find(normalized(quote)) != std::string::npos;
    j.quote = in_evidence ? quote : e->quote;
    if (j.result == verdict::supported && !in_evidence)
      j.result = verdict::partly_supported;
  }
  if (used == 0 && !ev.empty())
    return std::string{"no verdict had a known claim id and a verdict of supported, "
                       "partly_supported, unsupported or no_evidence."};
  return out;
}

// -- 6. repair ----------------------------------------------------------------------

std::optional<judgement> find_recitation(const claim& c,
                                         const std::map<int, indexed_document>& docs) {
  std::optional<judgement> best;
  double best_coverage = 0;
  // A document holding under supported_coverage of the claim's words cannot
  // support it (no span of it covers more than the whole does): skip it
  // unscored.
  auto terms = term_set(c.text);
  std::unordered_map<std::string_view, size_t> position;
  for (const auto& t : terms)
    position.emplace(t, position.size());
  std::vector<bool> held(position.size());
  auto could_support = [&](const indexed_document& doc) {
    if (position.empty())
      return true;
    std::fill(held.begin(), held.end(), false);
    size_t n = 0;
    for (const auto& passage : doc.tokens)
      for (const auto& w : passage)
        if (auto p = position.find(w); p != position.end() && !held[p->second]) {
          held[p->second] = true;
          ++n;
        }
    return static_cast<double>(n)
           >= lexical::supported_coverage * static_cast<double>(position.size());
  };
  for (const auto& [number, doc] : docs) {
    if (std::find(c.citations.begin(), c.citations.end(), number) != c.citations.end())
      continue;
    if (!could_support(doc))
      continue;
    auto ev = best_evidence(c.text, doc);
    auto j = judge_lexically(c.text, ev);
    if (j.result == verdict::supported && ev->coverage > best_coverage) {
      best_coverage = ev->coverage;
      best = std::move(j);
    }
  }
  return best;
}

std::string apply_verification(std::string_view report, const std::vector<claim_result>& results,
                               action what, const std::map<int, std::string>& urls,
                               std::vector<std::optional<span>>* spans) {
  std::string out{report};
  std::vector<size_t> order;
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].subject.end <= report.size()
        && results[i].subject.begin < results[i].subject.end)
      order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return results[x].subject.begin > results[y].subject.begin;
  });
  if (spans != nullptr) {
    spans->assign(results.size(), std::nullopt);
    for (auto i : order)
      (*spans)[i] = span{results[i].subject.begin, results[i].subject.end};
  }
  // An edit of [b, e) to `length` bytes moves the spans after it; the
  // claim's own span becomes [b, b + length) (none when dropped).
  auto edited = [&](size_t self, size_t b, size_t e, std::optional<size_t> length) {
    if (spans == nullptr)
      return;
    auto grown = static_cast<long long>(length.value_or(0)) - static_cast<long long>(e - b);
    for (auto& s : *spans)
      if (s && s->first >= e) {
        s->first = static_cast<size_t>(static_cast<long long>(s->first) + grown);
        s->second = static_cast<size_t>(static_cast<long long>(s->second) + grown);
      }
    if (length)
      (*spans)[self] = span{b, b + *length};
    else
      (*spans)[self].reset();
  };
  size_t limit = report.size();
  for (auto index : order) {
    const auto* r = &results[index];
    const auto& c = r->subject;
    if (c.end > limit)
      continue; // overlapping ranges: keep the later edit only
    limit = c.begin;
    auto sentence = std::string_view{report}.substr(c.begin, c.end - c.begin);
    auto cited = !c.citations.empty();
    auto bad = r->judged.result == verdict::unsupported
               || (cited && r->judged.result == verdict::no_evidence);
    // Where to insert: before the final stop (after the markers before it).
    auto insert_at = [&](std::string_view s) {
      auto e = s.size();
      while (e > 0 && (s[e - 1] == '"' || s[e - 1] == ')'))
        --e;
      if (e > 0 && (s[e - 1] == '.' || s[e - 1] == '!' || s[e - 1] == '?'))
        return e - 1;
      return s.size();
    };
    if (r->recited_to) {
      // Markers out, the new one in (a link if the old ones were).
      std::string bare;
      bool linked = false;
      for (size_t i = 0; i < sentence.size();) {
        if (auto m = marker_at(sentence, i)) {
          linked = linked || sentence.compare(i, 2, "[[") == 0;
          while (!bare.empty() && bare.back() == ' ')
            bare.pop_back();
          i = m->end;
          continue;
        }
        bare += sentence[i++];
      }
      while (!bare.empty() && is_space(bare.back()))
        bare.pop_back();
      auto at = insert_at(bare);
      auto n = std::to_string(*r->recited_to);
      auto url = urls.find(*r->recited_to);
      bare.insert(at, linked && url != urls.end() && !url->second.empty()
                        ? " [[" + n + "]](" + url->second + ")"
                        : " [" + n + "]");
      out.replace(c.begin, c.end - c.begin, bare);
      edited(index, c.begin, c.end, bare.size());
    } else if (bad && what == action::drop) {
      auto b = c.begin;
      auto e = c.end;
      while (e < out.size() && out[e] == ' ')
        ++e;
      out.erase(b, e - b);
      edited(index, b, e, std::nullopt);
    } else if (bad) {
      static constexpr std::string_view mark = " *(unverified)*";
      out.insert(c.begin + insert_at(sentence), mark);
      edited(index, c.begin, c.end, c.end - c.begin + mark.size());
    }
  }
  return out;
}

// -- 7. summary ------------------------------------------------------------------------

summary summarize(const std::vector<claim_result>& results) {
  summary s;
  s.claims = results.size();
  for (const auto& r : results) {
    if (!r.subject.citations.empty())
      ++s.cited;
    if (r.recited_to)
      ++s.recited;
    if (r.judged.snippet_only && r.judged.result != verdict::unverified)
      ++s.snippet_only;
    switch (r.judged.result) {
      case verdict::supported:
        ++s.supported;
        break;
      case verdict::partly_supported:
        ++s.partly_supported;
        break;
      case verdict::unsupported:
        ++s.unsupported;
        break;
      case verdict::no_evidence:
        ++s.no_evidence;
        break;
      case verdict::unverified:
        ++s.unverified;
        break;
    }
  }
  auto judged = s.claims - s.unverified;
  // A re-cited claim carries the verdict of its new source (supported).
  s.rate = judged == 0 ? 0.0 : static_cast<double>(s.supported) / judged;
  return s;
}

std::string summary_section(const summary& s, action what) {
  std::string out = "## Verification\n\n";
  if (s.claims == 0)
    return out + "The report makes no claim that could be checked against its sources.\n";
  auto n = [](size_t x, const char* one, const char* many) {
    return std::to_string(x) + " " + (x == 1 ? one : many);
  };
  out += "Each claim was checked against the text of the sources it cites: "
         + n(s.claims, "claim", "claims") + ", " + std::to_string(s.supported) + " supported, "
         + std::to_string(s.partly_supported) + " partly supported, "
         + std::to_string(s.unsupported) + " unsupported, " + std::to_string(s.no_evidence)
         + " without evidence in the cited text";
  if (s.recited > 0)
    out += ", " + std::to_string(s.recited) + " re-cited to a source that supports "
           + (s.recited == 1 ? "it" : "them");
  if (s.unverified > 0)
    out += ", " + std::to_string(s.unverified) + " not checked before the deadline";
  out += ". ";
  if (s.snippet_only > 0)
    out += n(s.snippet_only, "claim was", "claims were")
           + " judged against a search snippet only (snippet only: the page was not read). ";
  out += what == action::drop ? "Unsupported claims were removed."
                              : "Unsupported claims are marked *(unverified)*.";
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%.0f", s.rate * 100.0);
  out += " Verified: " + std::string{rate} + " %.\n";
  return out;
}

json claim_verified_packet(const claim_result& r) {
  json j = {{"type", "claim_verified"},
            {"claim", r.subject.text},
            {"citations", r.subject.citations},
            {"verdict", to_string(r.judged.result)},
            {"judge", r.judged.judge.empty() ? json(nullptr) : json(r.judged.judge)},
            {"evidence", r.judged.quote},
            {"source", r.judged.number == 0 ? json(nullptr) : json(r.judged.number)},
            {"snippet_only", r.judged.snippet_only},
            {"recited_to", r.recited_to ? json(*r.recited_to) : json(nullptr)}};
  j["id"] = r.subject.index;
  return j;
}

json claim_records(const std::vector<claim_result>& results,
                   const std::vector<std::optional<span>>& spans,
                   const std::map<int, std::string>& documents) {
  json out = json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const auto& j = r.judged;
    auto has_evidence = j.number != 0;
    auto doc = documents.find(j.number);
    json report_begin = nullptr;
    json report_end = nullptr;
    if (i < spans.size() && spans[i].has_value()) {
      report_begin = spans[i]->first;
      report_end = spans[i]->second;
    }
    out.push_back(
      {{"id", r.subject.index},
       {"claim", r.subject.text},
       {"report_begin", std::move(report_begin)},
       {"report_end", std::move(report_end)},
       {"citations", r.subject.citations},
       {"verdict", to_string(j.result)},
       {"judge", j.judge.empty() ? json(nullptr) : json(j.judge)},
       {"recited_to", r.recited_to ? json(*r.recited_to) : json(nullptr)},
       {"source", has_evidence ? json(j.number) : json(nullptr)},
       {"document_id", has_evidence && doc != documents.end() ? json(doc->second) : json(nullptr)},
       {"evidence_begin", has_evidence ? json(j.begin) : json(nullptr)},
       {"evidence_end", has_evidence ? json(j.end) : json(nullptr)},
       {"evidence", has_evidence ? json(j.quote) : json(nullptr)},
       {"snippet_only", j.snippet_only}});
  }
  return out;
}

json summary_packet(const summary& s) {
  return {{"type", "verification_summary"},
          {"claims", s.claims},
          {"cited", s.cited},
          {"supported", s.supported},
          {"partly_supported", s.partly_supported},
          {"unsupported", s.unsupported},
          {"no_evidence", s.no_evidence},
          {"unverified", s.unverified},
          {"recited", s.recited},
          {"snippet_only", s.snippet_only},
          {"rate", s.rate}};
}

} // namespace quarry::core::verification
