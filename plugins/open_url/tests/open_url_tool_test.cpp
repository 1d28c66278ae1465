// Tests of the open_url tool against real HTTP servers on 127.0.0.1: the SSRF
// table, redirects, size caps, slow servers, content types, charsets, PDFs,
// Onyx's window and messages, indexed documents, cancellation.

#include "open_url_tool.hpp"

#include "quarry/corpus/index.hpp"
#include "quarry/host/plugin_registry.hpp"
#include "quarry/host/services.hpp"

#include "support/http_server.hpp"
#include "support/pdf_writer.hpp"
#include "support/process.hpp"
#include "support/run_tool.hpp"
#include "support/test_host.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>

namespace open_url_tool_test {

using namespace quarry;
using namespace quarry::plugins::open_url;
using nlohmann::json;
using test::response_plan;

using test::run_tool;

namespace {

std::unique_ptr<open_url_tool> make_tool(test::test_host& host, json config = json::object()) {
  if (!config.contains("allow"))
    config["allow"] = {"127.0.0.1"};
  return std::make_unique<open_url_tool>(host, parse_config(config, ""));
}

// An article long enough to pass the insufficient-content rule.
std::string article_html(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html><html lang=\"en\"><head><title>" + title
         + "</title></head><body><nav><a href=\"/\">Home</a> <a "
           "href=\"/about\">About</a></nav><article><h1>"
         + title + "</h1><p>" + body
         + "</p><p>Heat pumps move heat from a cold place to a warm one "
           "using a refrigerant cycle, which is why they can deliver more "
           "heat than the electricity they use.</p></article><footer>"
           "Copyright footer text</footer></body></html>";
}

json results_of(const sdk::tool_result& r) {
  auto parsed = json::parse(r.llm_text, nullptr, false);
  REQUIRE_FALSE(parsed.is_discarded());
  return parsed;
}

} // namespace

TEST_CASE("open_url refuses every SSRF attempt") {
  test::http_server server;
  server.fallback([](const test::request&) {
    return response_plan::text(200, article_html("Secret", "internal data"), "text/html");
  });
  test::test_host host;
  // No allow-list at all: the test server itself is internal.
  auto tool = std::make_unique<open_url_tool>(host, parse_config({}, ""));
  auto port = std::to_string(server.port());
  const std::vector<std::string> attempts = {
    "http://127.0.0.1:" + port + "/",
    "http://localhost:" + port + "/",
    "http://[::1]:" + port + "/",
    "http://0x7f000001:" + port + "/",
    "http://2130706433:" + port + "/",
    "http://0177.0.0.1:" + port + "/",
    "http://127.1:" + port + "/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1:" + port + "/",
    "http://172.16.0.1:" + port + "/",
    "http://192.168.1.1:" + port + "/",
    "http://100.64.0.1:" + port + "/",
    "http://[::ffff:127.0.0.1]:" + port + "/",
    "http://[fd00::1]:" + port + "/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:" + port + "/_GET",
  };
  for (const auto& url : attempts) {
    CAPTURE(url);
    auto r = run_tool(*tool, {{"urls", {url}}});
    REQUIRE(r.failure);
    CHECK(r.documents.empty());
    CHECK(r.llm_text.find("Failed to fetch content from URLs " + url) == 0);
    auto blocked = r.llm_text.find("blocked by SSRF protection") != std::string::npos;
    auto scheme = r.llm_text.find("only http and https") != std::string::npos
                  || r.llm_text.find("file URLs can only open documents of the "
                                     "local corpus")
                       != std::string::npos;
    CHECK((blocked || scheme));
    CHECK(r.llm_text.find("internal data") == std::string::npos);
  }
  CHECK(server.requests_served() == 0);
}

TEST_CASE("open_url refuses a redirect from an allowed server to a refused "
          "address") {
  test::http_server server;
  auto port = std::to_string(server.port());
  server.route("GET", "/page", [](const test::request&) {
    return response_plan::text(200, article_html("Page", "reachable"), "text/html");
  });
  server.route("GET", "/to-loopback", [port](const test::request&) {
    return response_plan::redirect(302, "http://127.0.0.2:" + port + "/page");
  });
  server.route("GET", "/to-metadata", [](const test::request&) {
    return response_plan::redirect(301, "http://169.254.169.254/latest/");
  });
  server.route("GET", "/to-decimal", [port](const test::request&) {
    return response_plan::redirect(307, "http://2130706434:" + port + "/page");
  });
  server.route("GET", "/to-file", [](const test::request&) {
    return response_plan::redirect(302, "file:///etc/passwd");
  });
  server.route("GET", "/to-private", [](const test::request&) {
    return response_plan::redirect(308, "http://192.168.0.1/");
  });
  test::test_host host;
  auto tool = make_tool(host); // allows 127.0.0.1 only
  for (auto path : {"/to-loopback", "/to-metadata", "/to-decimal", "/to-file", "/to-private"}) {
    CAPTURE(path);
    auto r = run_tool(*tool, {{"urls", {server.url(path)}}});
    REQUIRE(r.failure);
    CHECK(r.failure->code == sdk::errc::refused);
    CHECK(r.llm_text.find("reachable") == std::string::npos);
  }
  // The allowed page itself is readable, also through an allowed redirect.
  server.route("GET", "/to-page",
               [](const test::request&) { return response_plan::redirect(302, "/page"); });
  auto ok = run_tool(*tool, {{"urls", {server.url("/to-page")}}});
  REQUIRE_FALSE(ok.failure);
  CHECK(ok.llm_text.find("reachable") != std::string::npos);
}

TEST_CASE("open_url reads a page, keeps the article and drops the rest") {
  test::http_server server;
  server.route("GET", "/article", [](const test::request& req) {
    CHECK(req.header("user-agent").value_or("").find("Quarry") != std::string::npos);
    return response_plan::text(200,
                               article_html("Heat pumps explained", "A heat pump is a machine."),
                               "text/html; charset=utf-8");
  });
  test::test_host host;
  auto tool = make_tool(host);
  auto r = run_tool(*tool, {{"urls", {server.url("/article")}}});
  REQUIRE_FALSE(r.failure);
  auto j = results_of(r);
  REQUIRE(j["results"].size() == 1);
  const auto& doc = j["results"][0];
  CHECK(doc["document"] == 1);
  CHECK(doc["title"] == "Heat pumps explained");
  CHECK(doc["url"] == server.url("/article"));
  auto content = doc["content"].get<std::string>();
  CHECK(content.find("A heat pump is a machine.") != std::string::npos);
  CHECK(content.find("Copyright footer") == std::string::npos);
  CHECK(content.find("About") == std::string::npos);
  REQUIRE(r.documents.size() == 1);
  CHECK(r.documents[0].url == server.url("/article"));
  CHECK(r.documents[0].content.find("refrigerant cycle") != std::string::npos);
  CHECK(r.documents[0].kind == sdk::source_kind::web);
}

TEST_CASE("open_url keeps the pages it read under the host's limits and clock") {
  test::http_server server;
  std::atomic<int> hits{0};
  server.route("GET", "/article", [&hits](const test::request&) {
    ++hits;
    return response_plan::text(200, article_html("Cached", "A page read once."),
                               "text/html; charset=utf-8");
  });
  test::test_host host;
  auto tool = make_tool(host);
  CHECK(tool->own_cache(std::chrono::minutes{1}, 8));
  auto url = server.url("/article");
  REQUIRE_FALSE(run_tool(*tool, {{"urls", {url}}}).failure);
  auto again = run_tool(*tool, {{"urls", {url}}});
  REQUIRE_FALSE(again.failure);
  CHECK(hits.load() == 1);
  REQUIRE(again.documents.size() == 1);
  CHECK(again.documents[0].content.find("A page read once.") != std::string::npos);
  // Past the minute on the host's clock, the page is fetched again.
  host.advance_steady(std::chrono::seconds{61});
  REQUIRE_FALSE(run_tool(*tool, {{"urls", {url}}}).failure);
  CHECK(hits.load() == 2);
  // Caching off: every call fetches.
  CHECK(tool->own_cache(std::chrono::milliseconds{0}, 8));
  run_tool(*tool, {{"urls", {url}}});
  run_tool(*tool, {{"urls", {url}}});
  CHECK(hits.load() == 4);
}

TEST_CASE("open_url follows redirects up to the limit") {
  test::http_server server;
  server.fallback([](const test::request& req) {
    auto n = req.param_int("n", 0);
    if (n > 0)
      return response_plan::redirect(302, "/hop?n=" + std::to_string(n - 1));
    return response_plan::text(200, article_html("Landed", "after the hops"), "text/html");
  });
  test::test_host host;
  auto tool = make_tool(host);
  auto ten = run_tool(*tool, {{"urls", {server.url("/hop?n=10")}}});
  REQUIRE_FALSE(ten.failure);
  CHECK(ten.llm_text.find("after the hops") != std::string::npos);
  auto eleven = run_tool(*tool, {{"urls", {server.url("/hop?n=11")}}});
  REQUIRE(eleven.failure);
  CHECK(eleven.failure->code == sdk::errc::too_many_redirects);
  CHECK(eleven.llm_text.find("too many redirects (more than 10)") != std::string::npos);
}

TEST_CASE("open_url caps HTML and PDF sizes") {
  test::http_server server;
  auto big_html = article_html("Big", std::string(8000, 'x'));
  server.route("GET", "/big.html", [big_html](const test::request&) {
    return response_plan::text(200, big_html, "text/html");
  });
  server.route("GET", "/big-chunked.html", [big_html](const test::request&) {
    return response_plan::text(200, big_html, "text/html").chunked();
  });
  auto pdf = test::make_pdf({std::string(3000, 'p'), "second page"}, "Big PDF");
  server.route("GET", "/doc.pdf", [pdf](const test::request&) {
    return response_plan::text(200, pdf, "application/pdf");
  });
  test::test_host host;
  auto tool = make_tool(host, {{"max_html_size", "4KiB"},
                               {"max_pdf_size", static_cast<int64_t>(pdf.size() - 1)}});
  for (auto path : {"/big.html", "/big-chunked.html"}) {
    CAPTURE(path);
    auto r = run_tool(*tool, {{"urls", {server.url(path)}}});
    REQUIRE(r.failure);
    CHECK(r.failure->code == sdk::errc::too_large);
    CHECK(r.llm_text.find("HTML response exceeded the configured maximum "
                          "size (4 KiB)")
          != std::string::npos);
  }
  auto p = run_tool(*tool, {{"urls", {server.url("/doc.pdf")}}});
  REQUIRE(p.failure);
  CHECK(p.llm_text.find("PDF response exceeded the configured maximum size") != std::string::npos);
  // The same PDF fits when the limit allows it (and the HTML limit does not
  // apply to PDFs).
  auto roomy = make_tool(host, {{"max_html_size", "4KiB"}, {"max_pdf_size", "1MiB"}});
  auto ok = run_tool(*roomy, {{"urls", {server.url("/doc.pdf")}}});
  REQUIRE_FALSE(ok.failure);
  CHECK(results_of(ok)["results"][0]["title"] == "Big PDF");
  CHECK(ok.llm_text.find("second page") != std::string::npos);
}

TEST_CASE("open_url gives up on slow servers") {
  test::http_server server;
  server.route("GET", "/stall", [](const test::request&) {
    return response_plan{200}
      .header("Content-Type", "text/html")
      .header("Content-Length", "5000")
      .send("<html><body><p>first bytes")
      .stall();
  });
  server.route("GET", "/slow", [](const test::request&) {
    return response_plan{200}
      .header("Content-Type", "text/html")
      .delay(std::chrono::seconds{30})
      .send(article_html("Slow", "late"));
  });
  test::test_host host;
  auto tool = make_tool(host, {{"stall_timeout", "300ms"}, {"call_timeout", "1500ms"}});
  auto stalled = run_tool(*tool, {{"urls", {server.url("/stall")}}});
  REQUIRE(stalled.failure);
  CHECK(stalled.llm_text.find("no data received for 300 ms") != std::string::npos);
  // Nothing at all for 30 s: the stall limit fires first...
  auto quiet = run_tool(*tool, {{"urls", {server.url("/slow")}}});
  REQUIRE(quiet.failure);
  CHECK(quiet.failure->code == sdk::errc::stall);
  // ... and with a generous stall limit, the call's own time limit does.
  auto patient = make_tool(host, {{"stall_timeout", "20s"}, {"call_timeout", "800ms"}});
  auto slow = run_tool(*patient, {{"urls", {server.url("/slow")}}});
  REQUIRE(slow.failure);
  CHECK(slow.failure->code == sdk::errc::timeout);
  CHECK(slow.llm_text.find("timed out") != std::string::npos);
}

TEST_CASE("open_url reads wrong and missing content types by the bytes") {
  test::http_server server;
  auto pdf = test::make_pdf({"Quarterly figures of the heat pump market in "
                             "Europe rose by a third."},
                            "Market report");
  server.route("GET", "/pdf-as-html",
               [pdf](const test::request&) { return response_plan::text(200, pdf, "text/html"); });
  server.route("GET", "/download", [pdf](const test::request&) {
    return response_plan::text(200, pdf, "application/octet-stream");
  });
  server.route("GET", "/html-as-binary", [](const test::request&) {
    return response_plan::text(200, article_html("Mislabelled", "still a page"),
                               "application/octet-stream");
  });
  server.route("GET", "/no-type", [](const test::request&) {
    return response_plan{200}.send(article_html("Untyped", "no header"));
  });
  server.route("GET", "/image.png", [](const test::request&) {
    return response_plan::text(200, std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16), "image/png");
  });
  server.route("GET", "/notes.txt", [](const test::request&) {
    return response_plan::text(200, "Plain notes about heat pumps: the "
                                    "coefficient of performance is often "
                                    "above three in mild climates.\n");
  });
  server.route("GET", "/data.json", [](const test::request&) {
    return response_plan::json(200, "{\"units\": 1200, \"note\": \"installed "
                                    "heat pumps in the sample region\"}");
  });
  test::test_host host;
  auto tool = make_tool(host);
  auto read = [&](const char* path) {
    auto r = run_tool(*tool, {{"urls", {server.url(path)}}});
    CAPTURE(path);
    CAPTURE(r.llm_text);
    REQUIRE_FALSE(r.failure);
    return results_of(r)["results"][0];
  };
  CHECK(read("/pdf-as-html")["content"].get<std::string>().find("rose by a third")
        != std::string::npos);
  CHECK(read("/download")["title"] == "Market report");
  CHECK(read("/html-as-binary")["content"].get<std::string>().find("still a page")
        != std::string::npos);
  CHECK(read("/no-type")["title"] == "Untyped");
  CHECK(read("/notes.txt")["content"].get<std::string>().find("coefficient") != std::string::npos);
  CHECK(read("/data.json")["content"].get<std::string>().find("\"units\": 1200")
        != std::string::npos);
  auto png = run_tool(*tool, {{"urls", {server.url("/image.png")}}});
  REQUIRE(png.failure);
  CHECK(png.llm_text.find("not a web page, PDF or text (image/png)") != std::string::npos);
}

TEST_CASE("open_url decodes charsets to UTF-8") {
  test::http_server server;
  // "café crème" in windows-1252 / ISO-8859-1.
  auto latin = article_html("Caf\xE9", "Un caf\xE9 cr\xE8me co\xFBte deux euros.");
  server.route("GET", "/header", [latin](const test::request&) {
    return response_plan::text(200, latin, "text/html; charset=ISO-8859-1");
  });
  auto with_meta = latin;
  with_meta.replace(with_meta.find("<head>"), 6, "<head><meta charset=\"windows-1252\">");
  server.route("GET", "/meta", [with_meta](const test::request&) {
    return response_plan::text(200, with_meta, "text/html");
  });
  test::test_host host;
  auto tool = make_tool(host);
  for (auto path : {"/header", "/meta"}) {
    CAPTURE(path);
    auto r = run_tool(*tool, {{"urls", {server.url(path)}}});
    REQUIRE_FALSE(r.failure);
    auto doc = results_of(r)["results"][0];
    CHECK(doc["title"] == "Caf\xC3\xA9");
    CHECK(
      doc["content"].get<std::string>().find("Un caf\xC3\xA9 cr\xC3\xA8me co\xC3\xBBte deux euros.")
      != std::string::npos);
  }
}

TEST_CASE("open_url reports upstream statuses and thin pages like Onyx") {
  test::http_server server;
  server.route("GET", "/missing",
               [](const test::request&) { return response_plan::text(404, "not here"); });
  server.route("GET", "/private",
               [](const test::request&) { return response_plan::text(403, "forbidden"); });
  server.route("GET", "/challenge", [](const test::request&) {
    return response_plan::text(503, "<html>Just a moment...</html>", "text/html")
      .header("cf-ray", "8a1b2c3d4e5f-FRA")
      .header("Server", "cloudflare");
  });
  server.route("GET", "/loading", [](const test::request&) {
    return response_plan::text(200,
                               "<html><head><title></title></head><body>"
                               "<div id=app>Loading...</div></body></html>",
                               "text/html");
  });
  server.route("GET", "/ok", [](const test::request&) {
    return response_plan::text(200, article_html("Fine", "a fine page"), "text/html");
  });
  test::test_host host;
  auto tool = make_tool(host);
  auto r = run_tool(*tool, {{"urls",
                             {server.url("/missing"), server.url("/private"),
                              server.url("/challenge"), server.url("/loading")}}});
  REQUIRE(r.failure);
  CHECK(r.llm_text.find("Failed to fetch content from URLs ") == 0);
  CHECK(r.llm_text.find(server.url("/missing") + " (upstream returned HTTP 404)")
        != std::string::npos);
  CHECK(r.llm_text.find(server.url("/private") + " (upstream returned HTTP 403 \xE2\x80\x94")
        != std::string::npos);
  CHECK(r.llm_text.find("Cloudflare bot challenge") != std::string::npos);
  CHECK(
    r.llm_text.find(server.url("/loading") + " (response could not be parsed into readable text)")
    != std::string::npos);
  // With one page readable, the answer is that page plus the failures.
  auto mixed = run_tool(*tool, {{"urls", {server.url("/missing"), server.url("/ok")}}});
  REQUIRE_FALSE(mixed.failure);
  auto j = results_of(mixed);
  REQUIRE(j["results"].size() == 1);
  CHECK(j["results"][0]["document"] == 1);
  CHECK(j["results"][0]["title"] == "Fine");
  CHECK(j["failed"][0]["url"] == server.url("/missing"));
  CHECK(mixed.documents.size() == 1);
}

TEST_CASE("open_url windows long pages on the search snippet") {
  test::http_server server;
  std::string body;
  for (int i = 0; i < 4000; ++i)
    body += "Sentence number " + std::to_string(i) + " of the long report. ";
  server.route("GET", "/long.txt",
               [body](const test::request&) { return response_plan::text(200, body); });
  test::test_host host;
  auto tool = make_tool(host);
  auto url = server.url("/long.txt");
  auto r = run_tool(*tool, {{"urls", {url}},
                            {"_quarry",
                             {{"snippets",
                               {{url, "Sentence number 2000 of the long "
                                      "report."}}}}}});
  REQUIRE_FALSE(r.failure);
  auto content = results_of(r)["results"][0]["content"].get<std::string>();
  CHECK(content.rfind("[...truncated] ", 0) == 0);
  CHECK(content.size() == 15000 + 15 + 15);
  CHECK(content.find("Sentence number 2000 of") != std::string::npos);
  CHECK(content.find("Sentence number 10 of") == std::string::npos);
  // The documents keep the whole text.
  REQUIRE(r.documents.size() == 1);
  CHECK(r.documents[0].content.size() == body.size());
  // Without a snippet: the start.
  auto plain = run_tool(*tool, {{"urls", {url}}});
  auto start = results_of(plain)["results"][0]["content"].get<std::string>();
  CHECK(start.rfind("Sentence number 0 of", 0) == 0);
}

TEST_CASE("open_url opens at most 10 URLs, each once") {
  test::http_server server;
  std::atomic<int> hits{0};
  server.fallback([&hits](const test::request& req) {
    ++hits;
    return response_plan::text(200, article_html("Page " + req.path, "content of " + req.path),
                               "text/html");
  });
  test::test_host host;
  auto tool = make_tool(host);
  json urls = json::array();
  urls.push_back(server.url("/p0"));
  urls.push_back(server.url("/p0#section"));
  urls.push_back(server.url("/p0"));
  for (int i = 1; i < 12; ++i)
    urls.push_back(server.url("/p" + std::to_string(i)));
  auto r = run_tool(*tool, {{"urls", urls}});
  REQUIRE_FALSE(r.failure);
  auto j = results_of(r);
  CHECK(j["results"].size() == 10);
  CHECK(hits.load() == 10);
  CHECK(j["note"].get<std::string>().find("first 10 of 12 URLs") != std::string::npos);
  CHECK(j["note"].get<std::string>().find("the other 2 were not tried") != std::string::npos);
  CHECK(j["results"][9]["title"] == "Page /p9");
  auto none = run_tool(*tool, {{"urls", json::array()}});
  REQUIRE(none.failure);
  CHECK(none.llm_text == missing_urls_message());
  auto missing = run_tool(*tool, {{"queries", {"x"}}});
  REQUIRE(missing.failure);
  CHECK(missing.failure->code == sdk::errc::bad_request);
}

TEST_CASE("open_url opens documents of the local corpus by id") {
  test::temp_dir tmp;
  tmp.write("docs/heat.md", "# Heat pumps\n\nA heat pump moves heat with a "
                            "refrigerant cycle and a compressor.\n");
  auto db = tmp.file("corpus.db");
  {
    auto opened = corpus::corpus_index::open(db);
    REQUIRE(opened.index);
    auto up = opened.index->update({tmp.file("docs")});
    REQUIRE_FALSE(up.failure);
  }
  test::test_host host;
  auto tool = make_tool(host, {{"corpus_db", db}});
  auto r = run_tool(*tool, {{"urls", {"corpus:1", "corpus:999"}}});
  REQUIRE_FALSE(r.failure);
  auto j = results_of(r);
  REQUIRE(j["results"].size() == 1);
  CHECK(j["results"][0]["title"] == "Heat pumps");
  CHECK(j["results"][0]["content"].get<std::string>().find("refrigerant cycle")
        != std::string::npos);
  CHECK(j["results"][0]["url"].get<std::string>().rfind("file://", 0) == 0);
  CHECK(j["failed"][0]["url"] == "corpus:999");
  REQUIRE(r.documents.size() == 1);
  CHECK(r.documents[0].id == "corpus:1");
  CHECK(r.documents[0].kind == sdk::source_kind::internal);
  // An indexed file opens by its file:// URL (as internal_search shows it)
  // under the same document id; other files stay closed.
  auto file_url = j["results"][0]["url"].get<std::string>();
  auto by_url = run_tool(*tool, {{"urls", {file_url}}});
  REQUIRE_FALSE(by_url.failure);
  REQUIRE(by_url.documents.size() == 1);
  CHECK(by_url.documents[0].id == "corpus:1");
  CHECK(by_url.documents[0].content.find("compressor") != std::string::npos);
  tmp.write("docs/secret.txt", "not indexed, must stay closed to open_url\n");
  for (auto closed :
       {std::string{"file://"} + tmp.file("docs/secret.txt"), std::string{"file:///etc/passwd"},
        std::string{"file://localhost/etc/passwd"}, file_url + "%2"}) {
    CAPTURE(closed);
    auto refused = run_tool(*tool, {{"urls", {closed}}});
    REQUIRE(refused.failure);
    CHECK(refused.llm_text.find("not indexed") == std::string::npos);
    CHECK(refused.llm_text.find("local corpus") != std::string::npos);
  }
  auto gone = run_tool(*tool, {{"urls", {"corpus:999"}}});
  REQUIRE(gone.failure);
  CHECK(gone.llm_text == "Failed to fetch content from documents corpus:999");
  auto no_db = make_tool(host, {{"corpus_db", tmp.file("absent.db")}});
  auto none = run_tool(*no_db, {{"urls", {"corpus:1"}}});
  REQUIRE(none.failure);
  CHECK_FALSE(std::filesystem::exists(tmp.file("absent.db")));
}

TEST_CASE("open_url cancels a running call once") {
  test::http_server server;
  server.route("GET", "/stall", [](const test::request&) { return response_plan{200}.stall(); });
  test::test_host host;
  auto tool = make_tool(host);
  std::promise<sdk::tool_result> promise;
  auto future = promise.get_future();
  std::atomic<int> calls{0};
  auto handle = tool->run({{"urls", {server.url("/stall")}}}, [&](sdk::tool_result r) {
    if (calls++ == 0)
      promise.set_value(std::move(r));
  });
  REQUIRE(handle);
  handle->cancel();
  handle->cancel();
  REQUIRE(future.wait_for(std::chrono::seconds{10}) == std::future_status::ready);
  auto r = future.get();
  REQUIRE(r.failure);
  CHECK(r.failure->code == sdk::errc::cancelled);
  std::this_thread::sleep_for(std::chrono::milliseconds{100});
  CHECK(calls.load() == 1);
}

TEST_CASE("open_url config is validated") {
  CHECK_THROWS_AS(parse_config({{"unknown_key", 1}}, ""), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"max_urls", 0}}, ""), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"allow", {"not valid!"}}}, ""), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"corpus_db", 3}}, ""), std::invalid_argument);
  CHECK_THROWS_AS(parse_config(json::array(), ""), std::invalid_argument);
  // Quarry's limits never reach the plugin: refused like any unknown key.
  CHECK_THROWS_AS(parse_config({{"max_concurrency", 2}}, ""), std::invalid_argument);
  CHECK_THROWS_AS(parse_config({{"timeout", "30s"}}, ""), std::invalid_argument);
  auto ok = parse_config(json::object(), "/data/plugins/open_url");
  CHECK(ok.corpus_db == "/data/plugins/local_corpus/corpus.db");
  CHECK(ok.max_urls == 10);
}

TEST_CASE("open_url plugin loads from disk") {
  test::temp_dir tmp;
  core::settings cfg;
  cfg.runtime.data_dir = tmp.file("data");
  host::host_services services{cfg};
  host::plugin_registry registry{services};
  auto err = registry.load_file(std::string{QUARRY_PLUGIN_DIR} + "/quarry_open_url.so");
  REQUIRE_FALSE(err.has_value());
  const auto* info = registry.find("open_url");
  REQUIRE(info != nullptr);
  CHECK(info->kind == sdk::plugin_kind::tool);
  auto bad = registry.make_tool("open_url", {{"allow", "everything"}});
  REQUIRE(std::holds_alternative<std::string>(bad));
  CHECK(std::get<std::string>(bad).find("'allow'") != std::string::npos);
  auto made = registry.make_tool("open_url", {{"allow", {"127.0.0.1"}}});
  REQUIRE(std::holds_alternative<std::shared_ptr<sdk::tool>>(made));
  auto tool = std::get<std::shared_ptr<sdk::tool>>(made);
  CHECK(tool->name() == "open_url");
  CHECK(tool->description() == "Open and read the content of one or more URLs.");
  CHECK(tool->parameters()["required"] == nlohmann::json{"urls"});
  test::http_server server;
  server.route("GET", "/a", [](const test::request&) {
    return response_plan::text(200, article_html("Loaded", "from the module"), "text/html");
  });
  auto r = run_tool(*tool, {{"urls", {server.url("/a")}}});
  REQUIRE_FALSE(r.failure);
  CHECK(r.llm_text.find("from the module") != std::string::npos);
  services.shutdown();
}

TEST_CASE("open_url does not fetch a page it read recently again") {
  test::http_server server;
  std::atomic<int> hits{0};
  server.route("GET", "/page", [&hits](const test::request&) {
    ++hits;
    return response_plan::text(200, article_html("Once", "fetched a single time"), "text/html");
  });
  server.route("GET", "/missing", [&hits](const test::request&) {
    ++hits;
    return response_plan::text(404, "gone");
  });
  test::test_host host;
  auto tool = make_tool(host);
  auto first = run_tool(*tool, {{"urls", {server.url("/page")}}});
  REQUIRE_FALSE(first.failure);
  // Read again (another agent, with a fragment): answered from memory.
  auto again = run_tool(*tool, {{"urls", {server.url("/page#top"), server.url("/missing")}}});
  REQUIRE_FALSE(again.failure);
  CHECK(hits.load() == 2);
  auto j = results_of(again);
  CHECK(j["results"][0]["url"] == server.url("/page#top"));
  CHECK(j["results"][0]["content"].get<std::string>().find("fetched a single time")
        != std::string::npos);
  // Failures are tried again.
  run_tool(*tool, {{"urls", {server.url("/missing")}}});
  CHECK(hits.load() == 3);
}

} // namespace open_url_tool_test
