// The queue of an LLM provider instance's calls.

#include "quarry/core/call_queue.hpp"

#include <algorithm>

namespace quarry::core {

call_queue::call_queue(int max_concurrency, double requests_per_minute, double tokens_per_minute,
                       const clock& clk)
  : limit_(max_concurrency), rate_(requests_per_minute, tokens_per_minute, clk) {
  // nop
}

void call_queue::push_back(uint64_t key, int64_t tokens) {
  waiting_.emplace_back(key, tokens);
}

void call_queue::push_front(uint64_t key, int64_t tokens) {
  waiting_.emplace_front(key, tokens);
}

bool call_queue::remove(uint64_t key) {
  auto i = std::remove_if(waiting_.begin(), waiting_.end(),
                          [key](const auto& x) { return x.first == key; });
  if (i == waiting_.end())
    return false;
  waiting_.erase(i, waiting_.end());
  return true;
}

call_queue::step call_queue::next() {
  step out;
  if (waiting_.empty() || running_ >= limit_.slots())
    return out;
  auto [key, tokens] = waiting_.front();
  out.wait = rate_.wait_for(tokens);
  if (out.wait.count() > 0)
    return out;
  waiting_.pop_front();
  rate_.consume(tokens);
  ++running_;
  out.start = key;
  return out;
}

void call_queue::release() noexcept {
  if (running_ > 0)
    --running_;
}

} // namespace quarry::core
