// The parallel limit of research agents.

#include "quarry/core/agent_dispatch.hpp"

#include <algorithm>

namespace quarry::core {

agent_dispatch::agent_dispatch(int limit) : limit_(std::max(1, limit)) {
  // nop
}

void agent_dispatch::reset(int limit) {
  limit_ = std::max(1, limit);
  calls_.clear();
}

size_t agent_dispatch::add() {
  calls_.push_back(status::waiting);
  return calls_.size() - 1;
}

std::vector<size_t> agent_dispatch::start() {
  std::vector<size_t> out;
  auto busy = running();
  for (size_t i = 0; i < calls_.size() && busy < static_cast<size_t>(limit_); ++i)
    if (calls_[i] == status::waiting) {
      calls_[i] = status::running;
      out.push_back(i);
      ++busy;
    }
  return out;
}

bool agent_dispatch::finish(size_t i) {
  if (i >= calls_.size() || calls_[i] == status::finished)
    return false;
  calls_[i] = status::finished;
  return true;
}

std::vector<size_t> agent_dispatch::drop_waiting() {
  std::vector<size_t> out;
  for (size_t i = 0; i < calls_.size(); ++i)
    if (calls_[i] == status::waiting) {
      calls_[i] = status::finished;
      out.push_back(i);
    }
  return out;
}

void agent_dispatch::finish_all() {
  std::fill(calls_.begin(), calls_.end(), status::finished);
}

agent_dispatch::status agent_dispatch::at(size_t i) const {
  return i < calls_.size() ? calls_[i] : status::finished;
}

size_t agent_dispatch::running() const noexcept {
  return static_cast<size_t>(std::count(calls_.begin(), calls_.end(), status::running));
}

size_t agent_dispatch::waiting() const noexcept {
  return static_cast<size_t>(std::count(calls_.begin(), calls_.end(), status::waiting));
}

bool agent_dispatch::all_finished() const noexcept {
  return std::all_of(calls_.begin(), calls_.end(), [](status s) { return s == status::finished; });
}

} // namespace quarry::core
