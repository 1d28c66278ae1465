// The limits of provider and tool instances: their table and their reader.

#include "quarry/core/config_limits.hpp"

#include "quarry/core/config.hpp"
#include "quarry/core/duration.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

namespace quarry::core {

namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

// What a value looks like in a message: short, on one line (JSON escapes
// line breaks), never failing on broken UTF-8.
std::string shown(const json& v) {
  auto text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60)
    text = text.substr(0, 57) + "...";
  return text;
}

// Reads the value of one key or returns what is wrong with it.
using reader = std::function<std::optional<std::string>(const json&)>;

// An integer from lo to hi.
template <class T>
reader integer(T& dst, int64_t lo, int64_t hi) {
  return [&dst, lo, hi](const json& v) -> std::optional<std::string> {
    auto bound = "from " + std::to_string(lo) + " to " + std::to_string(hi);
    if (!v.is_number_integer())
      return "expected an integer " + bound + ", got " + shown(v);
    auto x = v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(
               v.get<uint64_t>(), static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
                                    : v.get<int64_t>();
    if (x < lo || x > hi)
      return "must be an integer " + bound + ", got " + shown(v);
    dst = static_cast<T>(x);
    return std::nullopt;
  };
}

// A number of at least 0.
reader non_negative(double& dst) {
  return [&dst](const json& v) -> std::optional<std::string> {
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1e15)
      return "expected a number of at least 0, got " + shown(v);
    dst = v.get<double>();
    return std::nullopt;
  };
}

// A duration: seconds as a number, or text such as 30s or 500ms.
reader duration(milliseconds& dst, bool zero_ok) {
  return [&dst, zero_ok](const json& v) -> std::optional<std::string> {
    std::optional<milliseconds> d;
    if (v.is_number()) {
      auto seconds = v.get<double>();
      if (seconds >= 0 && seconds < 1e9)
        d = milliseconds{static_cast<int64_t>(seconds * 1000)};
    } else if (v.is_string()) {
      d = parse_duration(v.get<std::string>());
    }
    if (!d)
      return "expected a duration such as 30s or 500ms, got " + shown(v);
    if (!zero_ok && d->count() <= 0)
      return "must be longer than 0, got " + shown(v);
    dst = *d;
    return std::nullopt;
  };
}

// prices: {input, output} for every model, or MODEL: {input, output}.
reader prices(llm_limits& out) {
  return [&out](const json& v) -> std::optional<std::string> {
    auto read = [](const json& x, token_prices& dst) {
      if (!x.is_object() || x.empty())
        return false;
      for (const auto& [k, price] : x.items()) {
        if ((k != "input" && k != "output") || !price.is_number() || price.get<double>() < 0)
          return false;
        (k == "input" ? dst.input : dst.output) = price.get<double>();
      }
      return true;
    };
    if (!v.is_object())
      return std::string{"expected a map: {input: USD, output: USD} per "
                         "million tokens, or MODEL: {input: ..., output: ...}"};
    if (v.contains("input") || v.contains("output")) {
      token_prices tp;
      if (!read(v, tp))
        return std::string{"expected {input: USD, output: USD} per million "
                           "tokens (numbers of at least 0)"};
      out.default_prices = tp;
      out.model_prices.clear();
      return std::nullopt;
    }
    std::map<std::string, token_prices> models;
    for (const auto& [model, pair] : v.items()) {
      token_prices tp;
      if (!read(pair, tp))
        return "prices." + model
               + " must be {input: USD, output: USD} per "
                 "million tokens (numbers of at least 0)";
      models[model] = tp;
    }
    out.default_prices.reset();
    out.model_prices = std::move(models);
    return std::nullopt;
  };
}

// A whole number as an integer (`60`, not `60.0`), anything else as it is.
json number(double x) {
  if (x >= 0 && x < 1e15 && x == std::floor(x))
    return json(static_cast<int64_t>(x));
  return json(x);
}

json prices_json(const llm_limits& x) {
  auto pair = [](const token_prices& p) {
    return json{{"input", number(p.input)}, {"output", number(p.output)}};
  };
  if (!x.model_prices.empty()) {
    auto out = json::object();
    for (const auto& [model, p] : x.model_prices)
      out[model] = pair(p);
    return out;
  }
  if (x.default_prices)
    return pair(*x.default_prices);
  return json::object();
}

// true or false.
reader boolean(bool& dst) {
  return [&dst](const json& v) -> std::optional<std::string> {
    if (!v.is_boolean())
      return "expected true or false, got " + shown(v);
    dst = v.get<bool>();
    return std::nullopt;
  };
}

// One key of a `limits:` map: what the documentation says, how it is read
// into the struct and how the effective configuration shows it. The one
// table of the limits; to add one, add the field to `llm_limits` or
// `tool_limits` (settings.hpp), a row here, and document it in
// config/quarry.yaml and docs/configuration.md (a unit test checks both).
template <class Limits>
struct limit_spec {
  const char* name;
  const char* allowed;
  const char* doc;
  std::function<reader(Limits&)> read;
  std::function<json(const Limits&)> write;
};

const std::vector<limit_spec<llm_limits>>& table(const llm_limits*) {
  using l = llm_limits;
  auto ms = [](milliseconds x) { return json(format_duration(x)); };
  static const std::vector<limit_spec<l>> rows{
    {"max_concurrency", "integer 1-10000", "calls in flight; halves on a 429 and creeps back",
     [](l& x) { return integer(x.max_concurrency, 1, 10000); },
     [](const l& x) { return json(x.max_concurrency); }},
    {"requests_per_minute", "number >= 0", "0 means unlimited",
     [](l& x) { return non_negative(x.requests_per_minute); },
     [](const l& x) { return number(x.requests_per_minute); }},
    {"tokens_per_minute", "number >= 0", "estimated input plus requested output; 0 means unlimited",
     [](l& x) { return non_negative(x.tokens_per_minute); },
     [](const l& x) { return number(x.tokens_per_minute); }},
    {"max_retries", "integer 0-100", "retries of retryable failures that streamed nothing",
     [](l& x) { return integer(x.max_retries, 0, 100); },
     [](const l& x) { return json(x.max_retries); }},
    {"retry_base", "duration > 0",
     "first backoff step (full jitter, doubling, at least Retry-After)",
     [](l& x) { return duration(x.retry_base, false); },
     [ms](const l& x) { return ms(x.retry_base); }},
    {"retry_max", "duration > 0", "largest backoff step",
     [](l& x) { return duration(x.retry_max, false); },
     [ms](const l& x) { return ms(x.retry_max); }},
    {"stall_timeout", "duration > 0", "longest time without a streamed piece",
     [](l& x) { return duration(x.stall_timeout, false); },
     [ms](const l& x) { return ms(x.stall_timeout); }},
    {"total_timeout", "duration > 0", "the whole call, retries included",
     [](l& x) { return duration(x.total_timeout, false); },
     [ms](const l& x) { return ms(x.total_timeout); }},
    {"prices",
     "`{input: USD, output: USD}` per million tokens, or `MODEL: {input, "
     "output}`",
     "usage cost; overrides the price table", [](l& x) { return prices(x); },
     [](const l& x) { return prices_json(x); }},
    {"price_table", "true or false",
     "price models without `prices` by the table Quarry ships (false: unpriced)",
     [](l& x) { return boolean(x.price_table); }, [](const l& x) { return json(x.price_table); }},
  };
  return rows;
}

const std::vector<limit_spec<tool_limits>>& table(const tool_limits*) {
  using t = tool_limits;
  auto ms = [](milliseconds x) { return json(format_duration(x)); };
  static const std::vector<limit_spec<t>> rows{
    {"max_concurrency", "integer 1-10000", "runs in flight",
     [](t& x) { return integer(x.max_concurrency, 1, 10000); },
     [](const t& x) { return json(x.max_concurrency); }},
    {"timeout", "duration > 0",
     "the tool actor's limit on one run, retries included; the run is "
     "cancelled",
     [](t& x) { return duration(x.timeout, false); }, [ms](const t& x) { return ms(x.timeout); }},
    {"max_retries", "integer 0-100",
     "retries of a run that failed with a retryable class (a 429, a 503, a "
     "network error)",
     [](t& x) { return integer(x.max_retries, 0, 100); },
     [](const t& x) { return json(x.max_retries); }},
    {"retry_base", "duration > 0",
     "first backoff step (full jitter, doubling, at least Retry-After)",
     [](t& x) { return duration(x.retry_base, false); },
     [ms](const t& x) { return ms(x.retry_base); }},
    {"retry_max", "duration > 0", "largest backoff step",
     [](t& x) { return duration(x.retry_max, false); },
     [ms](const t& x) { return ms(x.retry_max); }},
    {"cache_ttl", "duration >= 0",
     "how long an identical run's result is reused; 0 disables the cache",
     [](t& x) { return duration(x.cache_ttl, true); },
     [ms](const t& x) { return ms(x.cache_ttl); }},
    {"cache_entries", "integer 0-10000000", "most cached results; 0 disables the cache",
     [](t& x) { return integer(x.cache_entries, 0, 10000000); },
     [](const t& x) { return json(x.cache_entries); }},
  };
  return rows;
}

template <class Limits>
std::vector<limit_key> keys_of() {
  std::vector<limit_key> out;
  Limits defaults;
  for (const auto& row : table(&defaults)) {
    json d = row.write(defaults);
    std::string shown_default = d.is_string() ? d.get<std::string>() : d.dump();
    out.push_back({row.name, std::move(shown_default), row.allowed, row.doc});
  }
  return out;
}

template <class Limits>
std::vector<limit_problem> read_impl(const json& limits, Limits& out, const std::string& prefix) {
  std::vector<limit_problem> problems;
  if (limits.is_null())
    return problems;
  if (!limits.is_object()) {
    problems.push_back({"", "expected a map of Quarry's limits, got " + shown(limits)});
    return problems;
  }
  const auto& rows = table(&out);
  std::vector<std::string> names;
  for (const auto& row : rows)
    names.emplace_back(row.name);
  for (const auto& [key, value] : limits.items()) {
    // A lambda may not capture a structured binding before C++20.
    const auto& name = key;
    auto row = std::find_if(rows.begin(), rows.end(),
                            [&name](const auto& x) { return name == x.name; });
    if (row == rows.end()) {
      auto hint = closest_name(key, names);
      std::string list;
      for (const auto& n : names)
        list += (list.empty() ? "" : ", ") + n;
      problems.push_back(
        {key, "unknown key"
                + (hint.empty() ? "; the limits are " + list
                                : "; did you mean `" + prefix + "." + hint + "`?")});
      continue;
    }
    if (value.is_null())
      continue;
    if (auto why = row->read(out)(value))
      problems.push_back({key, std::move(*why)});
  }
  return problems;
}

template <class Limits>
json write_impl(const Limits& x) {
  auto out = json::object();
  for (const auto& row : table(&x))
    out[row.name] = row.write(x);
  return out;
}

} // namespace

const std::vector<limit_key>& limit_keys(instance_kind kind) {
  static const auto llm = keys_of<llm_limits>();
  static const auto tool = keys_of<tool_limits>();
  return kind == instance_kind::llm ? llm : tool;
}

bool is_limit_key(instance_kind kind, const std::string& name) {
  const auto& keys = limit_keys(kind);
  return std::any_of(keys.begin(), keys.end(), [&](const limit_key& k) { return k.name == name; });
}

std::vector<limit_problem> read_limits(const json& limits, llm_limits& out,
                                       const std::string& prefix) {
  return read_impl(limits, out, prefix);
}

std::vector<limit_problem> read_limits(const json& limits, tool_limits& out,
                                       const std::string& prefix) {
  return read_impl(limits, out, prefix);
}

json to_json(const llm_limits& x) {
  return write_impl(x);
}

json to_json(const tool_limits& x) {
  return write_impl(x);
}

} // namespace quarry::core
