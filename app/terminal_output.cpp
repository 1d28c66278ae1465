// A std::streambuf that cleans what passes through it for a terminal.

#include "terminal_output.hpp"

#include "quarry/sdk/strings.hpp"

#include <unistd.h>

#include <iostream>
#include <mutex>
#include <streambuf>
#include <string>

namespace quarry::app {

namespace {

/// Forwards to `sink` what @ref sdk::terminal_text_filter lets through.
/// Unbuffered (every write reaches the terminal in order with C stdio writes
/// to the same descriptor); the mutex keeps the filter whole when several
/// threads write.
class terminal_streambuf final : public std::streambuf {
public:
  explicit terminal_streambuf(std::streambuf* sink) : sink_(sink) {
    // nop
  }

  void finish() {
    std::lock_guard<std::mutex> guard{mtx_};
    put(filter_.finish());
    sink_->pubsync();
  }

protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof()))
      return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    std::lock_guard<std::mutex> guard{mtx_};
    put(filter_.feed({&ch, 1}));
    return c;
  }

  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> guard{mtx_};
    put(filter_.feed({s, static_cast<size_t>(n)}));
    return n;
  }

  int sync() override {
    std::lock_guard<std::mutex> guard{mtx_};
    return sink_->pubsync();
  }

private:
  void put(const std::string& text) {
    if (!text.empty())
      sink_->sputn(text.data(), static_cast<std::streamsize>(text.size()));
  }

  std::streambuf* sink_;
  std::mutex mtx_;
  sdk::terminal_text_filter filter_;
};

// Never destroyed: the standard streams may be written until the very end.
terminal_streambuf* out_filter = nullptr;
terminal_streambuf* err_filter = nullptr;

} // namespace

void guard_terminal_output() {
  if (out_filter == nullptr && ::isatty(STDOUT_FILENO) == 1) {
    out_filter = new terminal_streambuf(std::cout.rdbuf());
    std::cout.rdbuf(out_filter);
  }
  if (err_filter == nullptr && ::isatty(STDERR_FILENO) == 1) {
    err_filter = new terminal_streambuf(std::cerr.rdbuf());
    std::cerr.rdbuf(err_filter);
    std::clog.rdbuf(err_filter);
  }
}

void finish_terminal_output() {
  if (out_filter != nullptr)
    out_filter->finish();
  if (err_filter != nullptr)
    err_filter->finish();
}

} // namespace quarry::app
