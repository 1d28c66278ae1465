// The runtime in a real child process: scheduler threads from the
// configuration, and a graceful stop on SIGTERM / SIGINT that lets actors
// flush their files.

#include "quarry/actors/atoms.hpp"
#include "quarry/actors/runtime.hpp"

#include "support/process.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace runtime_test {

using namespace quarry;

namespace {

// An actor that appends "tick" to a file on a timer and, when told to stop,
// writes "stopped" and quits.
using ticker_actor = actors::stoppable_actor::extend<caf::reacts_to<caf::tick_atom>>;

ticker_actor::behavior_type ticker(ticker_actor::pointer self, std::string path) {
  auto out = std::make_shared<std::ofstream>(path);
  *out << "started" << std::endl;
  self->delayed_send(self, std::chrono::milliseconds{10}, caf::tick_atom::value);
  return {
    [=](caf::tick_atom) {
      *out << "tick" << std::endl;
      self->delayed_send(self, std::chrono::milliseconds{10}, caf::tick_atom::value);
    },
    [=](actors::stop_atom) {
      *out << "stopped" << std::endl;
      out->close();
      self->quit();
    },
  };
}

// Runs in the forked child: the same order as `main`.
[[noreturn]] void child_main(const std::string& path, int threads) {
  actors::block_stop_signals();
  core::settings cfg;
  cfg.runtime.scheduler_threads = threads;
  int rc = 0;
  {
    actors::runtime rt{cfg};
    std::ofstream{path + ".threads"} << rt.scheduler_threads() << std::endl;
    std::mutex mtx;
    std::condition_variable cv;
    bool stop = false;
    actors::signal_watcher watcher{[&](int) {
      std::lock_guard<std::mutex> guard{mtx};
      stop = true;
      cv.notify_all();
    }};
    rt.add_stoppable(rt.system().spawn(ticker, path));
    std::unique_lock<std::mutex> guard{mtx};
    if (!cv.wait_for(guard, std::chrono::seconds{30}, [&] { return stop; }))
      rc = 3;
    guard.unlock();
    rt.stop();
    if (!rt.await_stopped(std::chrono::seconds{5}))
      rc = 4;
  }
  std::_Exit(rc);
}

int run_child_and_signal(const std::string& path, int threads, int sig) {
  std::fflush(nullptr); // the child must not repeat buffered output
  auto pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0)
    child_main(path, threads);
  // Wait until the actor is running (a tick was written).
  for (int i = 0; i < 3000; ++i) {
    if (test::read_file(path).find("tick") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  kill(pid, sig);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

} // namespace

TEST_CASE("runtime stops actors gracefully on SIGTERM") {
  test::temp_dir tmp;
  auto path = tmp.file("ticks.txt");
  CHECK(run_child_and_signal(path, 3, SIGTERM) == 0);
  auto text = test::read_file(path);
  CHECK(text.rfind("started\ntick\n", 0) == 0);
  // The last line proves the actor flushed and closed its file on the way out.
  REQUIRE(text.size() >= 8);
  CHECK(text.substr(text.size() - 8) == "stopped\n");
  CHECK(test::read_file(path + ".threads") == "3\n");
}

TEST_CASE("runtime stops actors gracefully on SIGINT") {
  test::temp_dir tmp;
  auto path = tmp.file("ticks.txt");
  CHECK(run_child_and_signal(path, 2, SIGINT) == 0);
  auto text = test::read_file(path);
  REQUIRE(text.size() >= 8);
  CHECK(text.substr(text.size() - 8) == "stopped\n");
  CHECK(test::read_file(path + ".threads") == "2\n");
}

} // namespace runtime_test
