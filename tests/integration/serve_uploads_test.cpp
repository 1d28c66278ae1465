// Uploads through a real `quarry serve`: files posted to /v1/uploads, a
// research that takes them (its own corpus and `session_files` tool, a
// scripted model that searches it and cites the file), the checks of
// type, size and name, the limits, a resume after a restart, and removal.

#include "research_script.hpp"
#include "serve_client.hpp"

#include "support/fake_llm_server.hpp"
#include "support/pdf_writer.hpp"
#include "support/process.hpp"

#include <curl/curl.h>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace serve_uploads_test {

using namespace quarry;
using namespace quarry::test::script;
using namespace quarry::test::serve;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const char* const uploaded_text = "# Zorblax notes\n\nThe Zorblax coefficient of the north "
                                  "test hall was measured as 42 in March.\n";

reply upload(const server_process& srv, const std::string& name, const std::string& bytes,
             const std::string& type) {
  auto* h = curl_easy_init();
  REQUIRE(h != nullptr);
  auto* escaped = curl_easy_escape(h, name.c_str(), static_cast<int>(name.size()));
  std::string url = srv.url("/v1/uploads?name=") + escaped;
  curl_free(escaped);
  curl_easy_cleanup(h);
  // call() declares JSON for a body; the upload declares its own type.
  reply out;
  h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, bytes.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(bytes.size()));
  struct curl_slist* list = nullptr;
  list = curl_slist_append(list, ("Content-Type: " + type).c_str());
  list = curl_slist_append(list, "Expect:");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &out.body);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 60'000L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  auto rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(h);
  if (rc != CURLE_OK)
    FAIL("curl: " << curl_easy_strerror(rc));
  return out;
}

std::string uploaded(const server_process& srv, const std::string& name, const std::string& bytes,
                     const std::string& type) {
  auto r = upload(srv, name, bytes, type);
  CAPTURE(r.body);
  REQUIRE(r.status == 201);
  return r.as_json()["upload"].get<std::string>();
}

// The research agents search the uploaded files, then report citing [1].
json files_script() {
  auto rules = json::array();
  rules.push_back(rule(plan_marker, {{"text", "1. The coefficient"}}));
  rules.push_back(rule(orchestrator_marker,
                       calls({{"research_agent", {{"task", "Find the Zorblax coefficient."}}}}),
                       1));
  rules.push_back(
    rule(orchestrator_marker, calls({{"generate_report", nlohmann::json::object()}})));
  rules.push_back(report_after_search());
  rules.push_back(
    rule(agent_marker, calls({{"session_files", {{"queries", {"Zorblax coefficient"}}}}})));
  rules.push_back(rule(agent_report_marker, {{"text", "The Zorblax coefficient is 42 [1]."}}));
  rules.push_back(rule(final_marker, {{"text", "The Zorblax coefficient is 42 [1]."}}));
  return rules;
}

std::string start(const server_process& srv, const json& body) {
  auto r = call("POST", srv.url("/v1/research"), body.dump());
  CAPTURE(r.body);
  REQUIRE(r.status == 202);
  return r.as_json()["id"].get<std::string>();
}

std::vector<sse_event> events(const server_process& srv, const std::string& id) {
  auto r = call("GET", srv.url("/v1/research/" + id + "/events"), {}, {}, std::chrono::seconds{90});
  REQUIRE(r.status == 200);
  return parse_sse(r.body);
}

std::vector<std::string> data_dir_args(const test::temp_dir& home) {
  return {"--set", "runtime.data_dir=" + home.path() + "/data"};
}

} // namespace

TEST_CASE("serve uploads: a research searches its uploaded Markdown and PDF and cites them by "
          "name") {
  test::temp_dir home;
  test::fake_llm_server llm;
  REQUIRE_FALSE(llm.script(files_script()));
  server_process srv{home, data_dir_args(home), llm_env(llm)};
  auto md = upload(srv, "zorblax-notes.md", uploaded_text, "text/markdown");
  CAPTURE(md.body);
  REQUIRE(md.status == 201);
  auto mj = md.as_json();
  CHECK(mj["name"] == "zorblax-notes.md");
  CHECK(mj["type"] == "markdown");
  CHECK(mj["bytes"] == std::string{uploaded_text}.size());
  CHECK(mj["expires_in_s"] == 86400);
  auto pdf_bytes = test::make_pdf({"Quasar flux density tables for the southern survey."});
  auto pdf = upload(srv, "survey.pdf", pdf_bytes, "application/pdf");
  REQUIRE(pdf.status == 201);
  CHECK(pdf.as_json()["type"] == "pdf");
  auto md_id = mj["upload"].get<std::string>();
  auto pdf_id = pdf.as_json()["upload"].get<std::string>();
  auto pending = home.path() + "/data/uploads/" + md_id + "/zorblax-notes.md";
  CHECK(fs::exists(pending));

  auto id = start(srv, {{"question", "What is the Zorblax coefficient?"},
                        {"clarify", false},
                        {"uploads", {md_id, pdf_id}}});
  auto evs = events(srv, id);
  REQUIRE_FALSE(evs.empty());
  CHECK(json::parse(evs.back().data)["state"] == "completed");
  // The files moved into the session's folder, beside their index.
  auto folder = home.path() + "/data/sessions/" + id;
  CHECK(fs::exists(folder + "/files/zorblax-notes.md"));
  CHECK(fs::exists(folder + "/files/survey.pdf"));
  CHECK(fs::exists(folder + "/corpus.db"));
  CHECK_FALSE(fs::exists(pending));
  // The model was offered the session's tool, and its search found the
  // uploaded text (stored with the session's packets).
  bool offered = false;
  for (const auto& r : llm.requests())
    if (r.raw_body.find("\"session_files\"") != std::string::npos)
      offered = true;
  CHECK(offered);
  bool found_text = false;
  for (const auto& e : evs)
    if (e.data.find("measured as 42") != std::string::npos
        && e.data.find("upload:") != std::string::npos)
      found_text = true;
  CHECK(found_text);

  auto got = call("GET", srv.url("/v1/research/" + id)).as_json();
  CAPTURE(got.dump());
  REQUIRE(got["uploads"].size() == 2);
  CHECK(got["uploads"][0]
        == json{{"name", "zorblax-notes.md"},
                {"bytes", std::string{uploaded_text}.size()},
                {"type", "markdown"}});
  CHECK(got["uploads"][1]["name"] == "survey.pdf");
  CHECK(got["uploads"][1]["type"] == "pdf");
  REQUIRE(got["sources"].size() == 1);
  CHECK(got["sources"][0]["url"].get<std::string>().find("/files/zorblax-notes.md")
        != std::string::npos);
  CHECK(got["sources"][0]["document_id"].get<std::string>().rfind("upload:", 0) == 0);
  // The report cites the file by its name.
  auto report = call("GET", srv.url("/v1/research/" + id + "/report")).body;
  CAPTURE(report);
  CHECK(report.find("The Zorblax coefficient is 42 [[1]]") != std::string::npos);
  CHECK(report.find("zorblax-notes.md") != std::string::npos);

  // An upload is taken once.
  auto twice = call("POST", srv.url("/v1/research"),
                    json{{"question", "Again?"}, {"uploads", {md_id}}}.dump());
  CHECK(twice.status == 400);
  CHECK(twice.body.find(md_id) != std::string::npos);

  // Removal takes the session's folder with it.
  CHECK(call("DELETE", srv.url("/v1/research/" + id)).status == 204);
  CHECK_FALSE(fs::exists(folder));
}

TEST_CASE("serve uploads: a Word document is read through pandoc, searched and cited") {
  test::temp_dir home;
  // The document as a person's word processor would send it: written by
  // pandoc from Markdown (scripts/setup --exports installs it).
  auto md = home.write("notes.md", uploaded_text);
  auto docx_path = home.file("zorblax-notes.docx");
  auto made = test::run_process({"pandoc", "--from=markdown", "--to=docx", "-o", docx_path, md});
  if (made.exit_code != 0) {
    const char* require = std::getenv("QUARRY_REQUIRE_E2E");
    if (require != nullptr && std::string{require} == "1")
      FAIL("pandoc is missing (run scripts/setup --exports): " << made.err);
    MESSAGE("skipped: pandoc is missing (scripts/setup --exports)");
    return;
  }
  std::ifstream in{docx_path, std::ios::binary};
  std::string bytes{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  REQUIRE(bytes.rfind("PK", 0) == 0);
  test::fake_llm_server llm;
  REQUIRE_FALSE(llm.script(files_script()));
  server_process srv{home, data_dir_args(home), llm_env(llm)};
  auto up = upload(srv, "zorblax-notes.docx", bytes,
                   "application/vnd.openxmlformats-officedocument.wordprocessingml.document");
  CAPTURE(up.body);
  REQUIRE(up.status == 201);
  CHECK(up.as_json()["type"] == "docx");
  auto id = start(srv, {{"question", "What is the Zorblax coefficient?"},
                        {"clarify", false},
                        {"uploads", {up.as_json()["upload"]}}});
  auto evs = events(srv, id);
  REQUIRE_FALSE(evs.empty());
  CHECK(json::parse(evs.back().data)["state"] == "completed");
  // The search found the document's text, not its zipped bytes.
  bool found_text = false;
  for (const auto& e : evs)
    if (e.data.find("measured as 42") != std::string::npos)
      found_text = true;
  CHECK(found_text);
  auto report = call("GET", srv.url("/v1/research/" + id + "/report")).body;
  CAPTURE(report);
  CHECK(report.find("The Zorblax coefficient is 42 [[1]]") != std::string::npos);
  CHECK(report.find("zorblax-notes.docx") != std::string::npos);
  auto source = call("GET", srv.url("/v1/research/" + id + "/sources/1"));
  CAPTURE(source.body);
  REQUIRE(source.status == 200);
  CHECK(source.as_json()["text"].get<std::string>().find("measured as 42") != std::string::npos);
}

TEST_CASE("serve uploads: wrong types, large files, bad names, unknown ids and too many "
          "pending uploads are refused") {
  test::temp_dir home;
  auto args = data_dir_args(home);
  for (auto x : {"server.max_upload_bytes=2048", "server.max_pending_uploads=2"}) {
    args.push_back("--set");
    args.push_back(x);
  }
  server_process srv{home, args};
  // Wrong type: the bytes are a PDF, the declaration says text.
  auto pdf = test::make_pdf({"x"});
  auto wrong = upload(srv, "notes.txt", pdf, "text/plain");
  CHECK(wrong.status == 415);
  CHECK(wrong.as_json()["error"]["message"].get<std::string>().find("application/pdf")
        != std::string::npos);
  CHECK(upload(srv, "image.png", "\x89PNG\r\n", "image/png").status == 415);
  CHECK(upload(srv, "blob.bin", "abc", "application/octet-stream").status == 415);
  // Too big (server.max_upload_bytes), while other routes keep their own
  // limit.
  auto big = upload(srv, "big.txt", std::string(3000, 'x'), "text/plain");
  CHECK(big.status == 413);
  CHECK(big.body.find("2048") != std::string::npos);
  // A name with a path: only its last part is kept.
  auto sneaky = upload(srv, "../x", "just text", "text/markdown");
  CAPTURE(sneaky.body);
  REQUIRE(sneaky.status == 201);
  CHECK(sneaky.as_json()["name"] == "x.md");
  CHECK(fs::exists(home.path() + "/data/uploads/" + sneaky.as_json()["upload"].get<std::string>()
                   + "/x.md"));
  CHECK_FALSE(fs::exists(home.path() + "/data/x.md"));
  CHECK(upload(srv, "..", "text", "text/plain").status == 400);
  CHECK(call("POST", srv.url("/v1/uploads"), "text", {"Content-Type: text/plain"}).status == 400);
  // Unknown or malformed ids: 400 naming them.
  auto unknown = call(
    "POST", srv.url("/v1/research"),
    json{{"question", "q?"}, {"uploads", {"0123456789abcdef0123456789abcdef"}}}.dump());
  CHECK(unknown.status == 400);
  CHECK(unknown.body.find("0123456789abcdef0123456789abcdef") != std::string::npos);
  auto malformed = call("POST", srv.url("/v1/research"),
                        json{{"question", "q?"}, {"uploads", {"../../etc"}}}.dump());
  CHECK(malformed.status == 400);
  CHECK(malformed.body.find("../../etc") != std::string::npos);
  CHECK(
    call("POST", srv.url("/v1/research"), json{{"question", "q?"}, {"uploads", "x"}}.dump()).status
    == 400);
  // No session was stored for any of them.
  CHECK(call("GET", srv.url("/v1/research")).as_json()["sessions"].empty());
  // Pending uploads are limited (server.max_pending_uploads = 2).
  CHECK(upload(srv, "second.md", "text", "text/markdown").status == 201);
  auto third = upload(srv, "third.md", "text", "text/markdown");
  CHECK(third.status == 429);
  CHECK(third.body.find("server.max_pending_uploads") != std::string::npos);
}

TEST_CASE("serve uploads: a session with uploads resumed after a restart searches them again") {
  test::temp_dir home;
  test::fake_llm_server llm;
  REQUIRE_FALSE(llm.script(hanging_at(files_script(), agent_report_marker)));
  std::string id;
  {
    server_process srv{home, data_dir_args(home), llm_env(llm)};
    auto up = uploaded(srv, "zorblax-notes.md", uploaded_text, "text/markdown");
    id = start(
      srv,
      {{"question", "What is the Zorblax coefficient?"}, {"clarify", false}, {"uploads", {up}}});
    wait_until([&] { return requests_with(llm, agent_report_marker) > 0; },
               "the agent's report request");
    srv.proc->signal(SIGTERM);
    auto ended = srv.proc->wait(std::chrono::seconds{60});
    CAPTURE(ended.err);
    CHECK(ended.exit_code == 143);
  }
  REQUIRE_FALSE(llm.script(files_script()));
  auto before = llm.requests().size();
  server_process again{home, data_dir_args(home), llm_env(llm)};
  CHECK(state_of(again, id) == "interrupted");
  auto resumed = call("POST", again.url("/v1/research/" + id + "/resume"));
  CAPTURE(resumed.body);
  REQUIRE(resumed.status == 202);
  auto evs = events(again, id);
  CHECK(json::parse(evs.back().data)["state"] == "completed");
  // The resumed run offered the tool again, and its search found the file.
  auto reqs = llm.requests();
  bool offered = false;
  for (size_t i = before; i < reqs.size(); ++i)
    if (reqs[i].raw_body.find("\"session_files\"") != std::string::npos)
      offered = true;
  CHECK(offered);
  auto report = call("GET", again.url("/v1/research/" + id + "/report")).body;
  CAPTURE(report);
  CHECK(report.find("zorblax-notes.md") != std::string::npos);
}

} // namespace serve_uploads_test
