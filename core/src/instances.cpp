// Embedded defaults from the environment and the checks of plugin instances'
// keys.

#include "quarry/core/instances.hpp"

#include "quarry/core/config_schema.hpp"
#include "quarry/core/duration.hpp"
#include "quarry/sdk/llm_provider.hpp"
#include "quarry/sdk/tool.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <tuple>

namespace quarry::core {

namespace {

using json = nlohmann::json;

std::optional<std::string> lookup(const config_getenv_fn& getenv,
                                  const std::string& name) {
  std::optional<std::string> value;
  if (getenv) {
    value = getenv(name);
  } else if (const auto* v = std::getenv(name.c_str())) {
    value = std::string{v};
  }
  if (!value || value->empty())
    return std::nullopt;
  return value;
}

// One line, for messages and YAML comments.
std::string one_line(std::string x) {
  std::replace(x.begin(), x.end(), '\n', ' ');
  std::replace(x.begin(), x.end(), '\r', ' ');
  return x;
}

} // namespace

void apply_environment_defaults(loaded_config& cfg,
                                const config_getenv_fn& getenv) {
  auto env = [&](const char* name) { return lookup(getenv, name); };
  auto& values = cfg.values;
  auto added = false;
  if (values.llm.providers.empty()) {
    plugin_instance p;
    std::string what;
    auto openai_key = env("OPENAI_API_KEY");
    auto openai_base = env("OPENAI_BASE_URL");
    if (openai_key || openai_base) {
      p.plugin = "openai";
      auto model = env("OPENAI_MODEL").value_or("gpt-4.1-mini");
      p.config = {{"model", model}};
      if (openai_key)
        p.config["api_key"] = *openai_key;
      if (openai_base)
        p.config["base_url"] = *openai_base;
      if (openai_key)
        what = "OpenAI (" + model + ") from OPENAI_API_KEY"
               + (openai_base ? ", at OPENAI_BASE_URL " + *openai_base : "");
      else
        what = "the OpenAI-compatible server at OPENAI_BASE_URL " + *openai_base
               + " (model " + model
               + (env("OPENAI_MODEL") ? " from OPENAI_MODEL"
                                      : "; set OPENAI_MODEL to change it")
               + "; no OPENAI_API_KEY, so no key is sent)";
    } else if (auto key = env("ANTHROPIC_API_KEY")) {
      p.plugin = "anthropic";
      auto model = env("ANTHROPIC_MODEL").value_or("claude-sonnet-4-5");
      p.config = {{"api_key", *key}, {"model", model}};
      if (auto base = env("ANTHROPIC_BASE_URL"))
        p.config["base_url"] = *base;
      what = "Anthropic (" + model + ") from ANTHROPIC_API_KEY";
    } else {
      p.plugin = "extractive";
      what = "the offline extractive provider (no LLM is configured and "
             "neither OPENAI_API_KEY, OPENAI_BASE_URL nor ANTHROPIC_API_KEY is "
             "set): answers quote the sources instead of writing new text";
    }
    p.file = "(embedded defaults)";
    values.llm.providers["default"] = std::move(p);
    values.llm.default_provider = "default";
    cfg.environment_defaults.push_back({"llm.providers.default", one_line(what)});
    added = true;
  }
  if (values.tools.empty()) {
    plugin_instance ws;
    std::string what;
    if (auto key = env("BRAVE_API_KEY")) {
      ws.plugin = "brave";
      ws.config = {{"api_key", *key}};
      what = "web search with Brave (BRAVE_API_KEY)";
    } else if (auto key = env("TAVILY_API_KEY")) {
      ws.plugin = "tavily";
      ws.config = {{"api_key", *key}};
      what = "web search with Tavily (TAVILY_API_KEY)";
    }
    if (!ws.plugin.empty()) {
      ws.file = "(embedded defaults)";
      values.tools["web_search"] = std::move(ws);
      plugin_instance ou;
      ou.plugin = "open_url";
      ou.file = "(embedded defaults)";
      values.tools["open_url"] = std::move(ou);
      cfg.environment_defaults.push_back({"tools.web_search", what});
      cfg.environment_defaults.push_back(
        {"tools.open_url", "open_url, to read the pages web search finds"});
      added = true;
    }
  }
  if (added)
    cfg.effective = to_json(values);
}

const std::vector<std::string>& host_llm_keys() {
  static const std::vector<std::string> keys{std::begin(sdk::host_llm_keys),
                                             std::end(sdk::host_llm_keys)};
  return keys;
}

const std::vector<std::string>& host_tool_keys() {
  static const std::vector<std::string> keys{std::begin(sdk::host_tool_keys),
                                             std::end(sdk::host_tool_keys)};
  return keys;
}

namespace {

// What a value looks like in a message: short, and never a secret's value.
std::string shown(const json& v) {
  auto text = v.is_string() ? "\"" + v.get<std::string>() + "\"" : v.dump();
  if (text.size() > 60)
    text = text.substr(0, 57) + "...";
  return one_line(std::move(text));
}

struct checker {
  std::vector<config_error>& out;
  const plugin_instance& inst;
  std::string prefix; // e.g. llm.providers.main

  void fail(const std::string& key, std::string message) {
    auto [file, line] = inst.location_of(key);
    out.push_back({file, line, prefix + "." + key, std::move(message)});
  }

  const json* find(const std::string& key) const {
    auto i = inst.config.find(key);
    if (i == inst.config.end() || i->is_null())
      return nullptr;
    return &*i;
  }

  // An integer from lo to hi.
  void integer(const std::string& key, int64_t lo, int64_t hi) {
    const auto* v = find(key);
    if (v == nullptr)
      return;
    auto bound = hi == std::numeric_limits<int64_t>::max()
                   ? "at least " + std::to_string(lo)
                   : "from " + std::to_string(lo) + " to " + std::to_string(hi);
    if (!v->is_number_integer()) {
      fail(key, "expected an integer " + bound + ", got " + shown(*v));
      return;
    }
    auto x = v->is_number_unsigned()
               ? static_cast<int64_t>(std::min<uint64_t>(
                   v->get<uint64_t>(),
                   static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
               : v->get<int64_t>();
    if (x < lo || x > hi)
      fail(key, "must be an integer " + bound + ", got " + shown(*v));
  }

  // A number of at least 0.
  void non_negative(const std::string& key) {
    const auto* v = find(key);
    if (v == nullptr)
      return;
    if (!v->is_number() || v->get<double>() < 0)
      fail(key, "expected a number of at least 0, got " + shown(*v));
  }

  // A duration: seconds as a number, or text such as 30s or 500ms.
  void duration(const std::string& key, bool zero_ok) {
    const auto* v = find(key);
    if (v == nullptr)
      return;
    std::optional<std::chrono::milliseconds> d;
    if (v->is_number()) {
      auto seconds = v->get<double>();
      if (seconds >= 0 && seconds < 1e9)
        d = std::chrono::milliseconds{static_cast<int64_t>(seconds * 1000)};
    } else if (v->is_string()) {
      d = parse_duration(v->get<std::string>());
    }
    if (!d) {
      fail(key, "expected a duration such as 30s or 500ms, got " + shown(*v));
      return;
    }
    if (!zero_ok && d->count() <= 0)
      fail(key, "must be longer than 0, got " + shown(*v));
  }

  // prices: {input, output} for every model, or MODEL: {input, output}.
  void prices() {
    const auto* v = find("prices");
    if (v == nullptr)
      return;
    auto pair_ok = [](const json& x) {
      if (!x.is_object() || x.empty())
        return false;
      for (const auto& [k, price] : x.items())
        if ((k != "input" && k != "output") || !price.is_number()
            || price.get<double>() < 0)
          return false;
      return true;
    };
    if (!v->is_object()) {
      fail("prices", "expected a map: {input: USD, output: USD} per million "
                     "tokens, or MODEL: {input: ..., output: ...}");
      return;
    }
    if (v->contains("input") || v->contains("output")) {
      if (!pair_ok(*v))
        fail("prices", "expected {input: USD, output: USD} per million tokens "
                       "(numbers of at least 0)");
      return;
    }
    for (const auto& [model, pair] : v->items())
      if (!pair_ok(pair))
        fail("prices", "prices." + model + " must be {input: USD, output: USD} "
                       "per million tokens (numbers of at least 0)");
  }

  void unknown_keys(const std::vector<std::string>& known) {
    for (const auto& [key, value] : inst.config.items()) {
      if (std::find(known.begin(), known.end(), key) != known.end())
        continue;
      auto hint = closest_name(key, known);
      fail(key, "unknown key" + (hint.empty() ? std::string{}
                                              : "; did you mean `" + prefix + "."
                                                  + hint + "`?"));
    }
  }
};

} // namespace

std::vector<config_error> check_instances(const settings& cfg,
                                          const plugin_keys_fn& plugin_keys) {
  std::vector<config_error> out;
  auto known_keys = [&](const plugin_instance& inst,
                        const std::vector<std::string>& host)
    -> std::optional<std::vector<std::string>> {
    if (!plugin_keys)
      return std::nullopt;
    auto keys = plugin_keys(inst.plugin);
    if (!keys)
      return std::nullopt;
    for (const auto& key : host)
      if (std::find(keys->begin(), keys->end(), key) == keys->end())
        keys->push_back(key);
    return keys;
  };
  for (const auto& [name, inst] : cfg.llm.providers) {
    checker c{out, inst, "llm.providers." + name};
    c.integer("max_concurrency", 1, 10000);
    c.non_negative("requests_per_minute");
    c.non_negative("tokens_per_minute");
    c.integer("max_retries", 0, 100);
    c.duration("retry_base", false);
    c.duration("retry_max", false);
    c.duration("stall_timeout", false);
    c.duration("total_timeout", false);
    c.prices();
    if (c.find("context_window") != nullptr)
      c.fail("context_window",
             "is not read by Quarry: the prompt budget of a research session "
             "is `research.context_tokens`; remove this key");
    if (auto known = known_keys(inst, host_llm_keys())) {
      known->erase(std::remove(known->begin(), known->end(), "context_window"),
                   known->end());
      known->push_back("context_window"); // reported above, not as unknown
      c.unknown_keys(*known);
    }
  }
  for (const auto& [name, inst] : cfg.tools) {
    checker c{out, inst, "tools." + name};
    c.integer("max_concurrency", 1, 10000);
    c.duration("timeout", false);
    c.duration("cache_ttl", true);
    c.integer("cache_entries", 0, 10000000);
    if (auto known = known_keys(inst, host_tool_keys()))
      c.unknown_keys(*known);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const config_error& a, const config_error& b) {
                     return std::tie(a.file, a.line) < std::tie(b.file, b.line);
                   });
  return out;
}

} // namespace quarry::core
