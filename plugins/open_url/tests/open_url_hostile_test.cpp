// open_url with hostile argument lists: 500 URLs, all refused, must not
// leave the model unaware of the 490 that were never tried.

#include "open_url_tool.hpp"

#include "support/run_tool.hpp"
#include "support/test_host.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <string>

namespace open_url_hostile_test {

using namespace quarry;
using namespace quarry::plugins::open_url;
using nlohmann::json;

using test::run_tool;

namespace {} // namespace

TEST_CASE("open_url tells the model about every refused and untried URL") {
  test::test_host host;
  // No allow-list: private addresses are refused without any connection.
  open_url_tool tool{host, parse_config({}, "")};
  json urls = json::array();
  for (int i = 0; i < 500; ++i)
    urls.push_back("http://10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1)
                   + "/page");
  auto r = run_tool(tool, {{"urls", urls}});
  REQUIRE(r.failure);
  // The ten that were tried are named with their reason...
  CHECK(r.llm_text.find("http://10.0.0.1/page") != std::string::npos);
  CHECK(r.llm_text.find("http://10.0.0.10/page") != std::string::npos);
  CHECK(r.llm_text.find("blocked by SSRF protection") != std::string::npos);
  // ...and the other 490 are accounted for.
  CHECK(r.llm_text.find("Only the first 10 of 500 URLs were opened") != std::string::npos);
  CHECK(r.llm_text.find("the other 490 were not tried") != std::string::npos);
  CHECK(r.failure->message == r.llm_text);
  host.shutdown();
}

TEST_CASE("open_url dropped_note counts singular and plural") {
  CHECK(dropped_note(10, 1).find("the other 1 was not tried: call open_url "
                                 "again with it.")
        != std::string::npos);
  CHECK(dropped_note(3, 7)
        == "Only the first 3 of 10 URLs were opened (open_url "
           "opens at most 3 per call); the other 7 were not "
           "tried: call open_url again with them.");
}

} // namespace open_url_hostile_test
