// Unit tests of the shared web_search behaviour: normalisation, cleaning,
// interleaving, the LLM-facing JSON and messages, and configuration.

#include "web_search_common.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

namespace web_search_common_test {

using namespace quarry::plugins::web_search_common;
using json = nlohmann::json;

namespace {

search_result res(std::string title, std::string url) {
  search_result r;
  r.title = std::move(title);
  r.url = std::move(url);
  r.snippet = "s";
  return r;
}

std::vector<std::string> titles(const std::vector<search_result>& xs) {
  std::vector<std::string> out;
  for (const auto& x : xs)
    out.push_back(x.title);
  return out;
}

} // namespace

TEST_CASE("web_search_common normalises queries as Onyx does (spec 19.12)") {
  using v = std::vector<std::string>;
  CHECK(normalize_queries("hello") == v{"hello"});
  CHECK(normalize_queries("  hello  ") == v{"hello"});
  CHECK(normalize_queries(std::string{"hello\x00world", 11}) == v{"helloworld"});
  CHECK(normalize_queries(json::array({"  a  ", "b\tb"})) == v{"a", "bb"});
  CHECK(normalize_queries(json::array({"a", nullptr, "b"})) == v{"a", "b"});
  CHECK(normalize_queries(json::array({1, "two"})) == v{"1", "two"});
  CHECK(normalize_queries(42).empty());
  CHECK(normalize_queries(json::object()).empty());
  CHECK(normalize_queries("   ").empty());
  CHECK(normalize_queries(json::array({"", " \n ", "\x7f"})).empty());
  // A bare string is one query, never one per character.
  CHECK(normalize_queries("abc") == v{"abc"});
  // A model asking for 500 searches at once gets the first ten: each is a
  // request to the (paid) backend, all run at once.
  auto many = json::array();
  for (int i = 0; i < 500; ++i)
    many.push_back("query " + std::to_string(i));
  auto capped = normalize_queries(many);
  REQUIRE(capped.size() == quarry::sdk::max_search_queries);
  CHECK(capped.front() == "query 0");
  CHECK(capped.back() == "query 9");
  // Whitespace runs fold; newlines are removed, not turned into spaces.
  CHECK(normalize_queries("a    b\nc") == v{"a bc"});
  // Duplicates (after normalisation) are dropped, first one kept.
  CHECK(normalize_queries(json::array({"x y", " x  y ", "z", "x y"})) == v{"x y", "z"});
  CHECK(normalize_queries(json::array({true})) == v{"True"});
}

TEST_CASE("web_search_common cuts long queries at a word, never inside a character") {
  // 120 words of 4 letters: 599 bytes.
  std::string words;
  for (int i = 0; i < 120; ++i)
    words += (i ? " " : "") + std::string{"word"};
  auto q = normalize_query(words);
  CHECK(q.size() <= max_query_size);
  CHECK(q.size() >= max_query_size - 5);
  CHECK(q.back() == 'd');
  CHECK(words.rfind(q, 0) == 0);
  // One long run of two-byte characters: cut on a character boundary.
  std::string umlauts;
  for (int i = 0; i < 300; ++i)
    umlauts += "\xc3\xa4";
  auto u = normalize_query(umlauts);
  CHECK(u.size() == max_query_size);
  CHECK(static_cast<unsigned char>(u[u.size() - 2]) == 0xc3);
  // Short queries are untouched.
  CHECK(normalize_query("heat pump cold climate") == "heat pump cold climate");
}

TEST_CASE("web_search_common interleaves round-robin without duplicates") {
  // [A1,A2,A3] and [B1,A1dup,B3] -> A1, B1, A2, A3, B3 (spec 19.12).
  std::vector<std::vector<search_result>> lists{
    {res("A1", "https://a/1"), res("A2", "https://a/2"), res("A3", "https://a/3")},
    {res("B1", "https://b/1"), res("A1", "https://a/1"), res("B3", "https://b/3")}};
  CHECK(titles(interleave(lists)) == std::vector<std::string>{"A1", "B1", "A2", "A3", "B3"});
  // The same title with another URL is a different result.
  std::vector<std::vector<search_result>> same_title{{res("T", "https://a/1")},
                                                     {res("T", "https://a/2")}};
  CHECK(interleave(same_title).size() == 2);
  // Uneven lists: the longer one continues alone.
  std::vector<std::vector<search_result>> uneven{
    {res("A1", "u1")}, {res("B1", "v1"), res("B2", "v2"), res("B3", "v3")}};
  CHECK(titles(interleave(uneven)) == std::vector<std::string>{"A1", "B1", "B2", "B3"});
  CHECK(interleave({}).empty());
  CHECK(interleave({{}, {}}).empty());
}

TEST_CASE("web_search_common caps the interleave at 20 results") {
  std::vector<std::vector<search_result>> lists(3);
  for (int q = 0; q < 3; ++q)
    for (int i = 0; i < 20; ++i)
      lists[static_cast<size_t>(q)].push_back(
        res("q" + std::to_string(q) + "r" + std::to_string(i),
            "https://x/" + std::to_string(q) + "/" + std::to_string(i)));
  auto merged = interleave(lists);
  REQUIRE(merged.size() == 20);
  CHECK(merged[0].title == "q0r0");
  CHECK(merged[1].title == "q1r0");
  CHECK(merged[2].title == "q2r0");
  CHECK(merged[3].title == "q0r1");
  CHECK(merged[19].title == "q1r6");
  CHECK(interleave(lists, 5).size() == 5);
}

TEST_CASE("web_search_common keeps the query string and drops tracking") {
  CHECK(clean_url("https://youtube.com/watch?v=X") == "https://youtube.com/watch?v=X");
  CHECK(clean_url("https://a.com/p?v=1#frag") == "https://a.com/p?v=1");
  CHECK(clean_url("https://a.com/p#frag") == "https://a.com/p");
  CHECK(clean_url("https://a.com/p?utm_source=x&utm_MEDIUM=y") == "https://a.com/p");
  CHECK(clean_url("https://a.com/p?id=7&utm_source=x&fbclid=abc&gclid=1&page=2")
        == "https://a.com/p?id=7&page=2");
  CHECK(clean_url("https://a.com/p?msclkid=1&q=a%20b") == "https://a.com/p?q=a%20b");
  CHECK(clean_url("https://a.com/p?") == "https://a.com/p");
  CHECK(clean_url("https://a.com/p?&&x=1&") == "https://a.com/p?x=1");
  CHECK(clean_url("https://a.com/p?utm=1") == "https://a.com/p?utm=1");
  CHECK(clean_url("https://en.wikipedia.org/wiki/%22Hello,_World!%22_program")
        == "https://en.wikipedia.org/wiki/%22Hello,_World!%22_program");
  CHECK(is_tracking_parameter("utm_campaign"));
  CHECK(is_tracking_parameter("FBCLID"));
  CHECK_FALSE(is_tracking_parameter("v"));
}

TEST_CASE("web_search_common cleans snippets of tags and entities") {
  CHECK(clean_text("A &quot;Hello, World!&quot; program is <strong>usually "
                   "simple</strong>. A language&#x27;s syntax")
        == "A \"Hello, World!\" program is usually simple. A language's syntax");
  CHECK(clean_text("x &amp;lt; y") == "x &lt; y");
  CHECK(clean_text("1 &lt; 2 &gt; 0") == "1 < 2 > 0");
  CHECK(clean_text("caf&#233; &#x20AC;5&nbsp;now")
        == "caf\xc3\xa9 \xe2\x82\xac"
           "5 now");
  CHECK(clean_text("a < b and c > d") == "a < b and c > d");
  CHECK(clean_text("AT&T &bogus; &") == "AT&T &bogus; &");
  CHECK(clean_text("  many \n\t spaces  ") == "many spaces");
  CHECK(clean_text("<p>para</p><br/>next") == "para next");
  CHECK(clean_text("x<b>y</b>z <SPAN class=\"q\">w</SPAN>") == "xyz w");
  CHECK(decode_entities("&#0;&#xD800;") == "\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(decode_entities("&#99999999;") == "\xef\xbf\xbd");
  CHECK(decode_entities("&#999999999999999;") == "&#999999999999999;");
}

TEST_CASE("web_search_common url_encode keeps unreserved characters only") {
  CHECK(url_encode("a b&c=d/é~") == "a%20b%26c%3Dd%2F%C3%A9~");
}

TEST_CASE("web_search_common make_result drops empty and cleans fields") {
  CHECK_FALSE(make_result("", "https://a", "  ", std::nullopt).has_value());
  CHECK_FALSE(make_result("t", "", "s", std::nullopt).has_value());
  auto r = make_result("<b>T</b> &amp; U", "https://a/?utm_source=z#x", "",
                       std::string{"2024-01-02"});
  REQUIRE(r.has_value());
  CHECK(r->title == "T & U");
  CHECK(r->url == "https://a/");
  CHECK(r->snippet.empty());
  CHECK(r->published == std::optional<std::string>{"2024-01-02"});
  CHECK_FALSE(make_result("t", "https://a", "s", std::string{}).value().published);
}

TEST_CASE("web_search_common renders Onyx's LLM-facing JSON") {
  auto a = res("Title A", "https://a/1");
  a.snippet = "snippet \"A\"";
  a.published = "2024-12-27T15:49:55";
  auto b = res("Title B", "https://b/1?x=1");
  b.snippet = "snippet B";
  auto text = format_results({a, b});
  CHECK(text
        == "{\n"
           "  \"results\": [\n"
           "    {\n"
           "      \"document\": 1,\n"
           "      \"title\": \"Title A\",\n"
           "      \"updated_at\": \"2024-12-27T15:49:55\",\n"
           "      \"url\": \"https://a/1\",\n"
           "      \"content\": \"snippet \\\"A\\\"\"\n"
           "    },\n"
           "    {\n"
           "      \"document\": 2,\n"
           "      \"title\": \"Title B\",\n"
           "      \"url\": \"https://b/1?x=1\",\n"
           "      \"content\": \"snippet B\"\n"
           "    }\n"
           "  ]\n"
           "}");
  CHECK(json::parse(format_results({a}, 7))["results"][0]["document"] == 7);
  // Non-ASCII stays as is (ensure_ascii=False); broken UTF-8 does not throw.
  auto c = res("caf\xc3\xa9", "https://c");
  CHECK(format_results({c}).find("caf\xc3\xa9") != std::string::npos);
  auto d = res("bad \xff", "https://d");
  CHECK_NOTHROW(format_results({d}));
  auto docs = to_documents({a, b});
  REQUIRE(docs.size() == 2);
  CHECK(docs[0].id == "https://a/1");
  CHECK(docs[0].url == "https://a/1");
  CHECK(docs[0].title == "Title A");
  CHECK(docs[0].snippet == "snippet \"A\"");
  CHECK(docs[0].published == std::optional<std::string>{"2024-12-27T15:49:55"});
  CHECK(docs[0].kind == quarry::sdk::source_kind::web);
  CHECK_FALSE(docs[1].published.has_value());
}

TEST_CASE("web_search_common LLM-facing failure messages") {
  auto msg = all_failed_message(
    {{"q1", "rate_limited (HTTP 429): slow"}, {"q2", "network: refused"}});
  CHECK(msg
        == "All web search queries failed. Query failures:\n"
           "{\n"
           "  \"q1\": \"rate_limited (HTTP 429): slow\",\n"
           "  \"q2\": \"network: refused\"\n"
           "}");
  // An error already said is not repeated.
  CHECK(all_failed_message({{"q1", "rate_limited (HTTP 429): slow"},
                            {"q2", "network: refused"},
                            {"q3", "rate_limited (HTTP 429): slow"}})
        == "All web search queries failed. Query failures:\n"
           "{\n"
           "  \"q1\": \"rate_limited (HTTP 429): slow\",\n"
           "  \"q2\": \"network: refused\",\n"
           "  \"q3\": \"the same error as for \\\"q1\\\"\"\n"
           "}");
  CHECK(no_results_message().find("no results") != std::string::npos);
  CHECK(missing_queries_message().find("{\"queries\": [\"your search query here\"]}")
        != std::string::npos);
  CHECK(empty_queries_message().find("empty") != std::string::npos);
  auto params = tool_parameters();
  CHECK(params["required"] == json::array({"queries"}));
  CHECK(params["properties"]["queries"]["type"] == "array");
  CHECK(params["properties"]["queries"]["items"]["type"] == "string");
  CHECK(tool_description().rfind("Search the web for information.", 0) == 0);
}

TEST_CASE("web_search_common extracts error messages from bodies") {
  CHECK(error_message_of(R"({"type":"ErrorResponse","error":{"id":"x","status":422,)"
                         R"("code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided )"
                         R"(subscription token is invalid."}})")
        == "The provided subscription token is invalid.");
  CHECK(error_message_of(R"({"detail":{"error":"Unauthorized: missing API key."}})")
        == "Unauthorized: missing API key.");
  CHECK(error_message_of(R"({"error":"No query"})") == "No query");
  CHECK(error_message_of(R"({"message":"Unauthorized."})") == "Unauthorized.");
  CHECK(error_message_of("<html>oops\n</html>") == "<html>oops </html>");
  CHECK(error_message_of(std::string(1000, 'x')).size() == 200);
  auto err = classify_status(429, {{"Retry-After", "3"}}, "slow down");
  CHECK(err.code == quarry::sdk::errc::rate_limited);
  CHECK(err.http_status == 429);
  CHECK(err.retry_after_ms == std::optional<int64_t>{3000});
  CHECK(err.message == "slow down");
}

TEST_CASE("web_search_common validates the common configuration") {
  auto cfg = parse_common_config(
    {{"api_key", "k"}, {"base_url", "http://h:1/"}, {"max_results", 5}, {"timeout", 2.5}}, "p",
    "https://real", true, {});
  CHECK(cfg.api_key == "k");
  CHECK(cfg.base_url == "http://h:1");
  CHECK(cfg.max_results == 5);
  CHECK(cfg.timeout == std::chrono::milliseconds{2500});
  auto dflt = parse_common_config({{"api_key", "k"}}, "p", "https://real", true, {});
  CHECK(dflt.base_url == "https://real");
  CHECK(parse_common_config({{"extra", 1}}, "p", "https://r", false, {"extra"}).api_key.empty());
  auto bad = [](json config) {
    CHECK_THROWS_AS(parse_common_config(config, "p", "https://r", true, {}), std::invalid_argument);
  };
  bad(json::object());
  bad({{"api_key", ""}});
  bad({{"api_key", 5}});
  bad({{"api_key", "k"}, {"typo", 1}});
  bad({{"api_key", "k"}, {"max_results", 0}});
  bad({{"api_key", "k"}, {"max_results", 21}});
  bad({{"api_key", "k"}, {"max_results", "5"}});
  bad({{"api_key", "k"}, {"timeout", 0}});
  // `timeout` is the plugin's own (seconds per request); Quarry's limits
  // (`limits.timeout`, `cache_ttl`, ...) never reach a plugin and are
  // refused like any key it does not know.
  bad({{"api_key", "k"}, {"timeout", "10s"}});
  bad({{"api_key", "k"}, {"cache_ttl", "5m"}});
  bad({{"api_key", "k"}, {"max_concurrency", 2}});
  bad({{"api_key", "k"}, {"base_url", "ftp://x"}});
  bad(json::array());
  try {
    parse_common_config({{"api_key", "k"}, {"tyop", 1}}, "brave", "https://r", true, {});
  } catch (const std::invalid_argument& e) {
    CHECK(std::string{e.what()}.find("tyop") != std::string::npos);
    CHECK(std::string{e.what()}.find("brave") != std::string::npos);
  }
}

TEST_CASE("web_search_common backend settings: own string options, allowed values") {
  std::string country;
  std::string depth;
  auto common = parse_backend_config(json{{"api_key", "k"}, {"country", "de"}}, "demo",
                                     "https://x.test/", true,
                                     {{"country", &country}, {"depth", &depth, "basic"}});
  CHECK(common.api_key == "k");
  CHECK(common.base_url == "https://x.test");
  CHECK(country == "de");
  CHECK(depth == "basic");
  // No configuration at all: the defaults.
  country = "stale";
  parse_backend_config(json{}, "demo", "https://x.test", false,
                       {{"country", &country}, {"depth", &depth, "basic"}});
  CHECK(country.empty());
  CHECK_THROWS_WITH_AS(parse_backend_config(json{{"api_key", "k"}, {"country", 1}}, "demo",
                                            "https://x.test", true, {{"country", &country}}),
                       "demo: 'country' must be a string", std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_backend_config(json{{"api_key", "k"}, {"county", "de"}}, "demo",
                                            "https://x.test", true, {{"country", &country}}),
                       "demo: unknown configuration key 'county'", std::invalid_argument);
  CHECK_NOTHROW(require_one_of("", {"a", "b"}, true, "bad"));
  CHECK_NOTHROW(require_one_of("b", {"a", "b"}, false, "bad"));
  CHECK_THROWS_WITH_AS(require_one_of("", {"a", "b"}, false, "bad"), "bad", std::invalid_argument);
  CHECK_THROWS_WITH_AS(require_one_of("c", {"a", "b"}, true, "bad"), "bad", std::invalid_argument);
}

TEST_CASE("web_search_common request builders: query parameters and JSON POST") {
  std::string url = "https://x.test/s?q=a";
  append_query(url, {{"lang", "en us"}, {"empty", ""}, {"x", "1&2"}});
  CHECK(url == "https://x.test/s?q=a&lang=en%20us&x=1%262");
  nlohmann::ordered_json body;
  body["q"] = "bad \xff byte";
  set_unless_empty(body, "gl", "");
  set_unless_empty(body, "hl", "en");
  auto req = json_post("https://x.test/search", {"X-Key", "secret"}, body);
  CHECK(req.method == "POST");
  CHECK(req.url == "https://x.test/search");
  REQUIRE(req.headers.size() == 3);
  CHECK(req.headers[0] == std::pair<std::string, std::string>{"X-Key", "secret"});
  CHECK(req.headers[1] == std::pair<std::string, std::string>{"Content-Type", "application/json"});
  CHECK(req.headers[2] == std::pair<std::string, std::string>{"Accept", "application/json"});
  CHECK(req.body == "{\"q\":\"bad \xEF\xBF\xBD byte\",\"hl\":\"en\"}");
}

} // namespace web_search_common_test
