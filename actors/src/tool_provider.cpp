// The tool provider actor.

#include "actor_time.hpp"
#include "stats_json.hpp"
#include "quarry/actors/tool_provider.hpp"

#include "quarry/actors/actor_failure.hpp"

#include "quarry/core/call_queue.hpp"
#include "quarry/core/clock.hpp"
#include "quarry/core/retry.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/core/tool_args.hpp"

#include "quarry/actors/atoms.hpp"
#include "quarry/core/duration.hpp"
#include "quarry/core/llm_json.hpp"
#include "quarry/sdk/ttl_cache.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace quarry::actors {

namespace {

struct pending_run {
  uint64_t key = 0;
  uint64_t id = 0;
  /// Parsed once: by the requester (tool_call_msg::parsed) or here.
  std::shared_ptr<const nlohmann::json> arguments;
  std::string cache_key;
  caf::typed_response_promise<tool_reply> promise;
  std::shared_ptr<sdk::tool_run> handle;
  bool running = false;
  // When the first attempt started: the run's duration and its deadline
  // (`timeout`, retries included) count from there.
  core::clock::time_point started;
  core::clock::time_point deadline;
  // Attempts started so far.
  int attempts = 0;
  // Who asked (its end cancels the run); none for an anonymous request.
  caf::actor_addr requester;
};

/// Every call's outcome (see spawn_tool_provider).
struct tool_counters {
  uint64_t calls = 0;
  uint64_t runs = 0;
  uint64_t ok = 0;
  uint64_t cached = 0;
  uint64_t error = 0;
  uint64_t timeout = 0;
  uint64_t cancelled = 0;
};

struct tool_state {
  std::shared_ptr<sdk::tool> tool;
  tool_actor_settings cfg;
  uint64_t next_key = 1;
  std::unordered_map<uint64_t, pending_run> runs;
  // Runs waiting for one of `max_concurrency` slots (core; no rate limits).
  detail::actor_time time;
  std::optional<core::call_queue> queue;
  // Results of identical runs (the SDK's cache); none when caching is off.
  std::unique_ptr<sdk::ttl_cache<sdk::tool_result>> cache;
  tool_counters counts;
  detail::call_stats calls_stats{detail::tool_call_seconds_bounds()};
  // Retries of retryable failures: the LLM providers' policy, on the actor
  // system's clock.
  std::optional<core::retry_policy> retry;
  uint64_t retries = 0;
  // Requesters watched for their end.
  std::unordered_set<caf::actor_addr> monitored;

  static inline const char* name = "quarry.tool_provider";
};

using tool_actor_ptr = tool_provider_full_actor::stateful_pointer<tool_state>;

void start_runs(tool_actor_ptr self) {
  auto& st = self->state;
  for (auto step = st.queue->next(); step.start; step = st.queue->next()) {
    auto key = *step.start;
    auto i = st.runs.find(key);
    if (i == st.runs.end()) {
      st.queue->release();
      continue;
    }
    auto& run = i->second;
    run.running = true;
    if (++run.attempts == 1) {
      // One time limit for the run, retries included.
      run.started = st.time.now();
      run.deadline = core::time_after(st.time, st.cfg.timeout);
      self->delayed_send(self, st.cfg.timeout, tool_timeout_atom::value, key);
    }
    ++st.counts.runs;
    tool_provider_full_actor me{self};
    try {
      run.handle = st.tool->run(*run.arguments, [me, key](sdk::tool_result r) {
        caf::anon_send(me, tool_done_atom::value, tool_done_event{key, std::move(r)});
      });
    } catch (const std::exception& ex) {
      sdk::tool_result r;
      r.llm_text = "The tool failed unexpectedly.";
      r.failure = sdk::make_error(sdk::errc::internal, std::string{"tool threw: "} + ex.what());
      caf::anon_send(me, tool_done_atom::value, tool_done_event{key, std::move(r)});
    }
  }
}

// Counts a call that ended with `result` (not from the cache).
void count_outcome(tool_state& st, const sdk::tool_result& result, bool timed_out) {
  if (timed_out) {
    ++st.counts.timeout;
    st.calls_stats.count_error(sdk::errc::timeout);
  } else if (!result.failure) {
    ++st.counts.ok;
  } else if (result.failure->code == sdk::errc::cancelled) {
    ++st.counts.cancelled;
  } else {
    ++st.counts.error;
    st.calls_stats.count_error(result.failure->code);
  }
}

void finish(tool_actor_ptr self, uint64_t key, sdk::tool_result result, bool cacheable,
            bool timed_out = false) {
  auto& st = self->state;
  auto i = st.runs.find(key);
  if (i == st.runs.end())
    return;
  auto& run = i->second;
  if (run.running) {
    st.queue->release();
    st.calls_stats.observe(run.started, st.time.now());
  } else {
    st.queue->remove(key);
  }
  count_outcome(st, result, timed_out);
  if (cacheable && !result.failure && st.cache)
    st.cache->put(run.cache_key, result);
  run.promise.deliver(tool_reply{run.id, std::move(result), false});
  st.runs.erase(i);
  start_runs(self);
}

// Handles the plugin's answer to the running attempt of run `key`: a
// retryable failure waits for another attempt if the policy allows one;
// anything else finishes the run.
void on_done(tool_actor_ptr self, uint64_t key, sdk::tool_result result) {
  auto& st = self->state;
  auto i = st.runs.find(key);
  if (i == st.runs.end() || !i->second.running)
    return; // a run that timed out or was cancelled
  auto& run = i->second;
  if (!result.failure || !result.failure->retryable()) {
    finish(self, key, std::move(result), true);
    return;
  }
  auto decision = st.retry->after_failure(*result.failure, run.attempts, false, run.deadline);
  if (decision.retry) {
    ++st.retries;
    spdlog::info("tool {}: {} (attempt {}), retrying in {} ms", st.cfg.name,
                 sdk::to_string(decision.failure), run.attempts, decision.delay.count());
    // The slot goes to others while this run waits.
    run.running = false;
    run.handle.reset();
    st.queue->release();
    self->delayed_send(self, decision.delay, tool_retry_atom::value, key);
    start_runs(self);
    return;
  }
  if (run.attempts <= st.cfg.max_retries)
    decision.failure.message += " (not retried: the wait would end after this "
                                "run's time limit of "
                                + core::format_duration(st.cfg.timeout) + ")";
  result.failure = std::move(decision.failure);
  if (run.attempts > 1)
    result.llm_text += "\n(The " + st.tool->name() + " call was tried "
                       + std::to_string(run.attempts) + " times.)";
  finish(self, key, std::move(result), true);
}

// Ends every run that `requester` asked for: it is gone, nobody reads the
// answers.
void cancel_runs_of(tool_actor_ptr self, const caf::actor_addr& requester) {
  auto& st = self->state;
  std::vector<uint64_t> keys;
  for (const auto& [key, run] : st.runs)
    if (run.requester == requester)
      keys.push_back(key);
  for (auto key : keys) {
    auto i = st.runs.find(key);
    if (i == st.runs.end())
      continue;
    if (i->second.handle)
      i->second.handle->cancel();
    sdk::tool_result r;
    r.llm_text = "The " + st.tool->name() + " call was cancelled.";
    r.failure = sdk::make_error(sdk::errc::cancelled, "the requester is gone");
    finish(self, key, std::move(r), false);
  }
}

tool_provider_full_actor::behavior_type
tool_impl(tool_actor_ptr self, std::shared_ptr<sdk::tool> tool, tool_actor_settings cfg) {
  self->state.tool = std::move(tool);
  self->state.cfg = std::move(cfg);
  self->state.time = detail::actor_time{self->clock()};
  self->state.queue.emplace(self->state.cfg.max_concurrency, 0, 0, self->state.time);
  self->state.retry.emplace(core::retry_settings{self->state.cfg.max_retries,
                                                 self->state.cfg.retry_base,
                                                 self->state.cfg.retry_max},
                            self->state.time);
  self->set_down_handler([self](caf::down_msg& dm) {
    self->state.monitored.erase(dm.source);
    cancel_runs_of(self, dm.source);
  });
  // One cache per call: a tool that caches what it fetched itself (per query,
  // per page) takes the limits; the others' whole calls are cached here, on
  // the actor system's clock, as the runs' timers and retries.
  bool own_cache = false;
  try {
    own_cache = self->state.tool->own_cache(self->state.cfg.cache_ttl,
                                            self->state.cfg.cache_entries);
  } catch (const std::exception& e) {
    spdlog::warn("tool {}: its own cache could not be set up ({}); calls are cached by the host",
                 self->state.cfg.name, e.what());
  } catch (...) {
    spdlog::warn("tool {}: its own cache could not be set up; calls are cached by the host",
                 self->state.cfg.name);
  }
  if (!own_cache && self->state.cfg.cache_ttl.count() > 0 && self->state.cfg.cache_entries > 0)
    self->state.cache = std::make_unique<sdk::ttl_cache<sdk::tool_result>>(
      self->state.cfg.cache_ttl, self->state.cfg.cache_entries,
      [time = &self->state.time] { return time->now(); });
  detail::on_exception_fail_pending(self, "tool provider", [self](const std::string& why) {
    auto& st = self->state;
    for (auto& [key, run] : st.runs) {
      if (run.handle)
        run.handle->cancel();
      sdk::tool_result r;
      r.llm_text = "The tool failed unexpectedly.";
      r.failure = sdk::make_error(sdk::errc::internal, "the tool provider failed: " + why);
      count_outcome(st, r, false);
      run.promise.deliver(tool_reply{run.id, std::move(r), false});
    }
    st.runs.clear();
    st.queue->clear();
  });
  return {
    [=](run_atom, tool_call_msg& call) -> caf::result<tool_reply> {
      auto& st = self->state;
      ++st.counts.calls;
      // Parsed once: by the requester, or here. The key of the cache is the
      // arguments as nlohmann's dump writes them (equal arguments, equal
      // keys), which is the text a requester sends with its parse.
      auto args = std::move(call.parsed);
      std::string cache_key;
      if (args) {
        cache_key = std::move(call.arguments);
      } else {
        auto parsed = core::parse_tool_arguments(call.arguments);
        if (auto* why = std::get_if<std::string>(&parsed)) {
          sdk::tool_result r;
          r.llm_text = *why;
          r.failure = sdk::make_error(sdk::errc::bad_request, *why);
          count_outcome(st, r, false);
          return tool_reply{call.id, std::move(r), false};
        }
        args = std::make_shared<const nlohmann::json>(std::get<nlohmann::json>(std::move(parsed)));
        cache_key = args->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
      if (st.cache)
        if (auto hit = st.cache->get(cache_key)) {
          ++st.counts.cached;
          return tool_reply{call.id, std::move(*hit), true};
        }
      // Read the sender before the promise takes the current message.
      auto sender = caf::actor_cast<caf::actor>(self->current_sender());
      auto rp = self->make_response_promise<tool_reply>();
      auto key = st.next_key++;
      auto& run = st.runs[key];
      run.key = key;
      run.id = call.id;
      run.arguments = std::move(args);
      run.cache_key = std::move(cache_key);
      run.promise = rp;
      if (sender) {
        run.requester = sender.address();
        if (st.monitored.insert(run.requester).second)
          self->monitor(sender);
      }
      st.queue->push_back(key, 0);
      start_runs(self);
      return rp;
    },
    [=](tool_done_atom, tool_done_event& ev) { on_done(self, ev.key, std::move(ev.result)); },
    [=](tool_retry_atom, uint64_t key) {
      auto& st = self->state;
      auto i = st.runs.find(key);
      if (i == st.runs.end() || i->second.running)
        return; // timed out or cancelled while it waited
      st.queue->push_front(key, 0);
      start_runs(self);
    },
    [=](tool_timeout_atom, uint64_t key) {
      // The run's one time limit: running, waiting for a retry or queued
      // again, it ends now.
      auto& st = self->state;
      auto i = st.runs.find(key);
      if (i == st.runs.end() || i->second.attempts == 0)
        return;
      if (i->second.handle)
        i->second.handle->cancel();
      finish(self, key, core::tool_timeout_result(st.tool->name(), st.cfg.timeout), false, true);
    },
    [=](stats_atom) -> std::string {
      auto& st = self->state;
      const auto& c = st.counts;
      return nlohmann::json{{"tool", st.cfg.name},
                            {"calls", c.calls},
                            {"runs", c.runs},
                            {"active", st.queue->running()},
                            {"queued", st.queue->waiting()},
                            {"outcomes",
                             {{"ok", c.ok},
                              {"cached", c.cached},
                              {"error", c.error},
                              {"timeout", c.timeout},
                              {"cancelled", c.cancelled}}},
                            {"errors", st.calls_stats.errors_json()},
                            {"call_seconds", st.calls_stats.histogram_json()},
                            {"retries", st.retries}}
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    },
    [=](stop_atom) {
      auto& st = self->state;
      for (auto& [key, run] : st.runs) {
        if (run.handle)
          run.handle->cancel();
        sdk::tool_result r;
        r.llm_text = "Quarry is shutting down.";
        r.failure = sdk::make_error(sdk::errc::cancelled, r.llm_text);
        ++st.counts.cancelled;
        run.promise.deliver(tool_reply{run.id, std::move(r), false});
      }
      st.runs.clear();
      self->quit();
    },
  };
}

} // namespace

tool_provider_actor spawn_tool_provider(caf::actor_system& sys, std::shared_ptr<sdk::tool> tool,
                                        tool_actor_settings settings) {
  return sys.spawn(tool_impl, std::move(tool), std::move(settings));
}

} // namespace quarry::actors
