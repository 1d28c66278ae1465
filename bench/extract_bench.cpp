// Benchmark of the HTML main-content extractor: speed (MB/s on one core),
// quality (token F1 against the readability fixtures' expected.html, and
// trafilatura-style snippet precision/recall), metadata agreement with the
// fixtures' gold metadata, and optionally the same F1 for another extractor's
// output (--score-dir).

#include "quarry/extract/html.hpp"

#include "support/token_f1.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#ifndef QUARRY_FIXTURES_DIR
#  define QUARRY_FIXTURES_DIR "../shared/fixtures"
#endif

namespace ce = quarry::extract;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double f1(const std::string& got, const std::string& want) {
  return quarry::test::token_f1(got, want);
}

double mean_of(const std::vector<double>& xs) {
  double sum = 0;
  for (auto x : xs)
    sum += x;
  return xs.empty() ? 0 : sum / static_cast<double>(xs.size());
}

double median_of(std::vector<double> xs) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto n = xs.size();
  return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

// -- trafilatura-style snippet evaluation --------------------------------------
//
// trafilatura's evaluation gives every page a few text snippets that must be
// in the extraction and a few that must not (boilerplate), and counts: a
// must-have snippet found is a true positive, one missing a false negative, a
// must-not snippet found a false positive, one absent a true negative. Here
// the snippets are derived from the readability fixtures (see README.md):
// must-have from the text of expected.html, must-not from text blocks of
// source.html that expected.html does not contain. Texts are compared as
// sequences of f1 tokens (lower-cased letters/digits), joined by one space.

// The tokens of `text` joined with single spaces, with a space at both ends so
// that a snippet only matches whole tokens.
std::string token_line(const std::string& text) {
  std::string out = " ";
  for (auto& t : quarry::test::f1_tokens(text)) {
    out += t;
    out += ' ';
  }
  return out;
}

// The lines of `text` (blocks of the Markdown-like rendering), as token lists.
std::vector<std::vector<std::string>> token_blocks(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos)
      end = text.size();
    auto toks = quarry::test::f1_tokens(text.substr(pos, end - pos));
    if (!toks.empty())
      out.push_back(std::move(toks));
    pos = end + 1;
  }
  return out;
}

std::string join_tokens(const std::vector<std::string>& toks, size_t from, size_t count) {
  std::string out = " ";
  for (size_t i = from; i < from + count && i < toks.size(); ++i) {
    out += toks[i];
    out += ' ';
  }
  return out;
}

// Up to `k` indices of `n` items, evenly spread from first to last.
std::vector<size_t> spread(size_t n, size_t k) {
  std::vector<size_t> out;
  if (n == 0)
    return out;
  if (n <= k) {
    for (size_t i = 0; i < n; ++i)
      out.push_back(i);
    return out;
  }
  for (size_t i = 0; i < k; ++i)
    out.push_back(i * (n - 1) / (k - 1));
  return out;
}

struct snippets {
  std::vector<std::string> must_have;
  std::vector<std::string> must_not;
};

// Snippets per page at most, of each kind.
constexpr size_t snippets_per_page = 6;

// Must-have: from blocks of expected.html's text with at least 6 tokens, a run
// of up to 8 tokens from the middle of the block. Must-not: blocks of
// source.html's visible text (html_to_text: scripts, styles and hidden
// elements skipped) with 4 to 40 tokens whose first 10 tokens occur nowhere
// in expected.html's text (nor in the title and byline of the gold
// metadata, which readability keeps apart), each once per page.
snippets make_snippets(const std::string& expected_text, const std::string& source_text,
                       const std::string& also_allowed) {
  snippets out;
  auto want_line = token_line(expected_text);
  auto allowed_line = token_line(also_allowed);
  std::vector<std::string> have;
  for (auto& b : token_blocks(expected_text)) {
    if (b.size() < 6)
      continue;
    size_t len = std::min<size_t>(8, b.size());
    have.push_back(join_tokens(b, (b.size() - len) / 2, len));
  }
  for (auto i : spread(have.size(), snippets_per_page))
    out.must_have.push_back(have[i]);
  std::vector<std::string> bad;
  for (auto& b : token_blocks(source_text)) {
    if (b.size() < 4 || b.size() > 40)
      continue;
    auto snip = join_tokens(b, 0, 10);
    if (want_line.find(snip) != std::string::npos || allowed_line.find(snip) != std::string::npos
        || std::find(bad.begin(), bad.end(), snip) != bad.end())
      continue;
    bad.push_back(std::move(snip));
  }
  for (auto i : spread(bad.size(), snippets_per_page))
    out.must_not.push_back(bad[i]);
  return out;
}

struct confusion {
  size_t tp = 0, fn = 0, fp = 0, tn = 0;

  void add(const snippets& s, const std::string& got_text) {
    auto got = token_line(got_text);
    for (auto& x : s.must_have)
      ++(got.find(x) != std::string::npos ? tp : fn);
    for (auto& x : s.must_not)
      ++(got.find(x) != std::string::npos ? fp : tn);
  }

  double precision() const {
    return tp + fp == 0 ? 0 : static_cast<double>(tp) / static_cast<double>(tp + fp);
  }

  double recall() const {
    return tp + fn == 0 ? 0 : static_cast<double>(tp) / static_cast<double>(tp + fn);
  }

  double f1() const {
    auto p = precision();
    auto r = recall();
    return p + r == 0 ? 0 : 2 * p * r / (p + r);
  }

  double accuracy() const {
    auto all = tp + fn + fp + tn;
    return all == 0 ? 0 : static_cast<double>(tp + tn) / static_cast<double>(all);
  }
};

// -- metadata agreement ----------------------------------------------------------

// Whitespace folded, lower-cased (ASCII), for metadata comparisons.
std::string norm(const std::string& s) {
  std::string out;
  bool space = false;
  for (auto ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isspace(c)) {
      space = !out.empty();
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

// Matches and checks of one metadata field over the gold files.
struct field_score {
  size_t checks = 0, ok = 0;

  void add(bool match) {
    ++checks;
    if (match)
      ++ok;
  }
};

std::string gold_string(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string())
    return {};
  return j[key].get<std::string>();
}

// An author matches when one contains the other (gold bylines often carry
// "By" or a role; ours may list several names).
bool byline_match(const std::string& got, const std::string& want) {
  auto g = norm(got);
  auto w = norm(want);
  return !g.empty() && (w.find(g) != std::string::npos || g.find(w) != std::string::npos);
}

// Dates match on their first 10 characters (the day) when both look like
// ISO dates, exactly otherwise.
bool date_match(const std::string& got, const std::string& want) {
  auto g = norm(got);
  auto w = norm(want);
  if (g.size() >= 10 && w.size() >= 10 && w[4] == '-' && g[4] == '-')
    return g.compare(0, 10, w, 0, 10) == 0;
  return !g.empty() && g == w;
}

void print_fields(const char* set, const std::vector<std::pair<std::string, field_score>>& f) {
  size_t checks = 0, ok = 0;
  std::printf("metadata (%s):", set);
  for (auto& [name, s] : f) {
    checks += s.checks;
    ok += s.ok;
    std::printf(" %s %zu/%zu", name.c_str(), s.ok, s.checks);
  }
  std::printf("  => %.3f\n",
              checks == 0 ? 0.0 : static_cast<double>(ok) / static_cast<double>(checks));
}

// Compares our metadata with readability's expected-metadata.json (title,
// byline, lang, siteName, publishedTime: the fields given, non-null) and with
// go-trafilatura's expected values (Title, Author, Sitename).
void run_metadata(const std::string& dir, bool verbose) {
  std::vector<std::pair<std::string, field_score>> r = {
    {"title", {}}, {"byline", {}}, {"lang", {}}, {"site", {}}, {"published", {}}};
  for (auto& entry : fs::directory_iterator{dir}) {
    auto meta_file = entry.path() / "expected-metadata.json";
    if (!fs::exists(meta_file) || !fs::exists(entry.path() / "source.html"))
      continue;
    auto gold = nlohmann::json::parse(read_file(meta_file), nullptr, false);
    auto x = ce::extract_html(read_file(entry.path() / "source.html"));
    auto check = [&](size_t i, const std::string& want, bool match) {
      if (want.empty())
        return;
      r[i].second.add(match);
      if (!match && verbose)
        std::printf("  %s %s: got '%s' want '%s'\n", entry.path().filename().string().c_str(),
                    r[i].first.c_str(),
                    i == 0   ? x.title.c_str()
                    : i == 1 ? x.byline.c_str()
                    : i == 2 ? x.lang.c_str()
                    : i == 3 ? x.site_name.c_str()
                             : x.published.c_str(),
                    want.c_str());
    };
    auto title = gold_string(gold, "title");
    check(0, title, norm(x.title) == norm(title));
    auto byline = gold_string(gold, "byline");
    check(1, byline, byline_match(x.byline, byline));
    auto lang = gold_string(gold, "lang");
    check(2, lang, norm(x.lang) == norm(lang));
    auto site = gold_string(gold, "siteName");
    check(3, site, norm(x.site_name) == norm(site));
    auto published = gold_string(gold, "publishedTime");
    check(4, published, date_match(x.published, published));
  }
  print_fields("readability", r);
  auto base = fs::path{dir}.parent_path() / "go-trafilatura";
  auto expected_file = base / "simple_json_metadata_expected.json";
  if (!fs::exists(expected_file))
    return;
  auto expected = nlohmann::json::parse(read_file(expected_file), nullptr, false);
  std::vector<std::pair<std::string, field_score>> t = {
    {"title", {}}, {"author", {}}, {"site", {}}};
  for (auto& [file, fields] : expected.items()) {
    auto x = ce::extract_html(read_file(base / file));
    auto check = [&](size_t i, const char* key, const std::string& got) {
      auto want = gold_string(fields, key);
      if (want.empty())
        return;
      bool match = norm(got) == norm(want);
      t[i].second.add(match);
      if (!match && verbose)
        std::printf("  %s %s: got '%s' want '%s'\n", file.c_str(), key, got.c_str(), want.c_str());
    };
    check(0, "Title", x.title);
    check(1, "Author", x.byline);
    check(2, "Sitename", x.site_name);
  }
  print_fields("go-trafilatura", t);
}

// Speed of the other extractor, from `speed.txt` in its output folder
// ("key value" lines written by bench/readability/compare.mjs); negative when
// absent.
struct other_speed {
  double mb_per_s = -1;
  double pages_per_s = -1;
  double mb_per_cpu_s = -1;
};

other_speed read_other_speed(const fs::path& file) {
  other_speed out;
  std::ifstream in{file};
  std::string key;
  double value = 0;
  while (in >> key >> value) {
    if (key == "mb_per_s")
      out.mb_per_s = value;
    else if (key == "pages_per_s")
      out.pages_per_s = value;
    else if (key == "mb_per_cpu_s")
      out.mb_per_cpu_s = value;
  }
  return out;
}

std::string format_speed(double x) {
  if (x < 0)
    return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), x < 10 ? "%.2f" : "%.1f", x);
  return buf;
}

// Hostile pages: `depth` nested <div>s (unclosed) around one paragraph, and
// a page of `depth` nested divs repeated until it reaches about the same size
// with every div closed again. Prints the time of each extraction; the time
// must grow linearly with the size.
int run_nested() {
  std::printf("%-34s %10s %10s %10s\n", "page", "bytes", "ms", "MB/s");
  for (size_t depth : {size_t{10000}, size_t{100000}, size_t{400000}}) {
    for (bool closed : {false, true}) {
      std::string html = "<html><body>";
      for (size_t i = 0; i < depth; ++i)
        html += "<div>";
      html += "<p>Heat pumps move heat from a cold place to a warm one.</p>";
      if (closed)
        for (size_t i = 0; i < depth; ++i)
          html += "</div>";
      html += "</body></html>";
      auto start = std::chrono::steady_clock::now();
      auto x = ce::extract_html(html);
      auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();
      if (x.text.find("Heat pumps") == std::string::npos) {
        std::fprintf(stderr, "nested page lost its text\n");
        return 1;
      }
      auto name = std::to_string(depth) + " nested divs" + (closed ? " (closed)" : " (unclosed)");
      std::printf("%-34s %10zu %10.1f %10.2f\n", name.c_str(), html.size(), ms,
                  static_cast<double>(html.size()) / 1e6 / (ms / 1000));
    }
  }
  return 0;
}

// -- held-out pages with human snippets ------------------------------------------
//
// `--heldout DIR`: pages that played no part in building the extractor, with
// snippets that people wrote for them (DIR/annotations.json: for each page
// its file under DIR/pages, its address, the snippets it must contain
// ("with"), must not contain ("without") and, where given, snippets of its
// readers' comments). Counted as trafilatura counts: a found "with" is a true
// positive, a missing one a false negative, a found "without" a false
// positive, an absent one a true negative. Two matchings: as token runs (the
// other snippet counts' rule: case, punctuation and Markdown marks do not
// matter) and as plain substrings of the text with whitespace folded
// (trafilatura's own rule). Only the main text is searched; comments are
// counted apart against the extraction's comments.

// `text` with runs of whitespace folded to one space.
std::string fold_space(const std::string& text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      space = !out.empty();
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

int run_heldout(const std::string& dir, bool verbose, int rounds) {
  auto annotations = nlohmann::json::parse(read_file(fs::path{dir} / "annotations.json"), nullptr,
                                           false);
  if (!annotations.is_object() || !annotations["pages"].is_array()) {
    std::fprintf(stderr, "no pages in %s/annotations.json\n", dir.c_str());
    return 1;
  }
  auto strings = [](const nlohmann::json& j) {
    std::vector<std::string> out;
    if (j.is_array())
      for (auto& x : j)
        if (x.is_string())
          out.push_back(x.get<std::string>());
    return out;
  };
  confusion tokens;
  confusion plain;
  size_t comments_found = 0;
  size_t comments_total = 0;
  std::vector<std::string> sources;
  std::vector<std::string> urls;
  for (auto& page : annotations["pages"]) {
    auto file = page.value("file", std::string{});
    auto url = page.value("url", std::string{});
    auto html = read_file(fs::path{dir} / "pages" / file);
    if (html.empty()) {
      std::fprintf(stderr, "missing page %s\n", file.c_str());
      return 1;
    }
    auto x = ce::extract_html(html, url);
    snippets s;
    s.must_have = strings(page["with"]);
    s.must_not = strings(page["without"]);
    snippets as_tokens;
    for (auto& w : s.must_have)
      as_tokens.must_have.push_back(token_line(w));
    for (auto& w : s.must_not)
      as_tokens.must_not.push_back(token_line(w));
    tokens.add(as_tokens, x.text);
    auto text = fold_space(x.text);
    confusion one;
    for (auto& w : s.must_have)
      ++(text.find(fold_space(w)) != std::string::npos ? one.tp : one.fn);
    for (auto& w : s.must_not)
      ++(text.find(fold_space(w)) != std::string::npos ? one.fp : one.tn);
    plain.tp += one.tp;
    plain.fn += one.fn;
    plain.fp += one.fp;
    plain.tn += one.tn;
    auto comment_line = token_line(x.comments);
    for (auto& c : strings(page["comments"])) {
      ++comments_total;
      if (comment_line.find(token_line(c)) != std::string::npos)
        ++comments_found;
    }
    if (verbose) {
      std::printf("%-45s with %zu/%zu  without kept %zu/%zu\n", file.c_str(), one.tp,
                  one.tp + one.fn, one.fp, one.fp + one.tn);
      auto line = token_line(x.text);
      for (auto& w : s.must_have)
        if (line.find(token_line(w)) == std::string::npos)
          std::printf("    missed: %s\n", w.c_str());
      for (auto& w : s.must_not)
        if (line.find(token_line(w)) != std::string::npos)
          std::printf("    kept:   %s\n", w.c_str());
    }
    sources.push_back(std::move(html));
    urls.push_back(std::move(url));
  }
  size_t bytes = 0;
  for (auto& h : sources)
    bytes += h.size();
  size_t sink = 0;
  auto cpu_start = std::clock();
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < sources.size(); ++i)
      sink += ce::extract_html(sources[i], urls[i]).text.size();
  auto cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  std::printf("held-out pages   %zu (%.2f MB), %zu with, %zu without snippets\n", sources.size(),
              static_cast<double>(bytes) / 1e6, tokens.tp + tokens.fn, tokens.fp + tokens.tn);
  std::printf("as token runs    precision %.4f  recall %.4f  F1 %.4f  "
              "(tp %zu fn %zu fp %zu tn %zu)\n",
              tokens.precision(), tokens.recall(), tokens.f1(), tokens.tp, tokens.fn, tokens.fp,
              tokens.tn);
  std::printf("as substrings    precision %.4f  recall %.4f  F1 %.4f  "
              "(tp %zu fn %zu fp %zu tn %zu)\n",
              plain.precision(), plain.recall(), plain.f1(), plain.tp, plain.fn, plain.fp,
              plain.tn);
  std::printf("comments found   %zu/%zu (in the extraction's comments)\n", comments_found,
              comments_total);
  std::printf("speed per CPU    %.1f MB/s per CPU-second (%d rounds; checksum %zu)\n",
              cpu > 0 ? static_cast<double>(bytes) * rounds / 1e6 / cpu : 0.0, rounds, sink);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--nested") == 0)
      return run_nested();
    // Prints html_to_text of one file (the text the scores compare with).
    if (std::strcmp(argv[i], "--show-all") == 0 && i + 1 < argc) {
      std::printf("%s\n", ce::html_to_text(read_file(argv[i + 1])).c_str());
      return 0;
    }
    // Prints the extraction of one file: metadata, text and comments.
    if (std::strcmp(argv[i], "--show") == 0 && i + 1 < argc) {
      auto x = ce::extract_html(read_file(argv[i + 1]));
      std::printf("title: %s\nbyline: %s\npublished: %s\nmodified: %s\n"
                  "site: %s\nlang: %s\ntype: %s\n\n%s\n\n--- comments ---\n%s\n",
                  x.title.c_str(), x.byline.c_str(), x.published.c_str(), x.modified.c_str(),
                  x.site_name.c_str(), x.lang.c_str(), x.page_type.c_str(), x.text.c_str(),
                  x.comments.c_str());
      return 0;
    }
  }
  int rounds = 5;
  bool verbose = false;
  std::string dir = QUARRY_FIXTURES_DIR "/html/readability";
  // Another extractor's output, one <case>.html per page, scored like ours.
  std::string score_dir;
  std::string score_label = "other";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--verbose") == 0)
      verbose = true;
    else if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
      dir = argv[++i];
    else if (std::strcmp(argv[i], "--score-dir") == 0 && i + 1 < argc)
      score_dir = argv[++i];
    else if (std::strcmp(argv[i], "--score-label") == 0 && i + 1 < argc)
      score_label = argv[++i];
  }
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--heldout") == 0)
      return run_heldout(i + 1 < argc && argv[i + 1][0] != '-' ? argv[i + 1]
                                                               : "tests/data/extraction-heldout",
                         verbose, rounds);
  struct page {
    std::string name, source, expected, gold_meta;
  };
  std::vector<page> pages;
  for (auto& entry : fs::directory_iterator{dir}) {
    if (!fs::exists(entry.path() / "source.html"))
      continue;
    pages.push_back({entry.path().filename().string(), read_file(entry.path() / "source.html"),
                     read_file(entry.path() / "expected.html"),
                     fs::exists(entry.path() / "expected-metadata.json")
                       ? read_file(entry.path() / "expected-metadata.json")
                       : std::string{}});
  }
  std::sort(pages.begin(), pages.end(),
            [](const page& a, const page& b) { return a.name < b.name; });
  if (pages.empty()) {
    std::fprintf(stderr, "no pages in %s\n", dir.c_str());
    return 1;
  }
  // Quality.
  std::vector<double> scores;
  confusion snippet_counts;
  for (auto& p : pages) {
    auto got = ce::extract_html(p.source).text;
    auto want = ce::html_to_text(p.expected);
    auto s = f1(got, want);
    scores.push_back(s);
    auto gold = nlohmann::json::parse(p.gold_meta, nullptr, false);
    auto snips = make_snippets(want, ce::html_to_text(p.source),
                               gold_string(gold, "title") + "\n" + gold_string(gold, "byline"));
    confusion page_counts;
    page_counts.add(snips, got);
    snippet_counts.tp += page_counts.tp;
    snippet_counts.fn += page_counts.fn;
    snippet_counts.fp += page_counts.fp;
    snippet_counts.tn += page_counts.tn;
    if (verbose) {
      std::printf("%-50s %.3f  got %zu want %zu  snippets tp %zu fn %zu fp %zu "
                  "tn %zu\n",
                  p.name.c_str(), s, got.size(), want.size(), page_counts.tp, page_counts.fn,
                  page_counts.fp, page_counts.tn);
      auto line = token_line(got);
      for (auto& x : snips.must_have)
        if (line.find(x) == std::string::npos)
          std::printf("    missing:%s\n", x.c_str());
      for (auto& x : snips.must_not)
        if (line.find(x) != std::string::npos)
          std::printf("    kept:   %s\n", x.c_str());
    }
  }
  auto mean = mean_of(scores);
  auto median = median_of(scores);
  // The other extractor's output: its HTML rendered with html_to_text, exactly
  // like expected.html, then the same F1. A missing file counts as empty.
  std::vector<double> other_scores;
  size_t other_missing = 0;
  if (!score_dir.empty()) {
    for (auto& p : pages) {
      auto file = fs::path{score_dir} / (p.name + ".html");
      std::string html;
      if (fs::exists(file))
        html = read_file(file);
      else
        ++other_missing;
      other_scores.push_back(f1(ce::html_to_text(html), ce::html_to_text(p.expected)));
    }
  }
  // Speed: every page `rounds` times on this thread, each round timed.
  size_t bytes = 0;
  for (auto& p : pages)
    bytes += p.source.size();
  size_t sink = 0;
  std::vector<double> round_secs;
  std::vector<double> round_cpu_secs;
  for (int r = 0; r < rounds; ++r) {
    auto cpu_start = std::clock();
    auto start = std::chrono::steady_clock::now();
    for (auto& p : pages)
      sink += ce::extract_html(p.source).text.size();
    round_secs.push_back(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    round_cpu_secs.push_back(static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
  }
  double secs = 0;
  for (auto x : round_secs)
    secs += x;
  auto mb = static_cast<double>(bytes) * rounds / 1e6;
  std::printf("pages            %zu (%.1f MB)\n", pages.size(), static_cast<double>(bytes) / 1e6);
  std::printf("token F1 mean    %.4f\n", mean);
  std::printf("token F1 median  %.4f\n", median);
  std::printf("snippets         %zu must-have, %zu must-not: tp %zu fn %zu fp %zu "
              "tn %zu\n",
              snippet_counts.tp + snippet_counts.fn, snippet_counts.fp + snippet_counts.tn,
              snippet_counts.tp, snippet_counts.fn, snippet_counts.fp, snippet_counts.tn);
  std::printf("snippet P/R/F1   precision %.4f  recall %.4f  F1 %.4f  "
              "accuracy %.4f\n",
              snippet_counts.precision(), snippet_counts.recall(), snippet_counts.f1(),
              snippet_counts.accuracy());
  run_metadata(dir, verbose);
  std::printf("speed            %.1f MB/s on one core (%.1f ms/page, %d rounds)\n", mb / secs,
              secs * 1000 / (static_cast<double>(pages.size()) * rounds), rounds);
  double cpu_secs = 0;
  for (auto x : round_cpu_secs)
    cpu_secs += x;
  // Per CPU-second of the process: less disturbed by other jobs on a shared
  // machine than the wall clock (which counts the time we waited for a core).
  std::printf("speed per CPU   %.1f MB/s per CPU-second of the process\n",
              cpu_secs > 0 ? mb / cpu_secs : 0.0);
  std::printf("(checksum %zu)\n", sink);
  if (score_dir.empty())
    return 0;
  // Side by side with the other extractor.
  std::vector<double> mbps;
  std::vector<double> pps;
  std::vector<double> cpu_mbps;
  for (size_t r = 0; r < round_secs.size(); ++r) {
    mbps.push_back(static_cast<double>(bytes) / 1e6 / round_secs[r]);
    pps.push_back(static_cast<double>(pages.size()) / round_secs[r]);
    cpu_mbps.push_back(static_cast<double>(bytes) / 1e6 / round_cpu_secs[r]);
  }
  std::printf("\nMB/s per round  ");
  for (auto x : mbps)
    std::printf(" %.1f", x);
  std::printf("\nper CPU-second  ");
  for (auto x : cpu_mbps)
    std::printf(" %.1f", x);
  std::printf("\n");
  auto speed = read_other_speed(fs::path{score_dir} / "speed.txt");
  auto our_mbps = median_of(mbps);
  auto our_pps = median_of(pps);
  auto other_mean = mean_of(other_scores);
  auto other_median = median_of(other_scores);
  // Wins and ties per page; a tie is a difference below 0.001.
  size_t wins = 0;
  size_t losses = 0;
  size_t ties = 0;
  for (size_t i = 0; i < pages.size(); ++i) {
    auto d = scores[i] - other_scores[i];
    if (d >= 0.001)
      ++wins;
    else if (d <= -0.001)
      ++losses;
    else
      ++ties;
    if (verbose)
      std::printf("%-50s quarry %.3f  %s %.3f\n", pages[i].name.c_str(), scores[i],
                  score_label.c_str(), other_scores[i]);
  }
  std::printf("\ntoken F1 over %zu pages; speed = median of %d rounds on one "
              "thread, by wall clock and per CPU-second of the process\n",
              pages.size(), rounds);
  std::printf("%-14s %8s %10s %11s %13s %9s\n", "extractor", "mean F1", "median F1", "MB/s wall",
              "MB/s per CPU", "pages/s");
  std::printf("%-14s %8.4f %10.4f %11s %13s %9s\n", "quarry", mean, median,
              format_speed(our_mbps).c_str(), format_speed(median_of(cpu_mbps)).c_str(),
              format_speed(our_pps).c_str());
  std::printf("%-14s %8.4f %10.4f %11s %13s %9s\n", score_label.c_str(), other_mean, other_median,
              format_speed(speed.mb_per_s).c_str(), format_speed(speed.mb_per_cpu_s).c_str(),
              format_speed(speed.pages_per_s).c_str());
  if (other_missing > 0)
    std::printf("(%zu pages had no output file in %s: scored as empty)\n", other_missing,
                score_dir.c_str());
  std::printf("pages won: quarry %zu, %s %zu, ties %zu (difference < 0.001)\n", wins,
              score_label.c_str(), losses, ties);
  if (speed.mb_per_s > 0) {
    auto ratio = our_mbps / speed.mb_per_s;
    // The aim is judged on the smaller of the two ratios.
    auto low = ratio;
    std::printf("speed ratio      %.1fx by wall clock", ratio);
    if (speed.mb_per_cpu_s > 0) {
      auto cpu_ratio = median_of(cpu_mbps) / speed.mb_per_cpu_s;
      low = std::min(low, cpu_ratio);
      std::printf(", %.1fx per CPU-second", cpu_ratio);
    }
    std::printf("\n");
    std::printf("aims             mean F1 >= %s's: %s; median F1 >= %s's: %s; "
                "speed >= 10x: %s\n",
                score_label.c_str(), mean >= other_mean ? "yes" : "no", score_label.c_str(),
                median >= other_median ? "yes" : "no", low >= 10 ? "yes" : "no");
  }
  return 0;
}
