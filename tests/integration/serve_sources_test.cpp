// The sources of a report over a real `quarry serve`: the list in the
// numbering the report shows (gap-free, the same in the report's text, its
// Sources and the API), each source's text with its cited passages (JSON and
// a page), no file:// URL over HTTP, full paths only behind a token, and the
// rendering of a report's Markdown for the web page.

#include "serve_client.hpp"

#include "quarry/store/store.hpp"

#include "support/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <regex>
#include <set>

namespace serve_sources_test {

using namespace quarry;
using namespace quarry::test::serve;
using nlohmann::json;

namespace {

// The numbers of a report's `[[n]]` markers, in order of first appearance.
std::vector<int> cited_in_order(const std::string& text) {
  std::vector<int> out;
  std::regex marker{R"(\[\[(\d+)\]\])"};
  for (auto it = std::sregex_iterator(text.begin(), text.end(), marker);
       it != std::sregex_iterator(); ++it) {
    auto n = std::stoi((*it)[1].str());
    if (std::find(out.begin(), out.end(), n) == out.end())
      out.push_back(n);
  }
  return out;
}

// Runs a research over the API to its end; returns its id.
std::string researched(const server_process& srv, const json& body) {
  auto r = call("POST", srv.url("/v1/research"), body.dump());
  CAPTURE(r.body);
  REQUIRE(r.status == 202);
  auto id = r.as_json()["id"].get<std::string>();
  auto evs = call("GET", srv.url("/v1/research/" + id + "/events"), {}, {},
                  std::chrono::seconds{90});
  auto parsed = parse_sse(evs.body);
  REQUIRE_FALSE(parsed.empty());
  REQUIRE(json::parse(parsed.back().data)["state"] == "completed");
  return id;
}

// The sessions of a store written before the server starts: one whose
// report cites stored numbers 7, 3 and 7 again (of 1 to 7: a gap), and one
// without a report.
struct gap_store {
  std::string file;
  std::string with_report = store::make_session_id();
  std::string without_report = store::make_session_id();
  std::string local_text
    = "Heat pumps in cold climates.\n\nA heat pump defrosts its outdoor coil by reversing its "
      "cycle for a few minutes. Défrost cycles cost some efficiency.\n\nOther notes follow.";
  std::string web_text = "Noise of heat pumps. A heat pump is about as loud as a fridge at "
                         "one metre. Placement matters.";
  std::string report = "A heat pump is about as loud as a fridge [[7]](https://noise.example/a). "
                       "It defrosts its outdoor coil by reversing its cycle "
                       "[[3]](file:///srv/corpus/heat/defrost%20notes.md). Again the noise "
                       "[[7]](https://noise.example/a).";

  explicit gap_store(const test::temp_dir& home) : file(home.path() + "/sources.db") {
    auto opened = store::store::open(file, {});
    REQUIRE(std::holds_alternative<std::unique_ptr<store::store>>(opened));
    auto db = std::get<std::unique_ptr<store::store>>(std::move(opened));
    store::batch b;
    for (const auto& id : {with_report, without_report}) {
      store::session_row row;
      row.id = id;
      row.question = "How does a heat pump defrost?";
      row.options = {{"question", row.question}, {"corpus", "/srv/corpus"}};
      b.new_sessions.push_back(row);
    }
    std::vector<store::citation_row> cites;
    for (int n = 1; n <= 7; ++n) {
      store::document_row d;
      d.document_id = "doc" + std::to_string(n);
      d.title = "Document " + std::to_string(n);
      d.url = "https://other.example/" + std::to_string(n);
      d.text = "Unrelated text " + std::to_string(n) + ".";
      if (n == 3) {
        d.title = "Defrost notes";
        d.url = "file:///srv/corpus/heat/defrost%20notes.md";
        d.text = local_text;
      } else if (n == 7) {
        d.title = "Noise";
        d.url = "https://noise.example/a";
        d.text = web_text;
      }
      d.source_type = n == 3 ? "internal" : "web";
      b.documents.push_back({with_report, d});
      cites.push_back({n, d.document_id});
    }
    store::checkpoint_row cp;
    cp.number = 1;
    cp.state = {{"cycle", 1}};
    b.checkpoints.push_back({with_report, cp, cites});
    store::report_row rep;
    rep.kind = "final";
    rep.text = report;
    b.reports.push_back({with_report, rep});
    b.states.push_back({with_report, store::session_state::completed, ""});
    b.states.push_back({without_report, store::session_state::failed, "no report"});
    auto err = db->write(b);
    INFO((err ? err->message : std::string{}));
    REQUIRE_FALSE(err);
  }
};

} // namespace

TEST_CASE("serve sources: a report citing 7, 3, 7 of a store's 1 to 7 is shown as 1, 2 in "
          "its text, its Sources and the API, with each source's text and passages") {
  test::temp_dir home;
  gap_store st{home};
  server_process srv{home, {"--set", "store.path=" + st.file}};
  const auto& id = st.with_report;

  auto report = call("GET", srv.url("/v1/research/" + id + "/report?format=json")).as_json();
  auto text = report["report"].get<std::string>();
  CHECK(cited_in_order(text) == std::vector<int>{1, 2});
  CHECK(text.find("fridge [[1]](https://noise.example/a)") != std::string::npos);
  CHECK(text.find("cycle [[2]](file://") != std::string::npos);
  REQUIRE(report["sources"].size() == 2);
  CHECK(report["sources"][0]["number"] == 1);
  CHECK(report["sources"][0]["title"] == "Noise");
  CHECK(report["sources"][1]["number"] == 2);
  auto md = call("GET", srv.url("/v1/research/" + id + "/report")).body;
  CHECK(md.find("1. Noise <https://noise.example/a>") != std::string::npos);
  CHECK(md.find("2. Defrost notes <file://") != std::string::npos);
  CHECK(md.find("[[7]]") == std::string::npos);
  // The session's own view lists the same numbers with their documents.
  auto session = call("GET", srv.url("/v1/research/" + id)).as_json();
  REQUIRE(session["sources"].size() == 2);
  CHECK(session["sources"][0]["number"] == 1);
  CHECK(session["sources"][0]["document_id"] == "doc7");
  CHECK(session["sources"][1]["document_id"] == "doc3");

  auto list = call("GET", srv.url("/v1/research/" + id + "/sources"));
  CAPTURE(list.body);
  REQUIRE(list.status == 200);
  CHECK(list.body.find("file:") == std::string::npos);
  auto sources = list.as_json();
  CHECK(sources["id"] == id);
  REQUIRE(sources["sources"].size() == 2);
  auto web = sources["sources"][0];
  CHECK(web["number"] == 1);
  CHECK(web["kind"] == "web");
  CHECK(web["url"] == "https://noise.example/a");
  CHECK(web["location"] == "noise.example/a");
  CHECK(web["href"] == "/v1/research/" + id + "/sources/1");
  CHECK(web["snippet_only"] == false);
  // Two claims cite it (they may share a passage).
  CHECK(web["passages"].get<int>() >= 1);
  auto local = sources["sources"][1];
  CHECK(local["number"] == 2);
  CHECK(local["kind"] == "local");
  CHECK(local["url"].is_null());
  CHECK(local["location"] == "heat/defrost notes.md");
  CHECK(local["passages"] == 1);

  // The local source: its text, and the passage that holds the cited sentence
  // (computed: nobody verified this report).
  auto one = call("GET", srv.url("/v1/research/" + id + "/sources/2"));
  CAPTURE(one.body);
  REQUIRE(one.status == 200);
  CHECK(one.body.find("file:") == std::string::npos);
  auto src = one.as_json();
  CHECK(src["id"] == id);
  CHECK(src["number"] == 2);
  CHECK(src["title"] == "Defrost notes");
  CHECK(src["text"] == st.local_text);
  CHECK(src["text_truncated"] == false);
  REQUIRE(src["passages"].size() == 1);
  auto p = src["passages"][0];
  auto b = p["begin"].get<size_t>();
  auto e = p["end"].get<size_t>();
  REQUIRE(b < e);
  REQUIRE(e <= st.local_text.size());
  auto passage = st.local_text.substr(b, e - b);
  CHECK(passage.find("defrosts its outdoor coil by reversing its cycle") != std::string::npos);
  CHECK(passage.find("Other notes") == std::string::npos);
  REQUIRE(p["claims"].size() == 1);
  CHECK(p["claims"][0].get<std::string>().find("reversing its cycle") != std::string::npos);
  CHECK(p["verdict"].is_null());

  // Its page: the passage marked, everything escaped, nothing loaded.
  auto page = call("GET", srv.url("/v1/research/" + id + "/sources/2?format=html"));
  REQUIRE(page.status == 200);
  CHECK(page.header("content-type").find("text/html") == 0);
  CHECK(page.header("content-security-policy").find("default-src 'none'") == 0);
  CHECK(page.body.find("<mark id=\"passage-1\">") != std::string::npos);
  CHECK(page.body.find("<script") == std::string::npos);
  CHECK(page.body.find("file:") == std::string::npos);
  CHECK(page.body.find("heat/defrost notes.md") != std::string::npos);
  CHECK(page.body.find("Back to the report") != std::string::npos);
  // The web source links its original page.
  auto web_page = call("GET", srv.url("/v1/research/" + id + "/sources/1?format=html")).body;
  CHECK(web_page.find("href=\"https://noise.example/a\"") != std::string::npos);
  CHECK(web_page.find("<mark id=\"passage-1\">") != std::string::npos);

  // The report's HTML over HTTP links no file, and every citation of the
  // page's fragment opens its source here.
  auto html = call("GET", srv.url("/v1/research/" + id + "/report?format=html"));
  CHECK(html.body.find("file:") == std::string::npos);
  CHECK(html.body.find("/srv/corpus") == std::string::npos);
  CHECK(html.body.find("href=\"/v1/research/" + id + "/sources/2?format=html\"")
        != std::string::npos);
  CHECK(html.body.find("href=\"https://noise.example/a\">[1]</a>") != std::string::npos);
  auto fragment = report["html"].get<std::string>();
  CHECK(fragment.find("file:") == std::string::npos);
  CHECK(fragment.find("<html") == std::string::npos);
  CHECK(fragment.find("<a class=\"cite\" data-n=\"1\" data-url=\"https://noise.example/a\" "
                      "href=\"/v1/research/"
                      + id + "/sources/1?format=html\">[1]</a>")
        != std::string::npos);
  CHECK(fragment.find("<a class=\"cite\" data-n=\"2\" href=\"/v1/research/" + id
                      + "/sources/2?format=html\">[2]</a>")
        != std::string::npos);

  // Absolute paths need a token; numbers and sessions that are not there
  // are not found; a session without a report has no sources yet.
  auto full = call("GET", srv.url("/v1/research/" + id + "/sources/2?full_path=1"));
  CHECK(full.status == 403);
  CHECK(full.body.find("auth_token") != std::string::npos);
  for (const char* n : {"0", "3", "7", "abc", "99999999"}) {
    CAPTURE(n);
    auto r = call("GET", srv.url("/v1/research/" + id + "/sources/" + n));
    CHECK(r.status == 404);
    CHECK(r.as_json()["error"]["code"] == "not_found");
  }
  CHECK(call("GET", srv.url("/v1/research/q0123456789abcdef/sources")).status == 404);
  CHECK(call("GET", srv.url("/v1/research/q0123456789abcdef/sources/1")).status == 404);
  CHECK(call("GET", srv.url("/v1/research/nope/sources/1")).status == 404);
  CHECK(call("GET", srv.url("/v1/research/" + st.without_report + "/sources")).status == 409);
  CHECK(call("GET", srv.url("/v1/research/" + st.without_report + "/sources/1")).status == 409);
  CHECK(call("GET", srv.url("/v1/research/" + id + "/sources/1?format=pdf")).status == 400);
}

TEST_CASE("serve sources: with a token, full_path gives a local source's absolute path") {
  test::temp_dir home;
  gap_store st{home};
  server_process srv{home,
                     {"--set", "store.path=" + st.file, "--set",
                      "server.auth_token=${QUARRY_TEST_TOKEN}"},
                     {{"QUARRY_TEST_TOKEN", "sources-token-for-tests"}}};
  std::vector<std::string> auth{"Authorization: Bearer sources-token-for-tests"};
  auto base = "/v1/research/" + st.with_report + "/sources/2";
  CHECK(call("GET", srv.url(base + "?full_path=1")).status == 401);
  auto full = call("GET", srv.url(base + "?full_path=1"), {}, auth);
  CAPTURE(full.body);
  REQUIRE(full.status == 200);
  CHECK(full.as_json()["location"] == "/srv/corpus/heat/defrost notes.md");
  CHECK(full.body.find("file:") == std::string::npos);
  auto shown = call("GET", srv.url(base), {}, auth).as_json();
  CHECK(shown["location"] == "heat/defrost notes.md");
}

TEST_CASE("serve sources: a research's sources agree with its report, verified passages hold "
          "their evidence, and the render endpoint is safe") {
  test::temp_dir home;
  server_process srv{home, {"--set", "server.max_body_bytes=4194304"}};
  auto id = researched(srv, {{"question", "How does a heat pump defrost its outdoor coil?"},
                             {"clarify", false},
                             {"verify", true}});
  auto report = call("GET", srv.url("/v1/research/" + id + "/report?format=json")).as_json();
  auto text = report["report"].get<std::string>();
  auto list = call("GET", srv.url("/v1/research/" + id + "/sources"));
  REQUIRE(list.status == 200);
  CHECK(list.body.find("file:") == std::string::npos);
  auto sources = list.as_json()["sources"];
  REQUIRE_FALSE(sources.empty());
  // One numbering: 1 to K, in the order the report first cites them, the
  // same as the report's own Sources.
  std::vector<int> numbers;
  for (const auto& s : sources)
    numbers.push_back(s["number"].get<int>());
  std::vector<int> expected(numbers.size());
  for (size_t i = 0; i < expected.size(); ++i)
    expected[i] = static_cast<int>(i + 1);
  CHECK(numbers == expected);
  CHECK(cited_in_order(text) == expected);
  REQUIRE(report["sources"].size() == sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    CHECK(report["sources"][i]["number"] == sources[i]["number"]);
    CHECK(report["sources"][i]["title"] == sources[i]["title"]);
  }
  auto md = call("GET", srv.url("/v1/research/" + id + "/report")).body;
  for (const auto& s : sources)
    CHECK(
      md.find("\n" + std::to_string(s["number"].get<int>()) + ". " + s["title"].get<std::string>())
      != std::string::npos);
  CHECK(call("GET", srv.url("/v1/research/" + id + "/report?format=html")).body.find("file:")
        == std::string::npos);
  CHECK(report["html"].get<std::string>().find("file:") == std::string::npos);
  CHECK(report["html"].get<std::string>().find("class=\"cite\"") != std::string::npos);

  // Each verified claim's evidence lies in a passage of its source.
  auto claims = call("GET", srv.url("/v1/research/" + id + "/claims")).as_json()["claims"];
  size_t checked = 0;
  for (const auto& c : claims) {
    if (!c["source"].is_number() || !c["evidence"].is_string()
        || c["evidence"].get<std::string>().size() < 12)
      continue;
    auto n = c["source"].get<int>();
    CAPTURE(n);
    auto src = call("GET", srv.url("/v1/research/" + id + "/sources/" + std::to_string(n)));
    REQUIRE(src.status == 200);
    auto j = src.as_json();
    auto doc = j["text"].get<std::string>();
    auto quote = c["evidence"].get<std::string>().substr(0, 12);
    bool inside = false;
    size_t last_end = 0;
    for (const auto& p : j["passages"]) {
      auto b = p["begin"].get<size_t>();
      auto e = p["end"].get<size_t>();
      CHECK(b >= last_end);
      CHECK(e <= doc.size());
      last_end = e;
      inside = inside || doc.substr(b, e - b).find(quote) != std::string::npos;
      CHECK(p["verdict"].is_string());
    }
    CHECK(inside);
    ++checked;
  }
  CHECK(checked > 0);

  // The render endpoint: the same fragment of partial Markdown, escaped.
  auto render = [&](const std::string& body, std::vector<std::string> headers = {}) {
    return call("POST", srv.url("/v1/research/" + id + "/render"), body, std::move(headers));
  };
  auto r = render(json{{"markdown", "# Part\n\nHot [[9]](https://h.example/) and cold "
                                    "[[4]](file:///srv/x.md). <script>alert(1)</script> "
                                    "[x](javascript:alert(1)) [[9]](https://h.example/)"}}
                    .dump());
  CAPTURE(r.body);
  REQUIRE(r.status == 200);
  auto html = r.as_json()["html"].get<std::string>();
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("&lt;script&gt;") != std::string::npos);
  CHECK(html.find("href=\"javascript") == std::string::npos);
  CHECK(html.find("file:") == std::string::npos);
  CHECK(html.find("<h1>Part</h1>") != std::string::npos);
  // Numbered as the finished report will be: first cited first.
  CHECK(html.find("data-n=\"1\" data-url=\"https://h.example/\" href=\"/v1/research/" + id
                  + "/sources/1?format=html\">[1]</a>")
        != std::string::npos);
  CHECK(html.find("data-n=\"2\" href=\"/v1/research/" + id + "/sources/2?format=html\">[2]</a>")
        != std::string::npos);
  CHECK(render(json{{"markdown", std::string(2 * 1024 * 1024 + 1, 'a')}}.dump()).status == 413);
  CHECK(render(R"({"markdown": 5})").status == 400);
  CHECK(call("POST", srv.url("/v1/research/" + id + "/render"), R"({"markdown": "x"})",
             {"Content-Type: text/plain"})
          .status
        == 415);
  CHECK(
    call("POST", srv.url("/v1/research/q0123456789abcdef/render"), R"({"markdown": "x"})").status
    == 404);
}

} // namespace serve_sources_test
