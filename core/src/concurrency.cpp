// Adaptive concurrency (additive increase, multiplicative decrease).

#include "quarry/core/concurrency.hpp"

#include <algorithm>
#include <cmath>

namespace quarry::core {

adaptive_limit::adaptive_limit(int ceiling)
  : ceiling_(std::max(1, ceiling)), limit_(static_cast<double>(ceiling_)) {
  // nop
}

void adaptive_limit::on_rate_limited() noexcept {
  limit_ = std::max(1.0, limit_ / 2);
}

void adaptive_limit::on_success() noexcept {
  limit_ = std::min<double>(ceiling_, limit_ + 1.0 / limit_);
}

size_t adaptive_limit::slots() const noexcept {
  return static_cast<size_t>(std::max(1.0, std::floor(limit_)));
}

} // namespace quarry::core
