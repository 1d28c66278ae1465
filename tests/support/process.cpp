// Child processes and temporary folders for tests.

#include "support/process.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <thread>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace quarry::test {

namespace fs = std::filesystem;

namespace {

// In a forked child whose standard streams are set: clears the signal mask
// (the test runner may have blocked signals; the child starts clean), goes
// to `opts.cwd`, applies `opts.env` and runs `argv`. Exits with 126 when the
// folder is missing, 127 when the program cannot run.
[[noreturn]] void exec_child(const std::vector<std::string>& argv, const process_options& opts) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (!opts.cwd.empty() && chdir(opts.cwd.c_str()) != 0)
    _exit(126);
  for (const auto& [key, value] : opts.env) {
    if (value)
      setenv(key.c_str(), value->c_str(), 1);
    else
      unsetenv(key.c_str());
  }
  std::vector<char*> args;
  for (const auto& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  _exit(127);
}

} // namespace

process_result run_process(const std::vector<std::string>& argv, const process_options& opts) {
  if (argv.empty())
    throw std::invalid_argument("run_process: empty argv");
  int in_pipe[2];
  int out_pipe[2];
  int err_pipe[2];
  // Standard input is a socket pair, not a pipe: a child that stops reading
  // early (it refused its input) makes send() fail with EPIPE instead of
  // killing the test process with SIGPIPE.
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pipe) != 0
      || pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string{"pipe: "} + std::strerror(errno));
  auto pid = fork();
  if (pid < 0)
    throw std::runtime_error(std::string{"fork: "} + std::strerror(errno));
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    exec_child(argv, opts);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  process_result result;
  size_t written = 0;
  auto in_fd = in_pipe[1];
  if (opts.input.empty()) {
    close(in_fd);
    in_fd = -1;
  } else {
    fcntl(in_fd, F_SETFL, O_NONBLOCK);
  }
  auto deadline = std::chrono::steady_clock::now() + opts.timeout;
  int out_fd = out_pipe[0];
  int err_fd = err_pipe[0];
  while (out_fd >= 0 || err_fd >= 0) {
    pollfd fds[3];
    nfds_t n = 0;
    if (out_fd >= 0)
      fds[n++] = {out_fd, POLLIN, 0};
    if (err_fd >= 0)
      fds[n++] = {err_fd, POLLIN, 0};
    if (in_fd >= 0)
      fds[n++] = {in_fd, POLLOUT, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    if (left <= 0) {
      kill(pid, SIGKILL);
      result.timed_out = true;
      break;
    }
    auto rc = poll(fds, n, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc < 0 && errno != EINTR)
      break;
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].revents == 0)
        continue;
      if (fds[i].fd == in_fd) {
        auto w = send(in_fd, opts.input.data() + written, opts.input.size() - written,
                      MSG_NOSIGNAL);
        if (w > 0)
          written += static_cast<size_t>(w);
        if (w < 0 || written == opts.input.size()) {
          close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      char buf[65536];
      auto r = read(fds[i].fd, buf, sizeof(buf));
      if (r > 0) {
        (fds[i].fd == out_fd ? result.out : result.err).append(buf, static_cast<size_t>(r));
      } else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        if (fds[i].fd == out_fd) {
          close(out_fd);
          out_fd = -1;
        } else {
          close(err_fd);
          err_fd = -1;
        }
      }
    }
  }
  for (auto fd : {in_fd, out_fd, err_fd})
    if (fd >= 0)
      close(fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    // retry
  }
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.exit_code = 128 + WTERMSIG(status);
  return result;
}

temp_dir::temp_dir() {
  auto base = fs::temp_directory_path() / "quarry-test-XXXXXX";
  auto str = base.string();
  std::vector<char> buf(str.begin(), str.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr)
    throw std::runtime_error(std::string{"mkdtemp: "} + std::strerror(errno));
  path_ = buf.data();
}

temp_dir::~temp_dir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string temp_dir::write(const std::string& name, const std::string& content) const {
  auto path = fs::path{path_} / name;
  fs::create_directories(path.parent_path());
  std::ofstream out{path, std::ios::binary};
  out << content;
  return path.string();
}

child_process::child_process(const std::vector<std::string>& argv, const process_options& opts) {
  if (argv.empty())
    throw std::invalid_argument("child_process: empty argv");
  auto in_path = dir_.write("stdin", opts.input);
  auto out_path = dir_.file("stdout");
  auto err_path = dir_.file("stderr");
  pid_ = fork();
  if (pid_ < 0)
    throw std::runtime_error(std::string{"fork: "} + std::strerror(errno));
  if (pid_ == 0) {
    auto in = open(in_path.c_str(), O_RDONLY);
    auto out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    auto err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0)
      _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    exec_child(argv, opts);
  }
}

child_process::~child_process() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      // retry
    }
  }
}

void child_process::signal(int sig) {
  if (!reaped_ && pid_ > 0)
    kill(pid_, sig);
}

process_result child_process::wait(std::chrono::milliseconds timeout) {
  if (!reaped_) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    for (;;) {
      auto rc = waitpid(pid_, &status, WNOHANG);
      if (rc == pid_)
        break;
      if (rc < 0 && errno != EINTR)
        break;
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(pid_, SIGKILL);
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
          // retry
        }
        result_.timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
    reaped_ = true;
    if (WIFEXITED(status))
      result_.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      result_.exit_code = 128 + WTERMSIG(status);
    result_.out = read_file(dir_.file("stdout"));
    result_.err = read_file(dir_.file("stderr"));
  }
  return result_;
}

bool child_process::wait_for_err(const std::string& needle, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (err().find(needle) != std::string::npos)
      return true;
    if (reaped_)
      return false;
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0
        && info.si_pid == pid_) {
      // Ended: one last look.
      return err().find(needle) != std::string::npos;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  return false;
}

std::optional<std::string> child_process::wait_for_err_line(const std::string& needle,
                                                            std::chrono::milliseconds timeout) {
  auto whole_line = [&]() -> std::optional<std::string> {
    auto text = err();
    auto at = text.find(needle);
    if (at == std::string::npos)
      return std::nullopt;
    auto end = text.find('\n', at);
    if (end == std::string::npos)
      return std::nullopt;
    auto begin = text.rfind('\n', at);
    begin = begin == std::string::npos ? 0 : begin + 1;
    return text.substr(begin, end - begin);
  };
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto line = whole_line())
      return line;
    if (reaped_)
      return std::nullopt;
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0
        && info.si_pid == pid_)
      return whole_line();
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  return std::nullopt;
}

bool child_process::wait_until_blocked(int sig, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto bit = 1ull << (sig - 1);
  while (std::chrono::steady_clock::now() < deadline && !reaped_) {
    std::ifstream in{"/proc/" + std::to_string(pid_) + "/status"};
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("SigBlk:", 0) != 0)
        continue;
      auto mask = std::strtoull(line.c_str() + 7, nullptr, 16);
      if ((mask & bit) != 0)
        return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  return false;
}

std::string child_process::err() const {
  return read_file(dir_.file("stderr"));
}

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::map<std::string, std::optional<std::string>> isolated_quarry_env(const std::string& home) {
  std::map<std::string, std::optional<std::string>> env{{"HOME", home}};
  for (auto name : {"XDG_CONFIG_HOME", "XDG_DATA_HOME", "QUARRY_CONFIG", "OPENAI_API_KEY",
                    "OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                    "ANTHROPIC_MODEL", "BRAVE_API_KEY", "TAVILY_API_KEY", "EXA_API_KEY",
                    "SERPER_API_KEY", "SEARXNG_URL", "OLLAMA_HOST", "OLLAMA_MODEL"})
    env[name] = std::nullopt;
  return env;
}

process_options isolated_quarry_options(
  const std::string& home,
  const std::vector<std::pair<std::string, std::optional<std::string>>>& extra_env) {
  process_options opts;
  opts.env = isolated_quarry_env(home);
  for (const auto& [name, value] : extra_env)
    opts.env[name] = value;
  return opts;
}

} // namespace quarry::test
