// The web page's files compiled into the binary (app/web/).

#include "quarry/web/assets.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace web_assets_test {

using quarry::web::all_assets;
using quarry::web::find_asset;

namespace {

std::string read_source(const std::string& name) {
  std::ifstream in{std::string{QUARRY_SOURCE_DIR} + "/app/web/" + name, std::ios::binary};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

const char* page_files[] = {"index.html", "style.css", "app.js",     "api.js",
                            "packets.js", "html.js",   "favicon.svg"};

} // namespace

TEST_CASE("web assets: every file of the page is embedded with its exact bytes") {
  for (const char* name : page_files) {
    CAPTURE(name);
    auto* a = find_asset(std::string{"/"} + name);
    REQUIRE(a != nullptr);
    CHECK(a->path == std::string{"/"} + name);
    auto source = read_source(name);
    REQUIRE_FALSE(source.empty());
    CHECK(a->data == source);
  }
  size_t n = 0;
  auto* all = all_assets(n);
  CHECK(n == std::size(page_files));
  std::set<std::string_view> paths;
  for (size_t i = 0; i < n; ++i)
    paths.insert(all[i].path);
  CHECK(paths.size() == n);
}

TEST_CASE("web assets: / is index.html") {
  auto* root = find_asset("/");
  REQUIRE(root != nullptr);
  CHECK(root == find_asset("/index.html"));
  CHECK(root->data.find("<script type=\"module\" src=\"app.js\">") != std::string_view::npos);
}

TEST_CASE("web assets: content types") {
  CHECK(find_asset("/index.html")->content_type == "text/html; charset=utf-8");
  CHECK(find_asset("/style.css")->content_type == "text/css; charset=utf-8");
  CHECK(find_asset("/app.js")->content_type == "text/javascript; charset=utf-8");
  CHECK(find_asset("/html.js")->content_type == "text/javascript; charset=utf-8");
  CHECK(find_asset("/favicon.svg")->content_type == "image/svg+xml");
}

TEST_CASE("web assets: ETags are quoted content hashes, distinct per file") {
  size_t n = 0;
  auto* all = all_assets(n);
  std::set<std::string_view> tags;
  for (size_t i = 0; i < n; ++i) {
    auto tag = all[i].etag;
    CAPTURE(all[i].path);
    REQUIRE(tag.size() == 34);
    CHECK(tag.front() == '"');
    CHECK(tag.back() == '"');
    CHECK(tag.substr(1, 32).find_first_not_of("0123456789abcdef") == std::string_view::npos);
    tags.insert(tag);
  }
  CHECK(tags.size() == n);
}

TEST_CASE("web assets: a query string is ignored") {
  CHECK(find_asset("/app.js?v=3") == find_asset("/app.js"));
  CHECK(find_asset("/?x") == find_asset("/index.html"));
}

TEST_CASE("web assets: unknown paths find nothing") {
  for (const char* p : {"", "/nope.js", "/index.htm", "/INDEX.HTML", "/App.js", "app.js",
                        "//app.js", "/app.js/", "/web/app.js", "/app.js%00", "/v1/research",
                        "/CMakeLists.txt", "/include/quarry/web/assets.hpp", "/src/assets.cpp"}) {
    CAPTURE(p);
    CHECK(find_asset(p) == nullptr);
  }
}

TEST_CASE("web assets: no path traversal") {
  for (const char* p :
       {"/../CMakeLists.txt", "/../../CMakeLists.txt", "/./app.js", "/%2e%2e/CMakeLists.txt",
        "/%2E%2E/CMakeLists.txt", "/..%2fCMakeLists.txt", "/%2e%2e%2fapp.js", "/..\\CMakeLists.txt",
        "/../app/web/app.js", "/app.js/../index.html", "/x/../app.js", "/%2fapp.js"}) {
    CAPTURE(p);
    CHECK(find_asset(p) == nullptr);
  }
  // Embedded bytes are not a file system: a name with a NUL finds nothing.
  CHECK(find_asset(std::string_view{"/app.js\0.png", 12}) == nullptr);
}

} // namespace web_assets_test
