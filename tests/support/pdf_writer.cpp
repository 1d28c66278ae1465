// Writes small, valid PDF 1.4 files by hand for tests.

#include "support/pdf_writer.hpp"

#include "quarry/sdk/strings.hpp"

#include <cstdint>
#include <cstdio>
#include <string_view>

namespace quarry::test {

namespace {

// A PDF literal string `(...)` in WinAnsiEncoding: ( ) \ escaped, bytes
// outside printable ASCII as octal escapes.
std::string literal(std::string_view utf8) {
  std::string result = "(";
  for (size_t i = 0; i < utf8.size();) {
    auto [cp, length] = sdk::decode_utf8(utf8, i);
    i += length;
    if (cp > 0xFF || (cp >= 0x80 && cp < 0xA0))
      cp = '?';
    if (cp == '(' || cp == ')' || cp == '\\') {
      result += '\\';
      result += static_cast<char>(cp);
    } else if (cp < 0x20 || cp >= 0x7F) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "\\%03o", static_cast<unsigned>(cp));
      result += buf;
    } else {
      result += static_cast<char>(cp);
    }
  }
  result += ')';
  return result;
}

// A PDF text string as UTF-16BE hex with a byte-order mark: `<FEFF...>`.
std::string text_string(std::string_view utf8) {
  std::string result = "<FEFF";
  auto unit = [&](uint32_t u) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "%04X", static_cast<unsigned>(u));
    result += buf;
  };
  for (size_t i = 0; i < utf8.size();) {
    auto [cp, length] = sdk::decode_utf8(utf8, i);
    i += length;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      unit(0xD800 + (cp >> 10));
      unit(0xDC00 + (cp & 0x3FF));
    } else {
      unit(cp);
    }
  }
  result += '>';
  return result;
}

// The content stream of one page: one text object, one Tj per line.
std::string page_content(std::string_view text) {
  std::string result = "BT\n/F1 12 Tf\n14 TL\n72 720 Td\n";
  size_t start = 0;
  bool first = true;
  for (;;) {
    auto end = text.find('\n', start);
    auto line = text.substr(start,
                            end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!first)
      result += "T*\n";
    first = false;
    result += literal(line);
    result += " Tj\n";
    if (end == std::string_view::npos)
      break;
    start = end + 1;
  }
  result += "ET\n";
  return result;
}

} // namespace

std::string make_pdf(const std::vector<std::string>& pages, const std::string& title) {
  pdf_spec spec;
  spec.pages = pages;
  spec.title = title;
  return make_pdf_document(spec);
}

std::string make_pdf_document(const pdf_spec& spec) {
  auto pages = spec.pages;
  if (pages.empty())
    pages.emplace_back();
  // Objects: 1 catalog, 2 page tree, 3 font, 4 info, then a page and its
  // content stream for every page.
  std::vector<std::string> objects;
  objects.push_back("<< /Type /Catalog /Pages 2 0 R >>");
  std::string kids;
  for (size_t i = 0; i < pages.size(); ++i) {
    if (!kids.empty())
      kids += ' ';
    kids += std::to_string(5 + 2 * i) + " 0 R";
  }
  objects.push_back("<< /Type /Pages /Kids [" + kids + "] /Count " + std::to_string(pages.size())
                    + " >>");
  objects.push_back("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica "
                    "/Encoding /WinAnsiEncoding >>");
  std::string info = "<< /Producer (Quarry test PDF writer)";
  if (!spec.title.empty())
    info += " /Title " + text_string(spec.title);
  if (!spec.author.empty())
    info += " /Author " + text_string(spec.author);
  if (!spec.creation_date.empty())
    info += " /CreationDate " + literal(spec.creation_date);
  info += " >>";
  objects.push_back(std::move(info));
  for (size_t i = 0; i < pages.size(); ++i) {
    objects.push_back("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                      "/Resources << /Font << /F1 3 0 R >> >> /Contents "
                      + std::to_string(6 + 2 * i) + " 0 R >>");
    auto content = page_content(pages[i]);
    objects.push_back("<< /Length " + std::to_string(content.size()) + " >>\nstream\n" + content
                      + "endstream");
  }
  std::string out = "%PDF-1.4\n%\xE2\xE3\xCF\xD3\n";
  std::vector<size_t> offsets;
  for (size_t i = 0; i < objects.size(); ++i) {
    offsets.push_back(out.size());
    out += std::to_string(i + 1) + " 0 obj\n" + objects[i] + "\nendobj\n";
  }
  auto xref = out.size();
  out += "xref\n0 " + std::to_string(objects.size() + 1) + "\n";
  out += "0000000000 65535 f \n";
  for (auto offset : offsets) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%010zu 00000 n \n", offset);
    out += buf;
  }
  out += "trailer\n<< /Size " + std::to_string(objects.size() + 1) + " /Root 1 0 R /Info 4 0 R";
  if (spec.password_protected) {
    // /O and /U that no password produces: the empty password fails.
    std::string o(64, 'A');
    std::string u(64, 'B');
    out += " /Encrypt << /Filter /Standard /V 1 /R 2 /Length 40 /P -44 /O <" + o + "> /U <" + u
           + "> >> /ID [<00112233445566778899AABBCCDDEEFF>"
             " <00112233445566778899AABBCCDDEEFF>]";
  }
  out += " >>\nstartxref\n" + std::to_string(xref) + "\n%%EOF\n";
  return out;
}

} // namespace quarry::test
