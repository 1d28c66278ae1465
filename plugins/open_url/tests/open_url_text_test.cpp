// Unit tests of the SSRF address policy (core/fetch) and of open_url's pure
// parts: URL normalisation, snippet matching, windows, budget and messages.

#include "open_url_text.hpp"

#include "quarry/fetch/address_policy.hpp"
#include "quarry/fetch/fetch.hpp"
#include "quarry/sdk/text.hpp"

#include <doctest/doctest.h>

#include <string>

namespace open_url_text_test {

using namespace quarry;
using namespace quarry::plugins::open_url;
using fetch::address_class;

TEST_CASE("open_url classifies addresses") {
  struct row {
    const char* ip;
    address_class want;
  };
  const row rows[] = {
    {"127.0.0.1", address_class::loopback},
    {"127.255.0.9", address_class::loopback},
    {"::1", address_class::loopback},
    {"[::1]", address_class::loopback},
    {"0.0.0.0", address_class::unspecified},
    {"::", address_class::unspecified},
    {"10.1.2.3", address_class::private_network},
    {"172.16.0.1", address_class::private_network},
    {"172.31.255.255", address_class::private_network},
    {"172.32.0.1", address_class::none},
    {"192.168.1.1", address_class::private_network},
    {"100.64.0.1", address_class::shared_cgnat},
    {"100.127.255.255", address_class::shared_cgnat},
    {"100.128.0.1", address_class::none},
    {"169.254.169.254", address_class::cloud_metadata},
    {"169.254.1.1", address_class::link_local},
    {"224.0.0.1", address_class::multicast},
    {"239.255.255.250", address_class::multicast},
    {"255.255.255.255", address_class::reserved},
    {"240.0.0.1", address_class::reserved},
    {"192.0.2.1", address_class::documentation},
    {"::ffff:127.0.0.1", address_class::loopback},
    {"::ffff:10.0.0.1", address_class::private_network},
    {"::ffff:8.8.8.8", address_class::none},
    {"64:ff9b::7f00:1", address_class::loopback},
    {"64:ff9b::a9fe:a9fe", address_class::cloud_metadata},
    {"2002:7f00:1::1", address_class::loopback},
    {"fd00::1", address_class::unique_local},
    {"fc00::1", address_class::unique_local},
    {"fd00:ec2::254", address_class::cloud_metadata},
    {"fe80::1%eth0", address_class::link_local},
    {"ff02::1", address_class::multicast},
    {"8.8.8.8", address_class::none},
    {"93.184.216.34", address_class::none},
    {"2606:4700:4700::1111", address_class::none},
    {"example.com", address_class::invalid},
    {"", address_class::invalid},
    {"1.2.3", address_class::invalid},
  };
  for (const auto& r : rows) {
    CAPTURE(r.ip);
    CHECK(fetch::classify_address(r.ip) == r.want);
  }
}

TEST_CASE("open_url reads every spelling of an IPv4 address") {
  CHECK(fetch::parse_legacy_ipv4("2130706433") == "127.0.0.1");
  CHECK(fetch::parse_legacy_ipv4("0x7f000001") == "127.0.0.1");
  CHECK(fetch::parse_legacy_ipv4("0x7F.1") == "127.0.0.1");
  CHECK(fetch::parse_legacy_ipv4("0177.0.0.1") == "127.0.0.1");
  CHECK(fetch::parse_legacy_ipv4("127.1") == "127.0.0.1");
  CHECK(fetch::parse_legacy_ipv4("10.1.257") == "10.1.1.1");
  CHECK(fetch::parse_legacy_ipv4("169.254.43518") == "169.254.169.254");
  CHECK_FALSE(fetch::parse_legacy_ipv4("example.com"));
  CHECK_FALSE(fetch::parse_legacy_ipv4("1.2.3.4.5"));
  CHECK_FALSE(fetch::parse_legacy_ipv4("256.1.1.1"));
  CHECK_FALSE(fetch::parse_legacy_ipv4("08.1.1.1"));
  CHECK_FALSE(fetch::parse_legacy_ipv4("4294967296"));
  CHECK_FALSE(fetch::parse_legacy_ipv4(""));
}

TEST_CASE("open_url refuses internal URLs before connecting") {
  auto made = fetch::address_policy::make({});
  REQUIRE(std::holds_alternative<fetch::address_policy>(made));
  const auto& policy = std::get<fetch::address_policy>(made);
  const char* refused[] = {
    "http://127.0.0.1/",
    "http://127.0.0.1:8080/admin",
    "http://[::1]/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://172.16.0.1/",
    "http://172.31.1.1/",
    "http://192.168.0.1/",
    "http://100.64.0.1/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://0.0.0.0/",
    "http://user:pw@127.0.0.1/",
    "http://127.0.0.1./",
    "HTTP://127.0.0.1/",
    "file:///etc/passwd",
    "gopher://example.com/",
    "ftp://example.com/",
    "javascript://alert(1)",
    "not a url",
    "http:///nohost",
  };
  for (auto url : refused) {
    CAPTURE(url);
    auto err = policy.check_url(url);
    REQUIRE(err);
    CHECK(err->code == sdk::errc::refused);
  }
  // Names pass here; their resolved addresses are checked on connect.
  CHECK_FALSE(policy.check_url("http://localhost/"));
  CHECK_FALSE(policy.check_url("https://example.com/a?b=1#c"));
  CHECK_FALSE(policy.check_url("http://8.8.8.8/"));
  auto err = policy.check("localhost", "127.0.0.1");
  REQUIRE(err);
  CHECK(err->message.find("blocked by SSRF protection") == 0);
  CHECK(err->message.find("loopback") != std::string::npos);
}

TEST_CASE("open_url refuses hostile URLs with clear reasons") {
  const auto policy = std::get<fetch::address_policy>(fetch::address_policy::make({}));
  struct row {
    std::string url;
    const char* reason;
  };
  const row rows[] = {
    {"http://example.com/" + std::string(20000, 'a'), "the URL is longer than 16384 bytes"},
    {"http://example.com/\x1b[31m", "the URL contains a control character (at byte 19)"},
    {"http://example.com/a b", "the URL contains a space (at byte 20)"},
    {"http://example.com/\xC3", "the URL is not valid UTF-8 (at byte 19)"},
    {"http://example.com:99999/", "not a valid URL (port number"},
    {"http://example.com:-1/", "not a valid URL (port number"},
    {"http:///etc/passwd", "the URL has no host"},
    {"ftp://example.com/", "only http and https URLs can be opened (not ftp:)"},
    {"javascript:alert(1)", "not an absolute URL (no // after javascript:)"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.url.substr(0, 40));
    auto err = policy.check_url(r.url);
    REQUIRE(err);
    CHECK(err->code == sdk::errc::refused);
    CHECK(err->message.find(r.reason) == 0);
  }
  // Userinfo and IDN names are URLs; names are checked on their addresses.
  CHECK_FALSE(policy.check_url("https://user:secret@example.com/"));
  CHECK_FALSE(policy.check_url("https://b\xC3\xBC"
                               "cher.example/"));
  CHECK(policy.check_url("http://user:secret@[::1]:8080/"));
  // Duplicates differ only in case, dot segments, an empty path or the
  // fragment; credentials never reach the key.
  CHECK(url_key("HTTPS://Example.COM/a/../b?q=1#frag") == "https://example.com/b?q=1");
  CHECK(url_key("https://example.com") == "https://example.com");
  CHECK(url_key("https://example.com/") == "https://example.com/");
  CHECK(url_key("https://Example.com?q#f") == "https://example.com?q");
  CHECK(url_key("https://u:pw@example.com:8443/x") == "https://example.com:8443/x");
  CHECK(url_key("corpus:12#part") == "corpus:12");
  auto list = normalize_urls(
    {{"urls", {"https://Example.com/a#x", "https://example.com/a", "https://example.com/./a"}}});
  REQUIRE(list);
  CHECK(list->urls == std::vector<std::string>{"https://Example.com/a#x"});
}

TEST_CASE("open_url allow-lists addresses, ranges and host names") {
  auto made = fetch::address_policy::make(
    {"127.0.0.1", "10.0.0.0/8", "fd00::/8", "Intranet.Example"});
  REQUIRE(std::holds_alternative<fetch::address_policy>(made));
  const auto& policy = std::get<fetch::address_policy>(made);
  CHECK_FALSE(policy.check("x", "127.0.0.1"));
  CHECK(policy.check("x", "127.0.0.2"));
  CHECK_FALSE(policy.check("x", "10.200.1.1"));
  CHECK(policy.check("x", "11.0.0.1") == std::nullopt); // public anyway
  CHECK(policy.check("x", "192.168.1.1"));
  CHECK_FALSE(policy.check("x", "fd12::1"));
  CHECK_FALSE(policy.check("intranet.example", "192.168.1.1"));
  CHECK(policy.check("other.example", "192.168.1.1"));
  CHECK_FALSE(policy.check_url("http://127.0.0.1:9/"));
  CHECK(policy.check_url("http://127.0.0.2:9/"));
  CHECK(policy.check_url("http://169.254.169.254/"));
  for (auto bad : {"", "10.0.0.0/33", "not a host!", "1.2.3.4/x", "a/b"}) {
    CAPTURE(bad);
    CHECK(std::holds_alternative<std::string>(fetch::address_policy::make({bad})));
  }
}

TEST_CASE("open_url parses its fetch options") {
  auto ok = fetch::parse_fetch_options({{"allow", {"127.0.0.1"}},
                                        {"connect_timeout", 2},
                                        {"stall_timeout", "500ms"},
                                        {"call_timeout", "1m30s"},
                                        {"max_redirects", 3},
                                        {"max_html_size", "1MiB"},
                                        {"max_pdf_size", 4096},
                                        {"something_else", true}});
  REQUIRE(std::holds_alternative<fetch::fetch_options>(ok));
  const auto& o = std::get<fetch::fetch_options>(ok);
  CHECK(o.allow == std::vector<std::string>{"127.0.0.1"});
  CHECK(o.connect_timeout.count() == 2000);
  CHECK(o.stall_timeout.count() == 500);
  CHECK(o.call_timeout.count() == 90000);
  CHECK(o.max_redirects == 3);
  CHECK(o.max_html_bytes == 1024 * 1024);
  CHECK(o.max_pdf_bytes == 4096);
  auto defaults = std::get<fetch::fetch_options>(
    fetch::parse_fetch_options(nlohmann::json::object()));
  CHECK(defaults.connect_timeout.count() == 5000);
  CHECK(defaults.stall_timeout.count() == 15000);
  CHECK(defaults.call_timeout.count() == 120000);
  CHECK(defaults.max_redirects == 10);
  CHECK(defaults.max_html_bytes == 20 * 1024 * 1024);
  CHECK(defaults.max_pdf_bytes == 50 * 1024 * 1024);
  for (auto bad :
       {nlohmann::json{{"allow", "127.0.0.1"}}, nlohmann::json{{"allow", {"bad entry!"}}},
        nlohmann::json{{"connect_timeout", -1}}, nlohmann::json{{"stall_timeout", "soon"}},
        nlohmann::json{{"max_redirects", 99}}, nlohmann::json{{"max_html_size", "12 parsecs"}},
        nlohmann::json{{"user_agent", ""}}}) {
    CAPTURE(bad.dump());
    auto r = fetch::parse_fetch_options(bad);
    REQUIRE(std::holds_alternative<std::string>(r));
    CHECK(std::get<std::string>(r).find('\'') != std::string::npos);
  }
}

TEST_CASE("open_url detects PDFs by type, path and bytes") {
  CHECK(fetch::is_pdf("application/pdf", "https://a/b", ""));
  CHECK(fetch::is_pdf("application/x-pdf; q=1", "https://a/b", ""));
  CHECK(fetch::is_pdf("text/html", "https://a/b", "  \n%PDF-1.4\n"));
  CHECK(fetch::is_pdf("", "https://a/paper.PDF?x=1", ""));
  CHECK_FALSE(fetch::is_pdf("", "https://a/paper.pdf", "<!DOCTYPE html><html><body>landing"));
  CHECK_FALSE(fetch::is_pdf("text/html", "https://a/b", "<html>"));
  CHECK(fetch::last_path_segment("https://a/dir/My%20Paper.pdf?x=1") == "My Paper.pdf");
}

TEST_CASE("open_url normalises the urls argument") {
  using nlohmann::json;
  auto one = normalize_urls(json{{"urls", "  https://a.example/x  "}});
  REQUIRE(one);
  CHECK(one->urls == std::vector<std::string>{"https://a.example/x"});
  auto str_array = normalize_urls(
    json{{"urls", "[\"https://a.example/\", \"https://b.example/\"]"}});
  REQUIRE(str_array);
  CHECK(str_array->urls.size() == 2);
  auto dups = normalize_urls(json{{"urls",
                                   {"https://A.example/x", "", "   ", "https://a.example/x#frag",
                                    "https://a.example/x", "https://a.example/X", 42, nullptr}}});
  REQUIRE(dups);
  CHECK(dups->urls == std::vector<std::string>{"https://A.example/x", "https://a.example/X", "42"});
  json many = json::array();
  for (int i = 0; i < 13; ++i)
    many.push_back("https://e.example/" + std::to_string(i));
  auto capped = normalize_urls(json{{"urls", many}});
  REQUIRE(capped);
  CHECK(capped->urls.size() == 10);
  CHECK(capped->dropped == 3);
  CHECK(capped->urls.back() == "https://e.example/9");
  CHECK_FALSE(normalize_urls(json::object()));
  CHECK_FALSE(normalize_urls(json{{"urls", 5}}));
  CHECK_FALSE(normalize_urls(json{{"url", {"https://a"}}}));
  auto empty = normalize_urls(json{{"urls", json::array()}});
  REQUIRE(empty);
  CHECK(empty->urls.empty());
}

namespace {

// A page of numbered words: "w0 w1 w2 ..." long enough for windows.
std::string numbered_words(size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0)
      out += ' ';
    out += "w" + std::to_string(i);
  }
  return out;
}

} // namespace

TEST_CASE("open_url windows long pages around the snippet") {
  auto page = numbered_words(9000); // about 57,000 characters
  REQUIRE(count_chars(page) > 50000);
  const std::string prefix = "[...truncated] ";
  const std::string suffix = " [...truncated]";
  SUBCASE("no snippet: the start") {
    auto w = window_text(page, "");
    CHECK(w == page.substr(0, 15000) + suffix);
  }
  SUBCASE("a snippet near the start: the start") {
    auto w = window_text(page, "w3 w4 w5");
    CHECK(w == page.substr(0, 15000) + suffix);
  }
  SUBCASE("a snippet near the end: the end") {
    auto w = window_text(page, "w8997 w8998");
    CHECK(w == prefix + page.substr(page.size() - 15000));
  }
  SUBCASE("a snippet in the middle: centred") {
    auto snippet = std::string{"w4500 w4501 w4502"};
    auto w = window_text(page, snippet);
    REQUIRE(w.size() == prefix.size() + 15000 + suffix.size());
    CHECK(w.compare(0, prefix.size(), prefix) == 0);
    CHECK(w.compare(w.size() - suffix.size(), suffix.size(), suffix) == 0);
    auto body = w.substr(prefix.size(), 15000);
    auto at = body.find(snippet);
    REQUIRE(at != std::string::npos);
    auto before = at;
    auto after = 15000 - at - snippet.size();
    CHECK((before > after ? before - after : after - before) <= 1);
    auto pos = page.find(snippet);
    CHECK(page.substr(pos - before, 15000) == body);
  }
  SUBCASE("a snippet that is not there: the start") {
    auto w = window_text(page, "entirely different words nowhere");
    CHECK(w == page.substr(0, 15000) + suffix);
  }
  SUBCASE("a near-miss snippet is matched approximately") {
    auto snippet = std::string{"w6000 w6001 w6002 w6003 CHANGED w6005 w6006 "
                               "w6007 w6008 w6009"};
    auto w = window_text(page, snippet);
    CHECK(w.find("w6000 w6001 w6002 w6003 w6004 w6005") != std::string::npos);
    CHECK(w.compare(0, prefix.size(), prefix) == 0);
    CHECK(w.find("w0 w1 ") == std::string::npos);
  }
  SUBCASE("a short page is returned whole") {
    CHECK(window_text("short page", "page") == "short page");
  }
  SUBCASE("bytes that are not UTF-8 give a window of valid text") {
    // Found by the open_url fuzz target: bad lead bytes made the pieces'
    // character counts disagree with the whole's.
    std::string bad = "\x86'" + std::string(80, '\xf0') + "?\xf0\xfd";
    auto w = window_text(bad, std::string(20, '\xf0'), 64);
    CHECK(sdk::is_valid_utf8(w));
    CHECK(count_chars(w) <= 83 + 30);
  }
}

TEST_CASE("open_url matches snippets across punctuation, case and quotes") {
  std::string content = "Intro.\n\nThe \xE2\x80\x9CQuick\xE2\x80\x9D brown "
                        "fox\xE2\x80\x94jumped over the lazy dog's back. End.";
  auto span = find_snippet(content, "the &quot;quick&quot; BROWN fox jumped");
  REQUIRE(span);
  CHECK(content.substr(span->first, span->second - span->first)
        == "The \xE2\x80\x9CQuick\xE2\x80\x9D brown fox\xE2\x80\x94jumped");
  auto apos = find_snippet(content, "lazy dog\xE2\x80\x99s");
  REQUIRE(apos);
  CHECK(content.substr(apos->first, apos->second - apos->first) == "lazy dog's");
  CHECK_FALSE(find_snippet(content, "   ...   "));
  CHECK_FALSE(find_snippet("", "x"));
}

TEST_CASE("open_url counts characters, not bytes") {
  std::string text = "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC"; // "été €"
  CHECK(count_chars(text) == 5);
  CHECK(cut_chars(text, 2) == "\xC3\xA9t");
  CHECK(cut_chars(text, 99) == text);
}

TEST_CASE("open_url keeps to the character budget") {
  std::vector<section> secs;
  for (int i = 0; i < 4; ++i)
    secs.push_back({"T" + std::to_string(i), "https://e.example/" + std::to_string(i),
                    i == 0 ? "2024-05-01" : "", std::string(400, 'a' + i), ""});
  // Budget 1,000: doc 1 takes 1+2+10+19+400 = 432 characters (number, title,
  // date, URL, content); doc 2 takes 1+2+19+400 = 422 (total 854); doc 3
  // would have 1000-854-22 = 124 < 200 left: dropped with doc 4.
  auto [text, included] = format_sections(secs, {}, "", 1000);
  CHECK(included == 2);
  auto json = nlohmann::json::parse(text);
  REQUIRE(json["results"].size() == 2);
  CHECK(json["results"][0]["document"] == 1);
  CHECK(json["results"][0]["updated_at"] == "2024-05-01");
  CHECK_FALSE(json["results"][1].contains("updated_at"));
  CHECK(json["results"][1]["content"].get<std::string>().size() == 400);
  // Budget 1,100: doc 3 gets the 1100-854-22 = 224 characters left.
  auto [text2, included2] = format_sections(secs, {}, "", 1100);
  CHECK(included2 == 3);
  auto json2 = nlohmann::json::parse(text2);
  CHECK(json2["results"][2]["content"].get<std::string>() == std::string(224, 'c'));
  CHECK_FALSE(json2.contains("failed"));
  auto [text3, _] = format_sections(secs, {{"https://x", "upstream returned HTTP 404"}}, "a note",
                                    150000, 5);
  auto json3 = nlohmann::json::parse(text3);
  CHECK(json3["results"][0]["document"] == 5);
  CHECK(json3["failed"][0]["reason"] == "upstream returned HTTP 404");
  CHECK(json3["note"] == "a note");
  CHECK(text3.find("\n  \"results\"") != std::string::npos); // 2-space indent
  // A note (how the page was read) is shown before the content and counts:
  // doc 3 has 24 characters fewer.
  secs[2].note = "encoding guessed: Big5 x";
  auto [noted, noted_count] = format_sections(secs, {}, "", 1100);
  CHECK(noted_count == 3);
  auto noted_json = nlohmann::json::parse(noted);
  CHECK(noted_json["results"][2]["note"] == "encoding guessed: Big5 x");
  CHECK(noted_json["results"][2]["content"].get<std::string>() == std::string(200, 'c'));
  CHECK_FALSE(noted_json["results"][1].contains("note"));
}

TEST_CASE("open_url words its failure message like Onyx") {
  CHECK(failure_message({}, {}) == "Failed to fetch content from the requested resources.");
  CHECK(failure_message({}, {{"https://b", "upstream returned HTTP 404"},
                             {"https://a", ""},
                             {"https://b", "second reason"}})
        == "Failed to fetch content from URLs https://a, https://b "
           "(upstream returned HTTP 404)");
  CHECK(failure_message({"corpus:9", "corpus:2", "corpus:9"},
                        {{"https://a", "network error while fetching the URL"}})
        == "Failed to fetch content from documents corpus:2, corpus:9 and "
           "URLs https://a (network error while fetching the URL)");
  // Spec 19.13: a blank URL entry is left out.
  CHECK(failure_message({"doc-1", "doc-2"},
                        {{"", "x"}, {"https://x.com/", "upstream returned HTTP 500"}})
        == "Failed to fetch content from documents doc-1, doc-2 and URLs "
           "https://x.com/ (upstream returned HTTP 500)");
  CHECK(missing_urls_message().find("{\"urls\": [\"https://example.com\"]}") != std::string::npos);
}

} // namespace open_url_text_test
