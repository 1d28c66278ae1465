// The progress line of corpus indexing (app/index_progress).

#include "index_progress.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>

namespace index_progress_test {

using namespace quarry;
using namespace std::chrono_literals;

TEST_CASE("index progress: files and bytes done, rate and time left") {
  corpus::update_progress p;
  p.files_done = 1200;
  p.files_total = 10000;
  p.bytes_done = 10'000'000;
  p.bytes_total = 103'000'000;
  CHECK(app::format_index_progress(p, 2s)
        == "indexing: 1,200 of 10,000 files, 10.0 of 103.0 MB, 5.0 MB/s, about 19 s left");
  p.bytes_done = 1'000'000;
  CHECK(app::format_index_progress(p, 10s)
        == "indexing: 1,200 of 10,000 files, 1.0 of 103.0 MB, 0.1 MB/s, about 17 min 0 s left");
  // Nothing done yet: no rate, no guess.
  p.bytes_done = 0;
  CHECK(app::format_index_progress(p, 1s) == "indexing: 1,200 of 10,000 files, 0.0 of 103.0 MB");
  // All done: the rate, no time left.
  p.files_done = p.files_total;
  p.bytes_done = p.bytes_total;
  CHECK(app::format_index_progress(p, 4s)
        == "indexing: 10,000 of 10,000 files, 103.0 of 103.0 MB, 25.8 MB/s");
}

TEST_CASE("index progress: one line redrawn in place, ended by finish, silent when quick") {
  auto* out = std::tmpfile();
  REQUIRE(out != nullptr);
  auto read_all = [&] {
    std::fflush(out);
    std::rewind(out);
    std::string text;
    for (int c; (c = std::fgetc(out)) != EOF;)
      text += static_cast<char>(c);
    return text;
  };
  {
    app::index_progress_line line{out, 0ms, 0ms};
    auto cb = line.callback();
    corpus::update_progress p{1, 3, 10, 30};
    cb(p);
    p = {3, 3, 30, 30};
    cb(p);
    line.finish();
    auto text = read_all();
    CHECK(text.rfind("\rindexing: 1 of 3 files", 0) == 0);
    CHECK(text.find("\rindexing: 3 of 3 files") != std::string::npos);
    CHECK(text.back() == '\n');
    CHECK(text.find('\n') == text.size() - 1);
  }
  std::fclose(out);
  // An update quicker than quiet_for draws nothing, and finish adds nothing.
  auto* quiet = std::tmpfile();
  REQUIRE(quiet != nullptr);
  {
    app::index_progress_line line{quiet, 0ms, 60s};
    line.callback()({1, 1, 5, 5});
    line.finish();
    CHECK(std::ftell(quiet) == 0);
  }
  std::fclose(quiet);
}

} // namespace index_progress_test
