// The clean-up of the rendered text, line by line: the title's heading, the
// byline again, and lines that are boilerplate by their words (labels,
// image credits, a date alone, a count of comments, an entry's details).

#include "html_internal.hpp"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::extract::detail {

// Drops a leading heading equal to the title (rendered separately).
std::string strip_title_heading(std::string text, const std::string& title) {
  if (title.empty() || text.rfind('#', 0) != 0)
    return text;
  auto nl = text.find('\n');
  auto first = text.substr(0, nl);
  auto body = first.substr(first.find(' ') + 1);
  if (sdk::to_lower(body) != sdk::to_lower(title))
    return text;
  if (nl == std::string::npos)
    return {};
  auto start = text.find_first_not_of('\n', nl);
  return start == std::string::npos ? std::string{} : text.substr(start);
}

namespace {

// The words of a line, lower-cased (ASCII), without Markdown marks.
std::string line_key(std::string_view line) {
  std::string out;
  bool space = false;
  for (auto ch : line) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80) {
      if (space && !out.empty())
        out += ' ';
      space = false;
      out += static_cast<char>(std::tolower(c));
    } else {
      space = true;
    }
  }
  return out;
}

// Lines that are boilerplate by their words alone: labels of ads, share
// buttons and teaser lists, mostly English with the ad label in a few other
// languages (compared on line_key).
const std::initializer_list<std::string_view> boilerplate_lines = {
  "advertisement",
  "advertising",
  "anzeige",
  "publicité",
  "publicidad",
  "pubblicità",
  "reklama",
  "share",
  "share this",
  "share this article",
  "share this story",
  "share on facebook",
  "share on twitter",
  "tweet",
  "email",
  "print",
  "read more",
  "continue reading",
  "related",
  "related articles",
  "related stories",
  "related posts",
  "you may also like",
  "recommended",
  "more stories",
  "most popular",
  "most read",
  "sign up",
  "subscribe",
  "follow us",
  "comments",
  "leave a comment",
  "leave a reply",
  "write a comment",
  "post a comment",
  "add a comment",
  "kommentar schreiben",
  "kommentare schreiben",
  "kommentieren",
  "skip to content",
  "skip to main content",
  "back to top",
  "image",
  "photo",
  "getty images",
  "story continues below advertisement"};

// The words of `key` (a line_key).
std::vector<std::string_view> key_words(std::string_view key) {
  std::vector<std::string_view> words;
  any_token(key, [&](std::string_view w) {
    words.push_back(w);
    return false;
  });
  return words;
}

bool all_digits(std::string_view w) {
  return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// An image credit: "Photograph by Jane Roe", "(Credit: Jane Roe / Agency)",
// "Foto: dpa", "Image courtesy of NASA".
bool credit_line(std::string_view line) {
  auto low = sdk::to_lower(sdk::trim(line));
  std::string_view text{low};
  while (!text.empty() && std::string_view{"([*_> "}.find(text.front()) != std::string_view::npos)
    text.remove_prefix(1);
  static const std::initializer_list<std::string_view> nouns = {
    "photograph",   "photographs",   "photo",        "photos",        "image",         "images",
    "picture",      "pictures",      "illustration", "illustrations", "credit",        "credits",
    "image credit", "image credits", "photo credit", "photo credits", "foto",          "fotos",
    "bild",         "bilder",        "bildquelle",   "crédit photo",  "crédits photo", "crédit",
    "crédits",      "imagen",        "imagem"};
  for (auto noun : nouns) {
    if (!starts_with(text, noun))
      continue;
    auto rest = text.substr(noun.size());
    auto after = rest.find_first_not_of(' ');
    if (after == std::string_view::npos)
      continue;
    rest.remove_prefix(after);
    // "Photo: AP", "Photograph by Jane Roe", "Image courtesy of NASA"; the
    // first letter after the noun must not continue a word ("Imagery").
    if (after == 0 && rest.front() != ':')
      continue;
    if (rest.front() == ':' || starts_with(rest, "by ") || starts_with(rest, "von ")
        || starts_with(rest, "par ") || starts_with(rest, "courtesy"))
      return true;
  }
  return false;
}

// A date or a time and nothing else: "3:59 PM", "19:49", "August 5, 2019
// at 1:46 pm", "26.10.2010", "Mi, 3. März 2021".
bool date_line(std::string_view line, std::string_view key) {
  static const std::initializer_list<std::string_view> months = {
    "jan",      "feb",      "mar",        "apr",      "jun",       "jul",      "aug",
    "sep",      "sept",     "oct",        "nov",      "dec",       "january",  "february",
    "march",    "april",    "may",        "june",     "july",      "august",   "september",
    "october",  "november", "december",   "januar",   "februar",   "märz",     "mai",
    "juni",     "juli",     "oktober",    "dezember", "janvier",   "février",  "mars",
    "avril",    "juin",     "juillet",    "août",     "septembre", "octobre",  "novembre",
    "décembre", "enero",    "febrero",    "marzo",    "abril",     "mayo",     "junio",
    "julio",    "agosto",   "septiembre", "octubre",  "noviembre", "diciembre"};
  // The other words a date or a time may hold: days, "at", "um", "Uhr".
  static const std::initializer_list<std::string_view> words = {
    "am",     "pm",       "at",        "um",         "uhr",     "on",       "the",
    "of",     "de",       "del",       "le",         "el",      "à",        "h",
    "mon",    "tue",      "wed",       "thu",        "fri",     "sat",      "sun",
    "monday", "tuesday",  "wednesday", "thursday",   "friday",  "saturday", "sunday",
    "mo",     "di",       "mi",        "do",         "fr",      "sa",       "so",
    "montag", "dienstag", "mittwoch",  "donnerstag", "freitag", "samstag",  "sonntag"};
  if (key.empty() || key.size() > 40)
    return false;
  bool number = false;
  bool month = false;
  for (auto w : key_words(key)) {
    auto ordinal = w.size() > 2 && all_digits(w.substr(0, w.size() - 2))
                   && (ends_with(w, "st") || ends_with(w, "nd") || ends_with(w, "rd")
                       || ends_with(w, "th"));
    if (all_digits(w) || ordinal) {
      number = true;
      continue;
    }
    if (std::find(months.begin(), months.end(), w) != months.end())
      month = true;
    else if (std::find(words.begin(), words.end(), w) == words.end())
      return false;
  }
  if (!number)
    return false;
  // A month named, a clock time (h:mm) or a day.month.year.
  auto digit = [&](size_t i) { return i < line.size() && line[i] >= '0' && line[i] <= '9'; };
  for (size_t i = 1; i + 2 < line.size(); ++i)
    if (line[i] == ':' && digit(i - 1) && digit(i + 1) && digit(i + 2))
      return true;
  size_t separators = 0;
  for (size_t i = 1; i + 1 < line.size(); ++i)
    if ((line[i] == '.' || line[i] == '/' || line[i] == '-') && digit(i - 1) && digit(i + 1))
      ++separators;
  return month || separators >= 2;
}

// A count of comments: "Comments: 0", "3 Kommentare", "Kommentare insgesamt: 0".
bool comment_count_line(std::string_view key) {
  static const std::initializer_list<std::string_view> nouns = {
    "comment",    "comments",    "kommentar", "kommentare", "commentaire", "commentaires",
    "comentario", "comentarios", "commento",  "commenti",   "reactie",     "reacties"};
  static const std::initializer_list<std::string_view> others = {
    "insgesamt", "total", "no", "keine", "aucun", "one", "zero"};
  auto words = key_words(key);
  if (words.empty() || words.size() > 4)
    return false;
  bool noun = false;
  bool count = false;
  for (auto w : words) {
    if (std::find(nouns.begin(), nouns.end(), w) != nouns.end())
      noun = true;
    else if (all_digits(w) || std::find(others.begin(), others.end(), w) != others.end())
      count = true;
    else
      return false;
  }
  return noun && count;
}

// A line of an entry's details: three fields at least, "Label: value",
// parted by "|" ("Views: 1120 | Added by: Posh | Tags: ... | Rating: 0").
bool details_line(std::string_view line) {
  size_t fields = 0;
  size_t labelled = 0;
  size_t pos = 0;
  while (pos <= line.size()) {
    auto end = line.find('|', pos);
    if (end == std::string_view::npos)
      end = line.size();
    auto field = sdk::trim(line.substr(pos, end - pos));
    if (!field.empty()) {
      ++fields;
      auto colon = field.find(':');
      if (colon != std::string_view::npos && colon > 0 && colon < 30
          && std::count(field.begin(), field.begin() + colon, ' ') < 3)
        ++labelled;
    }
    pos = end + 1;
  }
  return fields >= 3 && labelled >= 3 && labelled * 4 >= fields * 3;
}

} // namespace

// Drops, outside code blocks, the lines of `text` that are the byline again
// ("By Jane Roe" when the byline is "Jane Roe") and lines that are
// boilerplate by their words: labels, image credits, a date or time alone,
// a count of comments, a line of an entry's details.
std::string drop_boilerplate_lines(const std::string& text, const std::string& byline) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos)
      end = text.size();
    lines.push_back(std::string_view{text}.substr(pos, end - pos));
    pos = end + 1;
  }
  auto by = line_key(byline);
  std::string out;
  out.reserve(text.size());
  bool dropped = false;
  bool code = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    bool fence = lines[i].rfind("```", 0) == 0;
    if (fence)
      code = !code;
    bool drop = false;
    if (!code && !fence && lines[i].size() < 80) {
      auto key = line_key(lines[i]);
      // Table rows, list items and headings are the article's structure.
      auto digits = lines[i].find_first_not_of("0123456789");
      auto structure = !lines[i].empty()
                       && (lines[i].front() == '|' || lines[i].front() == '#'
                           || starts_with(lines[i], "- ") || starts_with(lines[i], "* ")
                           || (digits > 0 && digits != std::string_view::npos
                               && lines[i].compare(digits, 2, ". ") == 0));
      drop = (!by.empty() && (key == by || key == "by " + by))
             || std::find(boilerplate_lines.begin(), boilerplate_lines.end(), key)
                  != boilerplate_lines.end()
             || credit_line(lines[i])
             || (!structure && (date_line(lines[i], key) || comment_count_line(key)));
    }
    if (!code && !fence && !drop && lines[i].size() < 400 && !lines[i].empty()
        && lines[i].front() != '|')
      drop = details_line(lines[i]);
    if (drop) {
      dropped = true;
      continue;
    }
    // Dropping a line must not leave three line breaks in a row.
    if (lines[i].empty() && dropped
        && (out.empty()
            || (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n')))
      continue;
    dropped = false;
    out.append(lines[i]);
    out += '\n';
  }
  while (!out.empty() && out.back() == '\n')
    out.pop_back();
  return out;
}

} // namespace quarry::extract::detail
