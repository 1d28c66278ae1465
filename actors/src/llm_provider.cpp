// The LLM provider actor.

#include "quarry/actors/llm_provider.hpp"

#include "quarry/actors/actor_failure.hpp"

#include "quarry/actors/atoms.hpp"
#include "quarry/core/call_queue.hpp"
#include "quarry/core/clock.hpp"
#include "actor_time.hpp"
#include "stats_json.hpp"
#include "quarry/core/duration.hpp"
#include "quarry/core/llm_json.hpp"
#include "quarry/core/retry.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace quarry::actors {

namespace {

using std::chrono::milliseconds;

} // namespace

// -- errors -------------------------------------------------------------------

caf::error to_caf_error(const sdk::error& x) {
  auto code = static_cast<uint8_t>(x.code);
  if (code == 0) // a CAF error with code 0 would mean "no error"
    code = static_cast<uint8_t>(sdk::errc::internal);
  // The SDK error travels whole in the context (a registered type).
  return caf::error{code, llm_error_category, caf::make_message(x)};
}

sdk::error from_caf_error(const caf::error& x) {
  if (!x)
    return sdk::make_error(sdk::errc::internal, "failed without a reason");
  if (x.category() == llm_error_category) {
    const auto& ctx = x.context();
    if (ctx.match_elements<sdk::error>())
      return ctx.get_as<sdk::error>(0);
    return sdk::make_error(static_cast<sdk::errc>(x.code()), "LLM call failed");
  }
  if (x == caf::sec::request_timeout)
    return sdk::make_error(sdk::errc::timeout, "the provider did not answer in time");
  if (x == caf::sec::request_receiver_down)
    return sdk::make_error(sdk::errc::network, "the provider actor is gone");
  return sdk::make_error(sdk::errc::internal, caf::to_string(x));
}

// -- the actor ----------------------------------------------------------------

namespace {

/// What a plugin's sink reports: one callback of one attempt of a call.
struct llm_sink_event {
  /// Which callback.
  enum kind_t : uint8_t { text, reasoning, tool, usage, done, failed };
  kind_t kind = text;
  /// Text or reasoning piece.
  std::string piece;
  /// Tool-call piece.
  sdk::tool_call_delta tool_piece;
  /// Usage so far.
  sdk::usage counts;
  /// The result (`done`).
  sdk::chat_result result;
  /// The failure (`failed`) and whether part of the answer had streamed.
  sdk::error failure;
  bool streamed = false;
};

/// Queues a plugin's callbacks for the provider actor. Runs on whatever
/// thread the plugin calls it from. The first event after a take() posts
/// `(llm_sink_atom, call, attempt)`; later ones join the queue until the
/// actor takes it, so a burst of callbacks costs one message.
class actor_sink final : public sdk::chat_sink {
public:
  actor_sink(llm_provider_full_actor target, uint64_t call, uint64_t generation)
    : target_(std::move(target)), call_(call), generation_(generation) {
    // nop
  }

  void on_text(std::string_view delta) override {
    post(llm_sink_event::text, [&](llm_sink_event& ev) { ev.piece.assign(delta); });
  }

  void on_reasoning(std::string_view delta) override {
    post(llm_sink_event::reasoning, [&](llm_sink_event& ev) { ev.piece.assign(delta); });
  }

  void on_tool_call(const sdk::tool_call_delta& delta) override {
    post(llm_sink_event::tool, [&](llm_sink_event& ev) { ev.tool_piece = delta; });
  }

  void on_usage(const sdk::usage& counts) override {
    post(llm_sink_event::usage, [&](llm_sink_event& ev) { ev.counts = counts; });
  }

  void on_done(const sdk::chat_result& result) override {
    post(llm_sink_event::done, [&](llm_sink_event& ev) { ev.result = result; });
  }

  void on_error(const sdk::error& failure, bool streamed) override {
    post(llm_sink_event::failed, [&](llm_sink_event& ev) {
      ev.failure = failure;
      ev.streamed = streamed;
    });
  }

  /// The events queued since the last call, oldest first.
  std::vector<llm_sink_event> take() {
    std::lock_guard<std::mutex> guard{mtx_};
    posted_ = false;
    return std::exchange(queue_, {});
  }

  /// The attempt is over for the actor: later events are dropped, and so is
  /// what was queued.
  void close() {
    std::lock_guard<std::mutex> guard{mtx_};
    closed_ = true;
    queue_.clear();
  }

private:
  template <class F>
  void post(llm_sink_event::kind_t kind, F fill) {
    llm_sink_event ev;
    ev.kind = kind;
    fill(ev);
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (closed_)
        return;
      queue_.push_back(std::move(ev));
      if (posted_)
        return;
      posted_ = true;
    }
    caf::anon_send(target_, llm_sink_atom::value, call_, generation_);
  }

  llm_provider_full_actor target_;
  uint64_t call_;
  uint64_t generation_;
  std::mutex mtx_;
  std::vector<llm_sink_event> queue_;
  // A message is on its way (until the actor takes the queue).
  bool posted_ = false;
  bool closed_ = false;
};

struct call_state {
  uint64_t key = 0;
  uint64_t external_id = 0;
  llm_listener_actor requester;
  caf::typed_response_promise<llm_reply> promise;
  sdk::chat_request request;
  int attempts = 0;
  uint64_t generation = 0;
  bool running = false;
  bool streamed = false;
  // A part of the answer (text other than white space, or a tool call)
  // reached the requester: no attempt follows, and `request` was let go.
  bool answered = false;
  bool usage_seen = false;
  int64_t estimated_tokens = 0;
  std::shared_ptr<sdk::chat_call> handle;
  // The running attempt's sink (closed when the attempt ends).
  std::shared_ptr<actor_sink> sink;
  // Silence of the running attempt (stall_timeout).
  core::stall_watch stall;
  core::clock::time_point deadline;
  // When the call arrived (its duration runs to its end, retries included).
  core::clock::time_point received;
};

struct provider_state {
  std::shared_ptr<sdk::llm_provider> provider;
  llm_actor_settings cfg;
  std::string default_model;
  uint64_t next_key = 1;
  std::unordered_map<uint64_t, call_state> calls;
  std::unordered_set<caf::actor_addr> monitored;
  // The policies (core), on the actor system's clock: the queue in front of
  // the adaptive concurrency limit and the rate limits, and retries.
  detail::actor_time time;
  std::optional<core::call_queue> queue;
  std::optional<core::retry_policy> retry;
  bool rate_tick_pending = false;
  // The watch timer (arm_watch): when the pending one fires (if any), and
  // its generation (an earlier one set since makes it stale).
  std::optional<core::clock::time_point> watch_due;
  uint64_t watch_generation = 0;
  // Counters.
  uint64_t started = 0;
  uint64_t succeeded = 0;
  uint64_t failed = 0;
  uint64_t retries = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
  // Calls cancelled (by their caller, a requester that went away, or the
  // shutdown); the durations of calls that ended otherwise, and the
  // failures by class.
  uint64_t cancelled = 0;
  detail::call_stats calls_stats{detail::llm_call_seconds_bounds()};
  // describe: the plugin's answer once it came (or what the timeout left),
  // whether the plugin was asked, and the requests waiting for it.
  std::optional<sdk::model_info> described;
  bool describing = false;
  std::vector<caf::typed_response_promise<sdk::model_info>> describe_waiting;

  static inline const char* name = "quarry.llm_provider";
};

using provider_actor_ptr = llm_provider_full_actor::stateful_pointer<provider_state>;

void try_start(provider_actor_ptr self);

// Keeps `info` as the model's facts and answers every waiting request.
void described(provider_actor_ptr self, sdk::model_info info) {
  auto& st = self->state;
  if (info.context_window < 0)
    info.context_window = 0;
  st.described = std::move(info);
  auto waiting = std::move(st.describe_waiting);
  st.describe_waiting.clear();
  for (auto& rp : waiting)
    rp.deliver(*st.described);
}

// Asks the plugin's describe() once; its answer comes back as a message.
void start_describe(provider_actor_ptr self) {
  auto& st = self->state;
  st.describing = true;
  self->delayed_send(self, llm_describe_timeout, llm_describe_timeout_atom::value);
  // A weak handle: the plugin may keep the callback after the actor ended.
  auto addr = self->address();
  try {
    st.provider->describe([addr](sdk::model_info info) {
      if (auto me = caf::actor_cast<llm_provider_full_actor>(addr))
        caf::anon_send(me, llm_described_atom::value, std::move(info));
    });
  } catch (const std::exception& ex) {
    spdlog::warn("llm {}: describe threw: {}; the context window is unknown", st.cfg.name,
                 ex.what());
    described(self, st.provider->info());
  } catch (...) {
    spdlog::warn("llm {}: describe threw; the context window is unknown", st.cfg.name);
    described(self, st.provider->info());
  }
}

// The attempt is over for the actor: its sink drops what comes later.
void close_sink(call_state& call) {
  if (call.sink) {
    call.sink->close();
    call.sink.reset();
  }
}

void finish_call(provider_actor_ptr self, uint64_t key) {
  auto& st = self->state;
  auto i = st.calls.find(key);
  if (i == st.calls.end())
    return;
  close_sink(i->second);
  if (i->second.running)
    st.queue->release();
  st.calls.erase(i);
  st.queue->remove(key);
}

void fail_call(provider_actor_ptr self, call_state& call, sdk::error err) {
  auto& st = self->state;
  ++st.failed;
  if (err.message.empty())
    err.message = sdk::to_string(err.code);
  if (err.code == sdk::errc::cancelled) {
    ++st.cancelled;
  } else {
    st.calls_stats.count_error(err.code);
    st.calls_stats.observe(call.received, st.time.now());
  }
  call.promise.deliver(to_caf_error(err));
  if (call.handle)
    call.handle->cancel();
  finish_call(self, call.key);
  try_start(self);
}

/// Ends every call for which `pred` holds as cancelled with `why`: its plugin
/// call is cancelled and its requester told. Starts nothing and counts no
/// failure (the caller decides what comes next).
template <class Predicate>
void cancel_calls(provider_actor_ptr self, Predicate pred, const char* why) {
  auto& st = self->state;
  std::vector<uint64_t> keys;
  for (auto& [key, call] : st.calls)
    if (pred(call))
      keys.push_back(key);
  for (auto key : keys) {
    auto& call = st.calls[key];
    if (call.handle)
      call.handle->cancel();
    ++st.cancelled;
    call.promise.deliver(to_caf_error(sdk::make_error(sdk::errc::cancelled, why)));
    finish_call(self, key);
  }
}

void on_attempt_failed(provider_actor_ptr self, call_state& call, sdk::error err, bool streamed);

// The calls' limits (each call's deadline, the silence of each running
// attempt) share one timer, set for the first of them that is due and
// again after it fired. Two timers per call woke the actor clock's thread
// for each of them; one per provider wakes it once per due limit. Setting
// it looks at the one limit that is new (`due`), not at every call: with
// a thousand calls in flight a scan per call start cost more than the
// timers did.
void arm_watch(provider_actor_ptr self, core::clock::time_point due) {
  auto& st = self->state;
  if (st.watch_due && *st.watch_due <= due)
    return;
  st.watch_due = due;
  auto wait = std::max<caf::timespan>(
    std::chrono::duration_cast<caf::timespan>(due - st.time.now()), std::chrono::milliseconds{1});
  self->delayed_send(self, wait, llm_watch_atom::value, ++st.watch_generation);
}

// The watch timer fired: calls past their deadline fail, attempts silent
// for stall_timeout fail (and may be retried); then the next limit.
void watch(provider_actor_ptr self) {
  auto& st = self->state;
  st.watch_due.reset();
  auto now = st.time.now();
  std::vector<uint64_t> late;
  std::vector<uint64_t> stalled;
  for (const auto& entry : st.calls) {
    const auto& call = entry.second;
    if (now >= call.deadline)
      late.push_back(entry.first);
    else if (call.running && call.stall.stalled())
      stalled.push_back(entry.first);
  }
  for (auto key : late) {
    auto i = st.calls.find(key);
    if (i == st.calls.end())
      continue;
    if (i->second.handle)
      i->second.handle->cancel();
    fail_call(self, i->second,
              sdk::make_error(sdk::errc::timeout, "no complete answer within "
                                                    + core::format_duration(st.cfg.total_timeout)));
  }
  for (auto key : stalled) {
    auto i = st.calls.find(key);
    if (i == st.calls.end() || !i->second.running || !i->second.stall.stalled())
      continue;
    auto& call = i->second;
    if (call.handle)
      call.handle->cancel();
    on_attempt_failed(self, call, call.stall.failure(), false);
  }
  // The next limit of the calls that are left.
  if (st.calls.empty())
    return;
  now = st.time.now();
  auto due = core::clock::time_point::max();
  for (const auto& entry : st.calls) {
    const auto& call = entry.second;
    due = std::min(due, call.deadline);
    if (call.running)
      due = std::min(due, now + call.stall.remaining());
  }
  arm_watch(self, due);
}

void start_attempt(provider_actor_ptr self, call_state& call) {
  auto& st = self->state;
  ++call.attempts;
  ++call.generation;
  ++st.started;
  call.running = true;
  call.stall = core::stall_watch{st.cfg.stall_timeout, st.time};
  close_sink(call);
  call.sink = std::make_shared<actor_sink>(llm_provider_full_actor{self}, call.key,
                                           call.generation);
  arm_watch(self, st.time.now() + st.cfg.stall_timeout);
  try {
    call.handle = st.provider->chat(call.request, call.sink);
  } catch (const std::exception& ex) {
    // Plugins report errors through the sink; a throw is a plugin bug.
    call.running = false;
    st.queue->release();
    fail_call(self, call,
              sdk::make_error(sdk::errc::internal, std::string{"provider threw: "} + ex.what()));
  } catch (...) {
    call.running = false;
    st.queue->release();
    fail_call(self, call,
              sdk::make_error(sdk::errc::internal, "provider threw a non-standard exception"));
  }
}

void try_start(provider_actor_ptr self) {
  auto& st = self->state;
  for (;;) {
    auto step = st.queue->next();
    if (!step.start) {
      if (step.wait.count() > 0 && !st.rate_tick_pending) {
        st.rate_tick_pending = true;
        self->delayed_send(self, step.wait, llm_rate_atom::value);
      }
      return;
    }
    auto i = st.calls.find(*step.start);
    if (i == st.calls.end()) { // finish_call removes its key: not expected
      st.queue->release();
      continue;
    }
    start_attempt(self, i->second);
  }
}

// The cost of a reply and how it is known: the configured prices, then the
// shipped table (core::price_for); nothing for the offline provider.
void price_reply(const provider_state& st, llm_reply& reply) {
  if (st.cfg.offline) {
    reply.basis = core::cost_basis::offline;
    return;
  }
  auto price = core::price_for(st.cfg, reply.result.model);
  if (price.source == core::price_source::none) {
    reply.basis = core::cost_basis::unpriced;
    return;
  }
  reply.basis = core::cost_basis::priced;
  reply.cost_usd = core::cost_usd(price.prices, reply.result.usage.input_tokens,
                                  reply.result.usage.output_tokens);
}

// A part of the answer reached the requester (`piece`: a text piece, or
// none for a tool call). No attempt can follow it (retry_policy retries a
// call that streamed nothing, or an empty answer: white space and no tool
// call), so the request kept for retries is let go: its messages are a copy
// of the requester's history, held for the rest of a call that may stream
// for minutes. The model's name stays for the reply.
void on_answer_piece(call_state& call, const std::string* piece) {
  if (call.answered)
    return;
  if (piece != nullptr && piece->find_first_not_of(" \t\r\n") == std::string::npos)
    return;
  call.answered = true;
  std::vector<sdk::chat_message>{}.swap(call.request.messages);
  std::vector<sdk::tool_definition>{}.swap(call.request.tools);
}

// Calls whose request is kept for an attempt to come: queued, running
// before their answer began, or waiting to be tried again.
size_t requests_held(const provider_state& st) {
  return static_cast<size_t>(std::count_if(st.calls.begin(), st.calls.end(),
                                           [](const auto& kv) { return !kv.second.answered; }));
}

// Handles a failed attempt: retry if allowed, else fail the call.
void on_attempt_failed(provider_actor_ptr self, call_state& call, sdk::error err,
                       bool plugin_streamed) {
  auto& st = self->state;
  call.running = false;
  call.handle.reset();
  close_sink(call);
  st.queue->release();
  if (err.code == sdk::errc::rate_limited)
    st.queue->on_rate_limited();
  // An empty answer streamed nothing of an answer (reasoning at most): it
  // is retried like one that streamed nothing.
  // An answer that began is never tried again, whatever the plugin calls
  // its failure (its request is gone, and the requester has its text).
  auto streamed = call.answered
                  || ((call.streamed || plugin_streamed) && err.code != sdk::errc::empty_response);
  auto decision = st.retry->after_failure(std::move(err), call.attempts, streamed, call.deadline);
  if (decision.retry) {
    ++st.retries;
    spdlog::info("llm {}: {} (attempt {}), retrying in {} ms", st.cfg.name,
                 sdk::to_string(decision.failure), call.attempts, decision.delay.count());
    self->delayed_send(self, decision.delay, llm_retry_atom::value, call.key);
    try_start(self);
    return;
  }
  fail_call(self, call, std::move(decision.failure));
}

// Handles what the running attempt's sink queued, oldest first. The pieces
// go to the requester as one message, ahead of the call's reply or error.
void take_events(provider_actor_ptr self, call_state& call) {
  auto& s = self->state;
  auto events = call.sink->take();
  if (events.empty())
    return;
  call.stall.activity();
  const auto key = call.key;
  const auto generation = call.generation;
  const auto external_id = call.external_id;
  auto requester = call.requester;
  llm_deltas pieces;
  auto send_pieces = [&] {
    if (pieces.empty())
      return;
    self->send(requester, delta_atom::value, std::exchange(pieces, {}));
  };
  auto piece = [&](delta_kind kind) -> llm_delta& {
    auto& d = pieces.emplace_back();
    d.call_id = external_id;
    d.kind = kind;
    return d;
  };
  for (auto& ev : events) {
    // A done or failed event ends the attempt: what follows it is dropped.
    auto i = s.calls.find(key);
    if (i == s.calls.end() || i->second.generation != generation || !i->second.running)
      break;
    auto& c = i->second;
    switch (ev.kind) {
      case llm_sink_event::text:
      case llm_sink_event::reasoning:
        c.streamed = true;
        if (ev.kind == llm_sink_event::text)
          on_answer_piece(c, &ev.piece);
        piece(ev.kind == llm_sink_event::text ? delta_kind::text : delta_kind::reasoning).text
          = std::move(ev.piece);
        break;
      case llm_sink_event::tool:
        c.streamed = true;
        on_answer_piece(c, nullptr);
        piece(delta_kind::tool_call).tool = std::move(ev.tool_piece);
        break;
      case llm_sink_event::usage:
        piece(delta_kind::usage).counts = ev.counts;
        break;
      case llm_sink_event::done: {
        send_pieces();
        llm_reply reply;
        reply.call_id = external_id;
        reply.result = std::move(ev.result);
        if (reply.result.model.empty())
          reply.result.model = c.request.model.empty() ? s.default_model : c.request.model;
        reply.provider = s.cfg.name;
        reply.attempts = c.attempts;
        price_reply(s, reply);
        s.input_tokens += reply.result.usage.input_tokens;
        s.output_tokens += reply.result.usage.output_tokens;
        s.cost_usd += reply.cost_usd;
        ++s.succeeded;
        s.calls_stats.observe(c.received, s.time.now());
        // Adaptive concurrency: creep back up on success.
        s.queue->on_success();
        c.promise.deliver(std::move(reply));
        c.handle.reset();
        finish_call(self, key);
        try_start(self);
        break;
      }
      case llm_sink_event::failed:
        send_pieces();
        on_attempt_failed(self, c, std::move(ev.failure), ev.streamed);
        break;
    }
  }
  send_pieces();
}

llm_provider_full_actor::behavior_type provider_impl(provider_actor_ptr self,
                                                     std::shared_ptr<sdk::llm_provider> provider,
                                                     llm_actor_settings cfg) {
  auto& st = self->state;
  st.provider = std::move(provider);
  st.default_model = st.provider->info().model;
  st.cfg = std::move(cfg);
  st.time = detail::actor_time{self->clock()};
  st.queue.emplace(st.cfg.max_concurrency, st.cfg.requests_per_minute, st.cfg.tokens_per_minute,
                   st.time);
  st.retry.emplace(core::retry_settings{st.cfg.max_retries, st.cfg.retry_base, st.cfg.retry_max},
                   st.time);
  detail::on_exception_fail_pending(self, "LLM provider", [self](const std::string& why) {
    auto& s = self->state;
    for (auto& [key, call] : s.calls) {
      if (call.handle)
        call.handle->cancel();
      close_sink(call);
      s.calls_stats.count_error(sdk::errc::internal);
      call.promise.deliver(
        to_caf_error(sdk::make_error(sdk::errc::internal, "the LLM provider failed: " + why)));
    }
    s.calls.clear();
    s.queue->clear();
  });
  self->set_down_handler([=](caf::down_msg& dm) {
    // The requester is gone: cancel its calls.
    auto& s = self->state;
    s.monitored.erase(dm.source);
    cancel_calls(
      self, [&](const call_state& call) { return call.requester.address() == dm.source; },
      "requester is gone");
    try_start(self);
  });
  return {
    [=](chat_atom, llm_call& req) -> caf::result<llm_reply> {
      auto& s = self->state;
      // Read the sender first: making the promise takes it out of the
      // current message.
      // Every requester implements llm_listener_actor (see
      // spawn_llm_provider); the sender of a request is untyped in CAF.
      auto requester = caf::actor_cast<llm_listener_actor>(self->current_sender());
      auto rp = self->make_response_promise<llm_reply>();
      auto key = s.next_key++;
      auto& call = s.calls[key];
      call.key = key;
      call.external_id = req.id;
      call.requester = requester;
      call.promise = rp;
      call.request = std::move(req.request);
      // The estimate (the request's text and tool schemas measured) counts
      // only against a token limit.
      if (s.cfg.tokens_per_minute > 0)
        call.estimated_tokens = core::estimate_call_tokens(call.request);
      call.deadline = core::time_after(s.time, s.cfg.total_timeout);
      call.received = s.time.now();
      if (requester && s.monitored.insert(requester.address()).second)
        self->monitor(requester);
      arm_watch(self, call.deadline);
      s.queue->push_back(key, call.estimated_tokens);
      try_start(self);
      return rp;
    },
    [=](cancel_atom, uint64_t id) {
      auto& s = self->state;
      auto sender = self->current_sender();
      for (auto& [key, call] : s.calls) {
        if (call.external_id == id && (!sender || call.requester.address() == sender->address())) {
          if (call.handle)
            call.handle->cancel();
          fail_call(self, call, sdk::make_error(sdk::errc::cancelled, "cancelled by the caller"));
          return;
        }
      }
    },
    [=](stats_atom) -> std::string {
      auto& s = self->state;
      return nlohmann::json{
        {"provider", s.cfg.name},
        {"calls_started", s.started},
        {"succeeded", s.succeeded},
        {"failed", s.failed},
        {"retries", s.retries},
        {"active", s.queue->running()},
        {"queued", s.queue->waiting()},
        {"requests_held", requests_held(s)},
        {"concurrency_limit", std::floor(s.queue->limit().value())},
        {"input_tokens", s.input_tokens},
        {"output_tokens", s.output_tokens},
        {"cost_usd", s.cost_usd},
        {"cancelled", s.cancelled},
        {"outcomes",
         {{"ok", s.succeeded}, {"error", s.calls_stats.error_count()}, {"cancelled", s.cancelled}}},
        {"errors", s.calls_stats.errors_json()},
        {"call_seconds", s.calls_stats.histogram_json()}}
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    },
    [=](llm_sink_atom, uint64_t key, uint64_t generation) {
      auto& s = self->state;
      auto i = s.calls.find(key);
      if (i == s.calls.end() || i->second.generation != generation || !i->second.running
          || !i->second.sink)
        return; // a cancelled or superseded attempt
      take_events(self, i->second);
    },
    [=](llm_watch_atom, uint64_t generation) {
      // An earlier timer set since makes this one stale.
      if (generation == self->state.watch_generation)
        watch(self);
    },
    [=](llm_retry_atom, uint64_t key) {
      auto& s = self->state;
      auto i = s.calls.find(key);
      if (i == s.calls.end())
        return;
      s.queue->push_front(key, i->second.estimated_tokens);
      try_start(self);
    },
    [=](llm_rate_atom) {
      self->state.rate_tick_pending = false;
      try_start(self);
    },
    [=](describe_atom) -> caf::result<sdk::model_info> {
      auto& s = self->state;
      if (s.described)
        return *s.described;
      auto rp = self->make_response_promise<sdk::model_info>();
      s.describe_waiting.push_back(rp);
      if (!s.describing)
        start_describe(self);
      return rp;
    },
    [=](llm_described_atom, sdk::model_info& info) {
      // A late answer (after the timeout) replaces the guess: later
      // requests get what the server said.
      described(self, std::move(info));
    },
    [=](llm_describe_timeout_atom) {
      auto& s = self->state;
      if (s.described)
        return;
      spdlog::warn("llm {}: the plugin did not tell its model's facts within {} s; "
                   "its context window counts as unknown",
                   s.cfg.name, llm_describe_timeout.count());
      // The configured facts (a window the plugin has without asking stays).
      described(self, s.provider->info());
    },
    [=](stop_atom) {
      cancel_calls(
        self, [](const call_state&) { return true; }, "Quarry is shutting down");
      self->quit();
    },
  };
}

} // namespace

llm_provider_actor spawn_llm_provider(caf::actor_system& sys,
                                      std::shared_ptr<sdk::llm_provider> provider,
                                      llm_actor_settings settings) {
  return sys.spawn(provider_impl, std::move(provider), std::move(settings));
}

} // namespace quarry::actors
