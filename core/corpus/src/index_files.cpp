// What a file yields for the corpus index: its type by name, its title,
// text, language and date, read with quarry_extract (main content of HTML
// pages, PDF text, decoded plain text).

#include "index_internal.hpp"

#include "quarry/corpus/language.hpp"
#include "quarry/corpus/text.hpp"
#include "quarry/extract/html.hpp"
#include "quarry/extract/pdf.hpp"

#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <string_view>

#include <sys/stat.h>

namespace quarry::corpus::detail {

namespace fs = std::filesystem;

namespace {

// The main content of an HTML file is indexed when it holds at least this
// share (1/3) of the page's visible text. On the 130 readability test pages
// (news and blog articles) the main content holds 85% in the median and less
// than a third on 11 pages (less than half on 25), whose boilerplate is then
// indexed too.
constexpr size_t min_main_share_numerator = 1;
constexpr size_t min_main_share_denominator = 3;

// How long the text of one PDF file may take to read.
constexpr std::chrono::milliseconds pdf_time_limit{60000};

// The letters and digits of a text (bytes of multi-byte UTF-8 characters
// count too): a length measure that ignores layout and Markdown marks.
size_t visible_chars(std::string_view text) {
  size_t n = 0;
  for (auto ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      ++n;
  }
  return n;
}

} // namespace

file_type type_of(const fs::path& p) {
  auto ext = p.extension().string();
  for (auto& c : ext)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  if (ext == ".md" || ext == ".markdown")
    return file_type::markdown;
  if (ext == ".txt" || ext == ".text")
    return file_type::text;
  if (ext == ".html" || ext == ".htm" || ext == ".xhtml")
    return file_type::html;
  if (ext == ".pdf")
    return file_type::pdf;
  return file_type::none;
}

// Extracts the title and text of one file.
document_content document_text(const std::string& path, file_type type, std::string bytes) {
  document_content result;
  switch (type) {
    case file_type::html: {
      auto decoded = extract::decode_document(bytes, {});
      if (!decoded.note.empty())
        result.note = path + ": " + decoded.note;
      const auto& html = decoded.text;
      auto main = extract::extract_html(html, file_url(path));
      auto whole = extract::html_to_text(html);
      result.title = std::move(main.title);
      result.published = std::move(main.published);
      result.declared_language = normalize_language(main.lang);
      // Readability-style scoring keeps an article and drops navigation, but
      // on documentation, index or FAQ pages it may keep one section of
      // many. Use the main content only when it holds at least a third (the
      // min_main_share constants) of the page's visible text, the whole page
      // otherwise: an index favours recall over a little navigation noise.
      if (visible_chars(main.text) * min_main_share_denominator
          >= visible_chars(whole) * min_main_share_numerator)
        result.text = std::move(main.text);
      else
        result.text = std::move(whole);
      break;
    }
    case file_type::pdf: {
      auto pdf = extract::extract_pdf(bytes, pdf_time_limit);
      if (pdf.failure) {
        result.note = "skipped " + path + ": " + pdf.failure->message;
        result.unreadable = true;
        break;
      }
      if (pdf.pages_read < pdf.pages)
        result.note = "indexed " + std::to_string(pdf.pages_read) + " of "
                      + std::to_string(pdf.pages) + " pages of " + path + " (time limit reached)";
      else if (pdf.text.empty())
        result.note = "no text in " + path + " (a scanned PDF without a text layer?)";
      result.title = std::move(pdf.title);
      result.published = std::move(pdf.published);
      result.text = std::move(pdf.text);
      break;
    }
    default: {
      // A .txt or .md name is no proof of text: random bytes must not reach
      // the index, the model or a terminal.
      auto text = extract::decode_to_utf8(bytes, {});
      if (extract::looks_binary(text)) {
        result.note = "skipped " + path + ": binary data, not text";
        result.unreadable = true;
        result.binary = true;
        break;
      }
      result.text = extract::clean_text(text);
    }
  }
  return result;
}

// The day of an ISO 8601 date as found in a page or PDF (`2024-05-01`,
// `2024-05-01T12:00:00Z`): "YYYY-MM-DD", or empty when `text` does not start
// with one.
std::string iso_date(std::string_view text) {
  if (text.size() < 10)
    return {};
  for (size_t i = 0; i < 10; ++i) {
    bool dash = i == 4 || i == 7;
    auto c = text[i];
    if (dash ? c != '-' : (c < '0' || c > '9'))
      return {};
  }
  auto month = (text[5] - '0') * 10 + (text[6] - '0');
  auto day = (text[8] - '0') * 10 + (text[9] - '0');
  if (month < 1 || month > 12 || day < 1 || day > 31)
    return {};
  return std::string{text.substr(0, 10)};
}

// The day (UTC) of a file's modification time, or empty.
std::string mtime_date(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return {};
  std::tm tm{};
  time_t t = st.st_mtime;
  if (gmtime_r(&t, &tm) == nullptr)
    return {};
  char buf[32];
  auto n = std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return std::string{buf, n};
}

} // namespace quarry::corpus::detail
