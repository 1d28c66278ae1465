// Metrics in the Prometheus text format 0.0.4: a thread-safe registry of
// counters, gauges and histograms, each a family with fixed label names
// whose children are told apart by their label values.
//
//   core::metrics_registry reg;
//   auto* calls = std::get<core::counter_family*>(
//     reg.add_counter("quarry_llm_calls_total", "LLM calls.", {"provider"}));
//   calls->with({"openai"}).inc();
//   std::string text = reg.render(); // for GET /metrics
//
// Families live as long as the registry; children as long as their family,
// so references to them may be kept and used from any thread.

#pragma once

#include "quarry/sdk/types.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::core {

/// A value that only goes up.
class metric_counter {
public:
  /// Adds `amount`; negative amounts and NaN are ignored.
  void inc(double amount = 1) noexcept;
  double value() const noexcept;

private:
  std::atomic<double> value_{0};
};

/// A value that goes up and down.
class metric_gauge {
public:
  void set(double value) noexcept;
  void inc(double amount = 1) noexcept;
  void dec(double amount = 1) noexcept;
  double value() const noexcept;

private:
  std::atomic<double> value_{0};
};

/// Counts observations in buckets (cumulative upper bounds, plus +Inf), with
/// their sum and count.
class metric_histogram {
public:
  explicit metric_histogram(std::shared_ptr<const std::vector<double>> bounds);

  /// Records one observation (NaN is ignored).
  void observe(double value) noexcept;

  /// A consistent copy: per-bucket counts (not cumulative; the last one is
  /// the +Inf bucket), the sum and the count.
  struct snapshot {
    std::vector<uint64_t> counts;
    double sum = 0;
    uint64_t count = 0;
  };
  snapshot read() const;

  /// Adds the observations of another histogram with the same buckets
  /// (e.g. counted elsewhere and read from its snapshot). Returns false,
  /// adding nothing, when the counts do not match the buckets (one per
  /// bound plus +Inf) or their total is not `count`.
  bool add(const snapshot& other) noexcept;

  const std::vector<double>& bounds() const noexcept {
    return *bounds_;
  }

private:
  std::shared_ptr<const std::vector<double>> bounds_;
  mutable std::mutex mtx_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

/// The most children one family holds; with() beyond it returns a child
/// that is not rendered (label values must come from small, fixed sets).
inline constexpr size_t max_metric_series = 10'000;

namespace detail {

/// What the registry needs of every family.
class metric_family_base {
public:
  metric_family_base(std::string name, std::string help, std::string type,
                     std::vector<std::string> label_names);
  virtual ~metric_family_base() = default;

  const std::string& name() const noexcept {
    return name_;
  }
  const std::string& type() const noexcept {
    return type_;
  }
  const std::vector<std::string>& label_names() const noexcept {
    return label_names_;
  }

  /// Appends the family's HELP and TYPE lines and its samples.
  void render(std::string& out) const;

protected:
  /// Appends the samples of one child.
  virtual void render_child(std::string& out, const std::vector<std::string>& values,
                            const void* child) const = 0;
  /// The children, sorted by label values (under mtx_).
  virtual std::vector<std::pair<std::vector<std::string>, const void*>> children() const = 0;

  /// Makes the values exactly as many as the label names (missing ones are
  /// empty, extra ones dropped).
  std::vector<std::string> fit(std::vector<std::string> values) const;

  std::string name_;
  std::string help_;
  std::string type_;
  std::vector<std::string> label_names_;
  mutable std::mutex mtx_;
};

template <class Child>
class metric_family : public metric_family_base {
public:
  using metric_family_base::metric_family_base;

  /// The child with these label values (in the order of the label names),
  /// made on first use.
  Child& with(std::vector<std::string> values = {}) {
    auto key = fit(std::move(values));
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = children_.find(key);
    if (i != children_.end())
      return *i->second;
    if (children_.size() >= max_metric_series) {
      if (!overflow_)
        overflow_ = make_child();
      return *overflow_;
    }
    auto [j, added] = children_.emplace(std::move(key), make_child());
    (void)added;
    return *j->second;
  }

protected:
  virtual std::unique_ptr<Child> make_child() const = 0;

  std::vector<std::pair<std::vector<std::string>, const void*>> children() const override {
    std::vector<std::pair<std::vector<std::string>, const void*>> out;
    std::lock_guard<std::mutex> guard{mtx_};
    out.reserve(children_.size());
    for (const auto& [key, child] : children_)
      out.emplace_back(key, child.get());
    return out;
  }

  std::map<std::vector<std::string>, std::unique_ptr<Child>> children_;
  std::unique_ptr<Child> overflow_;
};

} // namespace detail

/// A family of counters.
class counter_family : public detail::metric_family<metric_counter> {
public:
  using metric_family::metric_family;

protected:
  std::unique_ptr<metric_counter> make_child() const override;
  void render_child(std::string& out, const std::vector<std::string>& values,
                    const void* child) const override;
};

/// A family of gauges.
class gauge_family : public detail::metric_family<metric_gauge> {
public:
  using metric_family::metric_family;

protected:
  std::unique_ptr<metric_gauge> make_child() const override;
  void render_child(std::string& out, const std::vector<std::string>& values,
                    const void* child) const override;
};

/// A family of histograms with the same buckets.
class histogram_family : public detail::metric_family<metric_histogram> {
public:
  histogram_family(std::string name, std::string help, std::vector<std::string> label_names,
                   std::vector<double> bounds);

  const std::vector<double>& bounds() const noexcept {
    return *bounds_;
  }

protected:
  std::unique_ptr<metric_histogram> make_child() const override;
  void render_child(std::string& out, const std::vector<std::string>& values,
                    const void* child) const override;

private:
  std::shared_ptr<const std::vector<double>> bounds_;
};

/// Families by name, rendered in the order they were added.
/// Thread-safe.
class metrics_registry {
public:
  /// Adds a counter family (or returns the one of that name if it has the
  /// same type and label names). Errors: an invalid metric or label name
  /// (`[a-zA-Z_:][a-zA-Z0-9_:]*`, labels without `:` and not starting with
  /// `__`), a label named twice, a name taken by a different family.
  std::variant<counter_family*, sdk::error> add_counter(std::string name, std::string help,
                                                        std::vector<std::string> label_names = {});

  /// Adds a gauge family; as add_counter.
  std::variant<gauge_family*, sdk::error> add_gauge(std::string name, std::string help,
                                                    std::vector<std::string> label_names = {});

  /// Adds a histogram family with the given upper bounds (finite, strictly
  /// increasing; +Inf is added). `le` cannot be a label name.
  std::variant<histogram_family*, sdk::error> add_histogram(std::string name, std::string help,
                                                            std::vector<std::string> label_names,
                                                            std::vector<double> bounds);

  /// Every family in the text format 0.0.4 (`# HELP`, `# TYPE`, samples).
  /// A family without labels shows its one child (0 until used).
  std::string render() const;

private:
  std::optional<sdk::error> check(const std::string& name, const std::string& type,
                                  const std::vector<std::string>& labels,
                                  detail::metric_family_base** existing) const;

  mutable std::mutex mtx_;
  std::vector<std::unique_ptr<detail::metric_family_base>> families_;
};

/// Formats a sample value: integers without a fraction (`3`), others in the
/// shortest form that reads back the same (`0.25`), `+Inf`, `-Inf`, `NaN`.
std::string format_metric_value(double value);

/// Escapes a label value: backslash, double quote and line feed.
std::string escape_label_value(std::string_view value);

/// Escapes HELP text: backslash and line feed.
std::string escape_metric_help(std::string_view help);

/// The content type of render()'s text.
inline constexpr std::string_view metrics_content_type = "text/plain; version=0.0.4; charset=utf-8";

} // namespace quarry::core
