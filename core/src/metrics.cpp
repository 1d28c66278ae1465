// The metrics registry and its text rendering.

#include "quarry/core/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace quarry::core {

namespace {

void atomic_add(std::atomic<double>& target, double amount) noexcept {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
  }
}

bool valid_metric_name(std::string_view name) {
  if (name.empty())
    return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'
              || (i > 0 && c >= '0' && c <= '9');
    if (!ok)
      return false;
  }
  return true;
}

bool valid_label_name(std::string_view name) {
  if (!valid_metric_name(name) || name.find(':') != std::string_view::npos)
    return false;
  return name.substr(0, 2) != "__";
}

sdk::error metric_error(std::string message) {
  sdk::error err;
  err.code = sdk::errc::bad_request;
  err.message = std::move(message);
  return err;
}

// `{a="x",b="y"}` (or nothing without labels); `extra` is appended as a
// last label already formatted (e.g. `le="0.5"`).
std::string label_text(const std::vector<std::string>& names,
                       const std::vector<std::string>& values, std::string_view extra = {}) {
  if (names.empty() && extra.empty())
    return {};
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0)
      out += ',';
    out += names[i];
    out += "=\"";
    out += escape_label_value(i < values.size() ? values[i] : std::string{});
    out += '"';
  }
  if (!extra.empty()) {
    if (!names.empty())
      out += ',';
    out += extra;
  }
  out += '}';
  return out;
}

} // namespace

// -- values -------------------------------------------------------------------

void metric_counter::inc(double amount) noexcept {
  if (!(amount >= 0))
    return; // negative or NaN
  atomic_add(value_, amount);
}

double metric_counter::value() const noexcept {
  return value_.load(std::memory_order_relaxed);
}

void metric_gauge::set(double value) noexcept {
  value_.store(value, std::memory_order_relaxed);
}

void metric_gauge::inc(double amount) noexcept {
  atomic_add(value_, amount);
}

void metric_gauge::dec(double amount) noexcept {
  atomic_add(value_, -amount);
}

double metric_gauge::value() const noexcept {
  return value_.load(std::memory_order_relaxed);
}

metric_histogram::metric_histogram(std::shared_ptr<const std::vector<double>> bounds)
  : bounds_(std::move(bounds)), counts_(bounds_->size() + 1, 0) {
}

void metric_histogram::observe(double value) noexcept {
  if (std::isnan(value))
    return;
  // The first bucket whose upper bound is >= value (le: less or equal).
  auto i = static_cast<size_t>(std::lower_bound(bounds_->begin(), bounds_->end(), value)
                               - bounds_->begin());
  std::lock_guard<std::mutex> guard{mtx_};
  ++counts_[i];
  sum_ += value;
  ++count_;
}

bool metric_histogram::add(const snapshot& other) noexcept {
  if (other.counts.size() != counts_.size() || std::isnan(other.sum))
    return false;
  uint64_t total = 0;
  for (auto n : other.counts) {
    if (n > UINT64_MAX - total)
      return false;
    total += n;
  }
  if (total != other.count)
    return false;
  std::lock_guard<std::mutex> guard{mtx_};
  for (size_t i = 0; i < counts_.size(); ++i)
    counts_[i] += other.counts[i];
  sum_ += other.sum;
  count_ += other.count;
  return true;
}

metric_histogram::snapshot metric_histogram::read() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return snapshot{counts_, sum_, count_};
}

// -- text ---------------------------------------------------------------------

std::string format_metric_value(double value) {
  if (std::isnan(value))
    return "NaN";
  if (std::isinf(value))
    return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15)
    return std::to_string(static_cast<long long>(value));
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc{})
    return "NaN";
  return std::string{buf, end};
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string escape_metric_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// -- families -----------------------------------------------------------------

namespace detail {

metric_family_base::metric_family_base(std::string name, std::string help, std::string type,
                                       std::vector<std::string> label_names)
  : name_(std::move(name)),
    help_(std::move(help)),
    type_(std::move(type)),
    label_names_(std::move(label_names)) {
}

std::vector<std::string> metric_family_base::fit(std::vector<std::string> values) const {
  values.resize(label_names_.size());
  return values;
}

void metric_family_base::render(std::string& out) const {
  out += "# HELP " + name_ + " " + escape_metric_help(help_) + "\n";
  out += "# TYPE " + name_ + " " + type_ + "\n";
  for (const auto& [values, child] : children())
    render_child(out, values, child);
}

} // namespace detail

std::unique_ptr<metric_counter> counter_family::make_child() const {
  return std::make_unique<metric_counter>();
}

void counter_family::render_child(std::string& out, const std::vector<std::string>& values,
                                  const void* child) const {
  out += name_ + label_text(label_names_, values) + " "
         + format_metric_value(static_cast<const metric_counter*>(child)->value()) + "\n";
}

std::unique_ptr<metric_gauge> gauge_family::make_child() const {
  return std::make_unique<metric_gauge>();
}

void gauge_family::render_child(std::string& out, const std::vector<std::string>& values,
                                const void* child) const {
  out += name_ + label_text(label_names_, values) + " "
         + format_metric_value(static_cast<const metric_gauge*>(child)->value()) + "\n";
}

histogram_family::histogram_family(std::string name, std::string help,
                                   std::vector<std::string> label_names, std::vector<double> bounds)
  : metric_family(std::move(name), std::move(help), "histogram", std::move(label_names)),
    bounds_(std::make_shared<const std::vector<double>>(std::move(bounds))) {
}

std::unique_ptr<metric_histogram> histogram_family::make_child() const {
  return std::make_unique<metric_histogram>(bounds_);
}

void histogram_family::render_child(std::string& out, const std::vector<std::string>& values,
                                    const void* child) const {
  auto snap = static_cast<const metric_histogram*>(child)->read();
  uint64_t cumulative = 0;
  for (size_t i = 0; i < snap.counts.size(); ++i) {
    cumulative += snap.counts[i];
    std::string le = i < bounds_->size() ? format_metric_value((*bounds_)[i]) : "+Inf";
    out += name_ + "_bucket" + label_text(label_names_, values, "le=\"" + le + "\"") + " "
           + std::to_string(cumulative) + "\n";
  }
  auto plain = label_text(label_names_, values);
  out += name_ + "_sum" + plain + " " + format_metric_value(snap.sum) + "\n";
  out += name_ + "_count" + plain + " " + std::to_string(snap.count) + "\n";
}

// -- registry -----------------------------------------------------------------

std::optional<sdk::error> metrics_registry::check(const std::string& name, const std::string& type,
                                                  const std::vector<std::string>& labels,
                                                  detail::metric_family_base** existing) const {
  *existing = nullptr;
  if (!valid_metric_name(name))
    return metric_error("metric name '" + name + "' is not valid (letters, digits, _ and :)");
  std::set<std::string> seen;
  for (const auto& label : labels) {
    if (!valid_label_name(label))
      return metric_error("metric " + name + ": label name '" + label + "' is not valid");
    if (type == "histogram" && label == "le")
      return metric_error("metric " + name + ": a histogram cannot have a label 'le'");
    if (!seen.insert(label).second)
      return metric_error("metric " + name + ": label '" + label + "' is named twice");
  }
  for (const auto& f : families_) {
    if (f->name() != name)
      continue;
    if (f->type() != type || f->label_names() != labels)
      return metric_error("metric " + name + " is already registered as a " + f->type()
                          + " with other labels");
    *existing = f.get();
  }
  return std::nullopt;
}

std::variant<counter_family*, sdk::error>
metrics_registry::add_counter(std::string name, std::string help,
                              std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> guard{mtx_};
  detail::metric_family_base* existing = nullptr;
  if (auto err = check(name, "counter", label_names, &existing))
    return *err;
  if (existing)
    return static_cast<counter_family*>(existing);
  auto family = std::make_unique<counter_family>(std::move(name), std::move(help), "counter",
                                                 std::move(label_names));
  auto* ptr = family.get();
  if (ptr->label_names().empty())
    ptr->with();
  families_.push_back(std::move(family));
  return ptr;
}

std::variant<gauge_family*, sdk::error>
metrics_registry::add_gauge(std::string name, std::string help,
                            std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> guard{mtx_};
  detail::metric_family_base* existing = nullptr;
  if (auto err = check(name, "gauge", label_names, &existing))
    return *err;
  if (existing)
    return static_cast<gauge_family*>(existing);
  auto family = std::make_unique<gauge_family>(std::move(name), std::move(help), "gauge",
                                               std::move(label_names));
  auto* ptr = family.get();
  if (ptr->label_names().empty())
    ptr->with();
  families_.push_back(std::move(family));
  return ptr;
}

std::variant<histogram_family*, sdk::error>
metrics_registry::add_histogram(std::string name, std::string help,
                                std::vector<std::string> label_names, std::vector<double> bounds) {
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0)
    bounds.pop_back(); // +Inf is always there
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]))
      return metric_error("metric " + name + ": bucket bounds must be finite");
    if (i > 0 && !(bounds[i] > bounds[i - 1]))
      return metric_error("metric " + name + ": bucket bounds must increase");
  }
  std::lock_guard<std::mutex> guard{mtx_};
  detail::metric_family_base* existing = nullptr;
  if (auto err = check(name, "histogram", label_names, &existing))
    return *err;
  if (existing) {
    auto* h = static_cast<histogram_family*>(existing);
    if (h->bounds() != bounds)
      return metric_error("metric " + name + " is already registered with other buckets");
    return h;
  }
  auto family = std::make_unique<histogram_family>(std::move(name), std::move(help),
                                                   std::move(label_names), std::move(bounds));
  auto* ptr = family.get();
  if (ptr->label_names().empty())
    ptr->with();
  families_.push_back(std::move(family));
  return ptr;
}

std::string metrics_registry::render() const {
  std::string out;
  std::lock_guard<std::mutex> guard{mtx_};
  for (const auto& f : families_)
    f->render(out);
  return out;
}

} // namespace quarry::core
