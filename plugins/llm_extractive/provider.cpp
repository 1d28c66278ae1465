// The extractive LLM provider: configuration, streaming, pacing, cancel.

#include "provider.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <queue>
#include <stdexcept>
#include <thread>
#include <utility>

namespace quarry::plugins::llm_extractive {

using clock_type = std::chrono::steady_clock;

// -- configuration ------------------------------------------------------------

namespace {

[[noreturn]] void reject(const std::string& what) {
  throw std::invalid_argument("extractive: " + what);
}

// Reads a number; accepts numeric strings (values substituted from ${VAR}).
double number_of(const std::string& key, const nlohmann::json& value) {
  if (value.is_number())
    return value.get<double>();
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    size_t used = 0;
    try {
      auto result = std::stod(text, &used);
      if (used == text.size() && !text.empty())
        return result;
    } catch (const std::exception&) {
      // fall through
    }
  }
  reject("'" + key + "' must be a number");
}

int64_t integer_of(const std::string& key, const nlohmann::json& value, int64_t min, int64_t max) {
  auto x = number_of(key, value);
  if (x != static_cast<double>(static_cast<int64_t>(x)) || x < static_cast<double>(min)
      || x > static_cast<double>(max))
    reject("'" + key + "' must be an integer from " + std::to_string(min) + " to "
           + std::to_string(max));
  return static_cast<int64_t>(x);
}

} // namespace

config parse_config(const nlohmann::json& cfg) {
  config result;
  if (cfg.is_null())
    return result;
  if (!cfg.is_object())
    reject("the configuration must be an object");
  for (const auto& [key, value] : cfg.items()) {
    if (key == "max_parallel") {
      result.max_parallel = static_cast<int>(integer_of(key, value, 1, 64));
    } else if (key == "ttft_ms") {
      result.ttft = std::chrono::milliseconds{integer_of(key, value, 0, 600000)};
    } else if (key == "tokens_per_second") {
      auto x = number_of(key, value);
      if (!(x >= 0) || x > 1e9)
        reject("'tokens_per_second' must be 0 (unlimited) or a positive number");
      result.tokens_per_second = x;
    } else if (key == "max_sentences") {
      result.max_sentences = static_cast<int>(integer_of(key, value, 1, 1000));
    } else if (key == "context_window") {
      result.context_window = integer_of(key, value, 1, int64_t{1} << 40);
    } else if (key == "reasoning") {
      if (!value.is_boolean())
        reject("'reasoning' must be true or false");
      result.reasoning = value.get<bool>();
    } else {
      reject("unknown configuration key '" + key
             + "' (known: max_parallel, ttft_ms, tokens_per_second, max_sentences)");
    }
  }
  return result;
}

// -- pieces and results -------------------------------------------------------

std::vector<stream_piece> to_pieces(const answer& x) {
  std::vector<stream_piece> result;
  const auto& text = x.text;
  size_t pos = 0;
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (pos < text.size()) {
    auto end = pos;
    while (end < text.size() && space(text[end]))
      ++end; // leading white space (only at the start)
    while (end < text.size() && !space(text[end]))
      ++end;
    while (end < text.size() && space(text[end]))
      ++end;
    stream_piece piece;
    piece.text = text.substr(pos, end - pos);
    piece.tokens = 4.0 / 3.0;
    result.push_back(std::move(piece));
    pos = end;
  }
  for (size_t i = 0; i < x.tool_calls.size(); ++i) {
    const auto& call = x.tool_calls[i];
    stream_piece piece;
    piece.is_call = true;
    piece.call.index = static_cast<int>(i);
    piece.call.id = call.id;
    piece.call.name = call.name;
    piece.call.arguments = call.arguments;
    piece.tokens = static_cast<double>(estimate_tokens(call.arguments) + 1);
    result.push_back(std::move(piece));
  }
  return result;
}

sdk::chat_result to_result(const sdk::chat_request& request, const answer& x) {
  sdk::chat_result result;
  result.text = x.text;
  result.tool_calls = x.tool_calls;
  result.finish = x.tool_calls.empty() ? sdk::finish_reason::stop : sdk::finish_reason::tool_calls;
  result.model = model_name;
  int64_t input = 0;
  for (const auto& msg : request.messages) {
    input += estimate_tokens(msg.content) + estimate_tokens(msg.reasoning);
    for (const auto& call : msg.tool_calls)
      input += 1 + estimate_tokens(call.arguments);
  }
  for (const auto& tool : request.tools)
    input += 1 + estimate_tokens(tool.description);
  int64_t output = estimate_tokens(x.text);
  for (const auto& call : x.tool_calls)
    output += 1 + estimate_tokens(call.arguments);
  result.usage.input_tokens = input;
  result.usage.output_tokens = output;
  return result;
}

// -- pacing -------------------------------------------------------------------

namespace {
class stream_job;
} // namespace

/// One timer thread that releases the deltas of paced calls when they are due.
/// The thread holds a reference to its pacer, so the pacer outlives it even
/// when the last other reference goes away on the pacer's own thread.
class pacer {
public:
  pacer() = default;

  /// Creates a pacer and starts its thread.
  static std::shared_ptr<pacer> make() {
    auto result = std::make_shared<pacer>();
    result->thread_ = std::thread{[self = result] { self->run(); }};
    return result;
  }

  ~pacer() {
    // Only reached once the thread let go of its reference: either `stop`
    // joined it, or this runs on the thread itself as it ends.
    if (thread_.joinable())
      thread_.detach();
  }

  pacer(const pacer&) = delete;
  pacer& operator=(const pacer&) = delete;

  /// Runs `job->step` at `at`. Returns false after `stop`.
  bool schedule(clock_type::time_point at, std::shared_ptr<stream_job> job) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (stopping_)
        return false;
      queue_.push(entry{at, seq_++, std::move(job)});
    }
    cv_.notify_one();
    return true;
  }

  /// Stops the thread and fails every call still waiting; joins the thread
  /// unless called on it. Idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id())
      thread_.join();
  }

private:
  struct entry {
    clock_type::time_point at;
    uint64_t seq;
    std::shared_ptr<stream_job> job;
  };

  struct later {
    bool operator()(const entry& x, const entry& y) const {
      return x.at != y.at ? x.at > y.at : x.seq > y.seq;
    }
  };

  void run();

  std::mutex mtx_;
  std::condition_variable cv_;
  std::priority_queue<entry, std::vector<entry>, later> queue_;
  uint64_t seq_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

// -- one call -----------------------------------------------------------------

namespace {

/// The state of one chat call. Sink calls happen only under `mtx_`, so at most
/// one thread talks to the sink at a time, and `finished_` makes the terminal
/// call happen exactly once.
class stream_job final : public sdk::chat_call, public std::enable_shared_from_this<stream_job> {
public:
  stream_job(std::shared_ptr<sdk::chat_sink> sink, clock_type::time_point start,
             std::weak_ptr<pacer> timer)
    : sink_(std::move(sink)), start_(start), timer_(std::move(timer)) {
    // nop
  }

  void cancel() override {
    cancelled_ = true;
    // Called from inside a sink callback: the running step sees the flag.
    if (owner_.load() == std::this_thread::get_id())
      return;
    // Never block: if another thread holds the lock, it checks the flag
    // before it lets go or waits; a waiting paced call is woken at once.
    if (mtx_.try_lock()) {
      {
        owner_guard owner{*this};
        fail_locked(sdk::make_error(sdk::errc::cancelled, "the chat call was cancelled"));
      }
      mtx_.unlock();
      return;
    }
    if (auto timer = timer_.lock())
      timer->schedule(clock_type::now(), shared_from_this());
  }

  /// Hands the computed answer to the job.
  void start(std::vector<stream_piece> pieces, sdk::chat_result result,
             std::chrono::milliseconds ttft, double tokens_per_second) {
    std::lock_guard<std::mutex> guard{mtx_};
    pieces_ = std::move(pieces);
    result_ = std::move(result);
    due_.reserve(pieces_.size() + 1);
    auto at = std::chrono::duration<double>{ttft};
    for (const auto& piece : pieces_) {
      due_.push_back(start_ + std::chrono::duration_cast<clock_type::duration>(at));
      if (tokens_per_second > 0)
        at += std::chrono::duration<double>{piece.tokens / tokens_per_second};
    }
    // The end of the stream comes with the last piece.
    due_.push_back(due_.empty() ? start_ + ttft : due_.back());
    ready_ = true;
  }

  /// Emits every piece that is due at `now`. Returns when the next piece is
  /// due, or nothing once the call finished.
  std::optional<clock_type::time_point> step(clock_type::time_point now) {
    std::lock_guard<std::mutex> guard{mtx_};
    owner_guard owner{*this};
    return step_locked(now);
  }

  /// Fails the call unless it finished.
  void fail(const sdk::error& err) {
    std::lock_guard<std::mutex> guard{mtx_};
    owner_guard owner{*this};
    fail_locked(err);
  }

private:
  // Marks the current thread as the one holding `mtx_` (and calling the
  // sink), so that a cancel from inside a sink callback does not lock again.
  struct owner_guard {
    explicit owner_guard(stream_job& job) : self(job) {
      self.owner_ = std::this_thread::get_id();
    }
    ~owner_guard() {
      self.owner_ = std::thread::id{};
    }
    owner_guard(const owner_guard&) = delete;
    owner_guard& operator=(const owner_guard&) = delete;
    stream_job& self;
  };

  std::optional<clock_type::time_point> step_locked(clock_type::time_point now) {
    if (finished_)
      return std::nullopt;
    if (cancelled_) {
      fail_locked(sdk::make_error(sdk::errc::cancelled, "the chat call was cancelled"));
      return std::nullopt;
    }
    if (!ready_)
      return std::nullopt;
    while (next_ <= pieces_.size()) {
      if (due_[next_] > now)
        return due_[next_];
      if (next_ == pieces_.size()) {
        finished_ = true;
        sink_->on_usage(result_.usage);
        sink_->on_done(result_);
        sink_.reset();
        return std::nullopt;
      }
      const auto& piece = pieces_[next_++];
      streamed_ = true;
      if (piece.is_call)
        sink_->on_tool_call(piece.call);
      else
        sink_->on_text(piece.text);
      if (cancelled_) {
        fail_locked(sdk::make_error(sdk::errc::cancelled, "the chat call was cancelled"));
        return std::nullopt;
      }
    }
    return std::nullopt;
  }

  void fail_locked(const sdk::error& err) {
    if (finished_)
      return;
    finished_ = true;
    sink_->on_error(err, streamed_);
    sink_.reset();
  }

  std::mutex mtx_;
  std::atomic<bool> cancelled_{false};
  std::atomic<std::thread::id> owner_{};
  std::shared_ptr<sdk::chat_sink> sink_;
  clock_type::time_point start_;
  std::weak_ptr<pacer> timer_;
  bool ready_ = false;
  bool finished_ = false;
  bool streamed_ = false;
  std::vector<stream_piece> pieces_;
  std::vector<clock_type::time_point> due_;
  size_t next_ = 0;
  sdk::chat_result result_;
};

} // namespace

// -- pacer implementation ---------------------------------------------------

void pacer::run() {
  std::unique_lock<std::mutex> guard{mtx_};
  while (!stopping_) {
    if (queue_.empty()) {
      cv_.wait(guard);
      continue;
    }
    auto at = queue_.top().at;
    if (at > clock_type::now()) {
      cv_.wait_until(guard, at);
      continue;
    }
    auto job = queue_.top().job;
    queue_.pop();
    guard.unlock();
    auto next = job->step(clock_type::now());
    guard.lock();
    if (next)
      queue_.push(entry{*next, seq_++, std::move(job)});
  }
  std::vector<std::shared_ptr<stream_job>> pending;
  while (!queue_.empty()) {
    pending.push_back(queue_.top().job);
    queue_.pop();
  }
  guard.unlock();
  for (auto& job : pending)
    job->fail(sdk::make_error(sdk::errc::cancelled, "the provider shut down"));
}

// -- provider -----------------------------------------------------------------

provider::provider(sdk::host_context& host, config cfg) : host_(host), cfg_(std::move(cfg)) {
  if (cfg_.ttft.count() > 0 || cfg_.tokens_per_second > 0)
    pacer_ = pacer::make();
}

provider::~provider() {
  if (pacer_)
    pacer_->stop();
}

sdk::model_info provider::info() const {
  sdk::model_info result;
  result.model = model_name;
  result.context_window = cfg_.context_window;
  result.supports_tools = true;
  result.supports_reasoning = cfg_.reasoning;
  return result;
}

std::shared_ptr<sdk::chat_call> provider::chat(sdk::chat_request request,
                                               std::shared_ptr<sdk::chat_sink> sink) {
  auto job = std::make_shared<stream_job>(std::move(sink), clock_type::now(), pacer_);
  auto work = [job, cfg = cfg_, timer = pacer_, req = std::move(request)] {
    try {
      compose_options opts;
      opts.max_parallel = cfg.max_parallel;
      opts.max_sentences = cfg.max_sentences;
      auto ans = respond(req, opts);
      job->start(to_pieces(ans), to_result(req, ans), cfg.ttft, cfg.tokens_per_second);
    } catch (const std::exception& e) {
      job->fail(sdk::make_error(sdk::errc::internal,
                                std::string{"extractive provider failed: "} + e.what()));
      return;
    }
    auto next = job->step(clock_type::now());
    if (next && (!timer || !timer->schedule(*next, job)))
      job->fail(sdk::make_error(sdk::errc::cancelled, "the provider shut down"));
  };
  if (!host_.pool().submit(std::move(work)))
    job->fail(sdk::make_error(sdk::errc::busy, "the host's blocking pool is full"));
  return job;
}

} // namespace quarry::plugins::llm_extractive
