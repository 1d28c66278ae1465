// PDF text extraction with poppler-cpp: per-page text, metadata and a time
// limit checked before each page.
#include "quarry/extract/pdf.hpp"

#include "quarry/sdk/text.hpp"
#include "quarry/sdk/strings.hpp"

#include <poppler-document.h>
#include <poppler-global.h>
#include <poppler-page.h>

#include <climits>
#include <ctime>
#include <exception>
#include <memory>
#include <mutex>

namespace quarry::extract {

namespace {

// poppler prints its complaints about damaged files to stderr by default.
void silent(const std::string&, void*) {
  // nop
}

void silence_poppler() {
  static std::once_flag flag;
  std::call_once(flag, [] { poppler::set_debug_error_function(&silent, nullptr); });
}

// PDF strings are converted from UTF-16 that may hold lone surrogates:
// repair whatever is not valid UTF-8.
std::string utf8(const poppler::ustring& x) {
  auto bytes = x.to_utf8();
  return sdk::repair_utf8(std::string_view{bytes.data(), bytes.size()});
}

// Normalises the text of one page: form feeds and carriage returns become
// line breaks, trailing whitespace of every line goes, runs of more than one
// blank line fold into one, and leading or trailing blank lines are dropped.
std::string clean_page(std::string_view raw) {
  std::string result;
  result.reserve(raw.size());
  std::string line;
  int blank_lines = 0;
  auto flush = [&] {
    while (!line.empty() && sdk::is_ascii_space(line.back()))
      line.pop_back();
    if (line.empty()) {
      ++blank_lines;
    } else {
      if (!result.empty())
        result += blank_lines > 0 ? "\n\n" : "\n";
      result += line;
      blank_lines = 0;
    }
    line.clear();
  };
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '\r') {
      if (i + 1 < raw.size() && raw[i + 1] == '\n')
        ++i;
      flush();
    } else if (c == '\n' || c == '\f') {
      flush();
    } else {
      line += c;
    }
  }
  flush();
  return result;
}

// Formats a time as ISO 8601 in UTC, e.g. `2024-05-01T12:00:00Z`.
std::string iso8601_utc(time_t t) {
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr)
    return {};
  char buf[32];
  auto n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string{buf, n};
}

pdf_extraction failed(std::string msg) {
  pdf_extraction result;
  result.failure = sdk::make_error(sdk::errc::invalid_response, std::move(msg));
  return result;
}

pdf_extraction extract(std::string_view bytes,
                       std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (bytes.empty())
    return failed("not a PDF: the document is empty");
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return failed("PDF too large to read (more than 2 GiB)");
  silence_poppler();
  // load_from_raw_data does not copy: `bytes` outlives the document.
  std::unique_ptr<poppler::document> doc{
    poppler::document::load_from_raw_data(bytes.data(), static_cast<int>(bytes.size()))};
  if (doc == nullptr) {
    if (bytes.substr(0, 5) != "%PDF-")
      return failed("not a PDF (no %PDF- header)");
    return failed("damaged PDF: poppler cannot read it");
  }
  if (doc->is_locked()) {
    doc->unlock("", "");
    if (doc->is_locked())
      return failed("PDF is password-protected (the empty password does "
                    "not open it)");
  }
  pdf_extraction result;
  result.title = std::string{sdk::trim(utf8(doc->info_key("Title")))};
  result.author = std::string{sdk::trim(utf8(doc->info_key("Author")))};
  auto created = doc->info_date_t("CreationDate");
  if (created != static_cast<time_t>(-1) && created != 0)
    result.published = iso8601_utc(created);
  result.pages = doc->pages();
  if (result.pages < 0)
    result.pages = 0;
  for (int i = 0; i < result.pages; ++i) {
    if (deadline && std::chrono::steady_clock::now() >= *deadline)
      break;
    std::unique_ptr<poppler::page> page{doc->create_page(i)};
    ++result.pages_read;
    if (page == nullptr)
      continue;
    // Reading order without the physical layout's column padding: shorter
    // and cleaner text for indexes and LLMs.
    auto text = clean_page(
      utf8(page->text(poppler::rectf{}, poppler::page::non_raw_non_physical_layout)));
    if (text.empty())
      continue;
    if (!result.text.empty())
      result.text += "\n\n";
    result.text += text;
  }
  return result;
}

} // namespace

pdf_extraction extract_pdf(std::string_view bytes, std::chrono::milliseconds time_limit) {
  // The clock starts before loading: the limit covers the whole call.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (time_limit.count() > 0)
    deadline = std::chrono::steady_clock::now() + time_limit;
  return extract_pdf_until(bytes, deadline);
}

pdf_extraction extract_pdf_until(std::string_view bytes,
                                 std::optional<std::chrono::steady_clock::time_point> deadline) {
  try {
    return extract(bytes, deadline);
  } catch (const std::exception& ex) {
    return failed(std::string{"cannot read the PDF: "} + ex.what());
  } catch (...) {
    return failed("cannot read the PDF: unknown error");
  }
}

} // namespace quarry::extract
