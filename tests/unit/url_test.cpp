// Unit tests of the URL module (core/fetch url.hpp): parsing, RFC 3986
// reference resolution and hostile input.

#include "quarry/fetch/url.hpp"

#include <doctest/doctest.h>

#include <string>

namespace url_test {

using namespace quarry;

namespace {

constexpr const char* rfc_base = "http://a/b/c/d;p?q";

// The resolved text, or "error: <message>".
std::string resolved(std::string_view ref, std::string_view base = rfc_base) {
  auto r = fetch::resolve_url(base, ref);
  if (auto* u = std::get_if<fetch::url>(&r))
    return u->text;
  return "error: " + std::get<std::string>(r);
}

std::string parse_error(std::string_view text) {
  auto r = fetch::parse_url(text);
  if (auto* err = std::get_if<std::string>(&r))
    return *err;
  return {};
}

} // namespace

TEST_CASE("url resolves the normal examples of RFC 3986 section 5.4.1") {
  struct row {
    const char* ref;
    const char* want;
  };
  const row rows[] = {
    {"g", "http://a/b/c/g"},
    {"./g", "http://a/b/c/g"},
    {"g/", "http://a/b/c/g/"},
    {"/g", "http://a/g"},
    // RFC: "http://g". libcurl writes the empty path as "/", which RFC 3986
    // section 6.2.3 calls equivalent.
    {"//g", "http://g/"},
    {"?y", "http://a/b/c/d;p?y"},
    {"g?y", "http://a/b/c/g?y"},
    // libcurl 7.88 alone gives "http://a/b/c/#s"; the module keeps the base.
    {"#s", "http://a/b/c/d;p?q#s"},
    {"g#s", "http://a/b/c/g#s"},
    {"g?y#s", "http://a/b/c/g?y#s"},
    {";x", "http://a/b/c/;x"},
    {"g;x", "http://a/b/c/g;x"},
    {"g;x?y#s", "http://a/b/c/g;x?y#s"},
    // libcurl 7.88 alone gives "http://a/b/c/"; the module keeps the base.
    {"", "http://a/b/c/d;p?q"},
    {".", "http://a/b/c/"},
    {"./", "http://a/b/c/"},
    {"..", "http://a/b/"},
    {"../", "http://a/b/"},
    {"../g", "http://a/b/g"},
    {"../..", "http://a/"},
    {"../../", "http://a/"},
    {"../../g", "http://a/g"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.ref);
    CHECK(resolved(r.ref) == r.want);
  }
  // RFC: "g:h" (a URI of scheme g). libcurl parses only URLs with an
  // authority (scheme://), so a scheme without one is refused, clearly.
  CHECK(resolved("g:h") == "error: not an absolute URL (no // after g:)");
}

TEST_CASE("url resolves the abnormal examples of RFC 3986 section 5.4.2") {
  struct row {
    const char* ref;
    const char* want;
  };
  const row rows[] = {
    {"../../../g", "http://a/g"},
    {"../../../../g", "http://a/g"},
    {"/./g", "http://a/g"},
    {"/../g", "http://a/g"},
    {"g.", "http://a/b/c/g."},
    {".g", "http://a/b/c/.g"},
    {"g..", "http://a/b/c/g.."},
    {"..g", "http://a/b/c/..g"},
    {"./../g", "http://a/b/g"},
    {"./g/.", "http://a/b/c/g/"},
    {"g/./h", "http://a/b/c/g/h"},
    {"g/../h", "http://a/b/c/h"},
    {"g;x=1/./y", "http://a/b/c/g;x=1/y"},
    {"g;x=1/../y", "http://a/b/c/y"},
    {"g?y/./x", "http://a/b/c/g?y/./x"},
    {"g?y/../x", "http://a/b/c/g?y/../x"},
    {"g#s/./x", "http://a/b/c/g#s/./x"},
    {"g#s/../x", "http://a/b/c/g#s/../x"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.ref);
    CHECK(resolved(r.ref) == r.want);
  }
  // RFC: "http:g" for strict parsers ("http://a/b/c/g" for backward
  // compatibility). libcurl refuses a scheme without an authority.
  CHECK(resolved("http:g") == "error: not an absolute URL (no // after http:)");
}

TEST_CASE("url parses the parts of absolute URLs") {
  auto r = fetch::parse_url("HTTPS://User:Pw@Example.COM.:8443/a/../b%20c?x=1&y#frag");
  REQUIRE(std::holds_alternative<fetch::url>(r));
  const auto& u = std::get<fetch::url>(r);
  CHECK(u.scheme == "https");
  CHECK(u.has_userinfo);
  CHECK(u.host == "example.com");
  CHECK(u.port == "8443");
  CHECK(u.path == "/b%20c");
  CHECK(u.has_query);
  CHECK(u.query == "x=1&y");
  CHECK(u.fragment == "frag");
  CHECK(u.path_and_query() == "/b%20c?x=1&y");
  CHECK(u.origin() == "https://example.com:8443");
  CHECK(u.redacted() == "https://example.com:8443/b%20c");
  CHECK(u.without_fragment().find('#') == std::string::npos);
  CHECK(fetch::redact_url("http://u:secret@h/p?token=secret#x") == "http://h/p");
  // Default ports, IPv6 literals, file URLs, an empty query.
  auto v6 = std::get<fetch::url>(fetch::parse_url("http://[::1]/"));
  CHECK(v6.host == "::1");
  CHECK(v6.origin() == "http://[::1]:80");
  auto file = std::get<fetch::url>(fetch::parse_url("file:///tmp/a%20b.txt"));
  CHECK(file.scheme == "file");
  CHECK(file.host.empty());
  CHECK(file.path == "/tmp/a%20b.txt");
  auto bare = std::get<fetch::url>(fetch::parse_url("http://example.com?x"));
  CHECK(bare.path == "/");
  CHECK(bare.text == "http://example.com/?x");
  CHECK(fetch::is_http_url("https://example.com/"));
  CHECK_FALSE(fetch::is_http_url("ftp://example.com/"));
  CHECK_FALSE(fetch::is_http_url("not a url"));
  // Internationalised names stay in UTF-8 (libcurl converts them when it
  // connects; its punycode output does not work in 7.88).
  auto idn = std::get<fetch::url>(fetch::parse_url("http://M\xC3\xBCnchen.DE/"));
  CHECK(idn.host == "m\xC3\xBCnchen.de");
}

TEST_CASE("url refuses hostile text with clear messages") {
  CHECK(parse_error("") == "the URL is empty");
  CHECK(parse_error("http://a/" + std::string(fetch::max_url_bytes, 'x'))
        == "the URL is longer than 16384 bytes");
  CHECK(parse_error("http://a/\xFF") == "the URL is not valid UTF-8 (at byte 9)");
  CHECK(parse_error("http://a/b c") == "the URL contains a space (at byte 10)");
  CHECK(parse_error(std::string{"http://a/\0b", 11})
        == "the URL contains a control character (at byte 9)");
  CHECK(parse_error("http://a/\x7F") == "the URL contains a control character (at byte 9)");
  CHECK(parse_error(" http://a/") == "the URL contains a space (at byte 0)");
  CHECK(parse_error("example.com/a") == "not an absolute URL (no scheme)");
  CHECK(parse_error("//example.com/a") == "not an absolute URL (no scheme)");
  CHECK(parse_error("mailto:a@b") == "not an absolute URL (no // after mailto:)");
  CHECK(parse_error("http:///x") == "the URL has no host");
  CHECK(parse_error("http://") == "the URL has no host");
  CHECK(parse_error("http://?q") == "the URL has no host");
  auto port = parse_error("http://a:65536/");
  CHECK(port.find("not a valid URL (port number") == 0);
  CHECK(parse_error("http://a:80:90/").find("not a valid URL") == 0);
  CHECK(parse_error("http://a:x/").find("not a valid URL") == 0);
  CHECK(parse_error("http://[::1/").find("not a valid URL") == 0);
  CHECK(parse_error("http://a<b/").find("not a valid URL") == 0);
  // Userinfo is allowed but never shown by redacted().
  CHECK(parse_error("http://user:pw@a/").empty());
  CHECK(fetch::redact_url("http://user:pw@a b/") == "(an invalid URL)");
  // A huge reference and a bad base.
  CHECK(resolved(std::string(fetch::max_url_bytes + 1, 'g'))
        == "error: the URL is longer than 16384 bytes");
  CHECK(resolved("g", "no-base") == "error: the base URL: not an absolute URL (no scheme)");
  CHECK(resolved("g\x01") == "error: the URL contains a control character (at byte 1)");
  // A reference with its own scheme stands alone.
  CHECK(resolved("HTTPS://other.example/x/../y") == "https://other.example/y");
}

} // namespace url_test
