// Embedded defaults from the environment and the checks of plugin instances'
// keys.

#include "quarry/core/instances.hpp"

#include "quarry/core/config_limits.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <tuple>

namespace quarry::core {

namespace {

using json = nlohmann::json;

std::optional<std::string> lookup(const config_getenv_fn& getenv, const std::string& name) {
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

std::string ollama_base_url(const std::string& host) {
  // As Ollama's own client reads OLLAMA_HOST: scheme http, host 127.0.0.1
  // and port 11434 unless given; a trailing slash or path is dropped.
  std::string scheme = "http";
  std::string rest = host;
  if (auto p = rest.find("://"); p != std::string::npos) {
    scheme = rest.substr(0, p);
    rest = rest.substr(p + 3);
  }
  if (auto slash = rest.find('/'); slash != std::string::npos)
    rest = rest.substr(0, slash);
  if (rest.empty())
    rest = "127.0.0.1";
  bool bracketed = !rest.empty() && rest.front() == '[';
  auto colon = rest.rfind(':');
  bool has_port = colon != std::string::npos
                  && (bracketed ? colon > rest.find(']') : rest.find(':') == colon);
  if (!has_port)
    rest += scheme == "https" ? ":443" : ":11434";
  return scheme + "://" + rest + "/v1";
}

void apply_environment_defaults(loaded_config& cfg, const config_getenv_fn& getenv) {
  auto env = [&](const char* name) { return lookup(getenv, name); };
  auto& values = cfg.values;
  auto added = false;
  if (values.llm.providers.empty()) {
    llm_instance p;
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
        what = "the OpenAI-compatible server at OPENAI_BASE_URL " + *openai_base + " (model "
               + model
               + (env("OPENAI_MODEL") ? " from OPENAI_MODEL" : "; set OPENAI_MODEL to change it")
               + "; no OPENAI_API_KEY, so no key is sent)";
    } else if (auto key = env("ANTHROPIC_API_KEY")) {
      p.plugin = "anthropic";
      auto model = env("ANTHROPIC_MODEL").value_or("claude-sonnet-4-5");
      p.config = {{"api_key", *key}, {"model", model}};
      if (auto base = env("ANTHROPIC_BASE_URL"))
        p.config["base_url"] = *base;
      what = "Anthropic (" + model + ") from ANTHROPIC_API_KEY";
    } else if (auto host = env("OLLAMA_HOST"), model = env("OLLAMA_MODEL"); host || model) {
      // Ollama's OpenAI-compatible endpoint (its /v1 path), no key.
      auto base = ollama_base_url(host.value_or(""));
      auto name = model.value_or(default_ollama_model);
      p.plugin = "openai";
      p.config = {{"base_url", base}, {"model", name}};
      what = "the Ollama server at " + base + " (model " + name
             + (model ? " from OLLAMA_MODEL" : "; set OLLAMA_MODEL to change it") + ")";
    } else {
      p.plugin = "extractive";
      what = "the offline extractive provider (no LLM is configured and "
             "neither OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY, OLLAMA_HOST nor "
             "OLLAMA_MODEL is set): answers quote the sources instead of writing new text";
    }
    p.file = "(embedded defaults)";
    values.llm.providers["default"] = std::move(p);
    values.llm.default_provider = "default";
    cfg.environment_defaults.push_back({"llm.providers.default", one_line(what)});
    added = true;
  }
  if (values.tools.empty()) {
    tool_instance ws;
    std::string what;
    if (auto key = env("BRAVE_API_KEY")) {
      ws.plugin = "brave";
      ws.config = {{"api_key", *key}};
      what = "web search with Brave (BRAVE_API_KEY)";
    } else if (auto key = env("TAVILY_API_KEY")) {
      ws.plugin = "tavily";
      ws.config = {{"api_key", *key}};
      what = "web search with Tavily (TAVILY_API_KEY)";
    } else if (auto key = env("EXA_API_KEY")) {
      ws.plugin = "exa";
      ws.config = {{"api_key", *key}};
      what = "web search with Exa (EXA_API_KEY)";
    } else if (auto key = env("SERPER_API_KEY")) {
      ws.plugin = "serper";
      ws.config = {{"api_key", *key}};
      what = "web search with Serper (SERPER_API_KEY)";
    } else if (auto url = env("SEARXNG_URL")) {
      ws.plugin = "searxng";
      ws.config = {{"base_url", *url}};
      what = "web search with the SearXNG instance at " + one_line(*url) + " (SEARXNG_URL)";
    }
    if (!ws.plugin.empty()) {
      ws.file = "(embedded defaults)";
      values.tools["web_search"] = std::move(ws);
      tool_instance ou;
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

namespace {

// A limit's value as it would be written in YAML (`2`, `30s`, `{input: 1}`
// as JSON flow): limits are short and never secret.
std::string written(const json& v) {
  return v.is_string() ? one_line(v.get<std::string>())
                       : v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Checks one instance's options against its plugin's keys, and moves the
// limits an older file wrote beside the options into `limits`.
template <class Instance>
void check_instance(instance_kind kind, const std::string& prefix, Instance& inst,
                    const plugin_keys_fn& plugin_keys, std::vector<config_error>& errors,
                    std::vector<config_error>* warnings) {
  auto fail = [&](const std::string& key, std::string message) {
    auto [file, line] = inst.location_of(key);
    errors.push_back({file, line, prefix + "." + key, std::move(message)});
  };
  std::optional<std::vector<std::string>> own;
  if (plugin_keys)
    own = plugin_keys(inst.plugin);
  auto declares = [&](const std::string& key) {
    return own && std::find(own->begin(), own->end(), key) != own->end();
  };
  // Candidates for "did you mean": the plugin's options and the limits.
  std::vector<std::string> names;
  std::vector<std::string> paths;
  if (own)
    for (const auto& k : *own) {
      names.push_back(k);
      paths.push_back(prefix + "." + k);
    }
  for (const auto& k : limit_keys(kind)) {
    names.push_back(k.name);
    paths.push_back(prefix + ".limits." + k.name);
  }
  std::vector<std::string> moved;
  for (const auto& [key, value] : inst.config.items()) {
    if (is_limit_key(kind, key) && !declares(key)) {
      // A limit written beside the options, as older files did.
      if (auto i = inst.key_lines.find("limits." + key); i != inst.key_lines.end()) {
        fail(key, "is one of Quarry's limits and is also set under `limits:` (" + i->second.first
                    + ":" + std::to_string(i->second.second) + "); remove this one");
        moved.push_back(key);
        continue;
      }
      auto problems = read_limits(json{{key, value}}, inst.limits, prefix + ".limits");
      for (auto& p : problems)
        fail(key, std::move(p.message));
      if (problems.empty() && warnings != nullptr) {
        auto [file, line] = inst.location_of(key);
        warnings->push_back({file, line, prefix + "." + key,
                             "Quarry's limits now go under `limits:`; write `limits: {" + key + ": "
                               + written(value) + "}` instead (read as " + prefix + ".limits." + key
                               + " until then)"});
      }
      moved.push_back(key);
      continue;
    }
    if (!own || declares(key))
      continue;
    auto hint = closest_name(key, names);
    std::string shown_hint;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == hint)
        shown_hint = paths[i];
    fail(key, "unknown key"
                + (shown_hint.empty()
                     ? "; `" + inst.plugin + "` reads "
                         + (own->empty() ? std::string{"no options"} : "only its own options")
                         + " and Quarry's `limits`"
                     : "; did you mean `" + shown_hint + "`?"));
  }
  for (const auto& key : moved) {
    inst.config.erase(key);
    if (auto i = inst.key_lines.find(key); i != inst.key_lines.end()) {
      auto at = i->second;
      inst.key_lines.erase(i);
      inst.key_lines.emplace("limits." + key, at);
    }
  }
}

} // namespace

std::vector<config_error> check_instances(settings& cfg, const plugin_keys_fn& plugin_keys,
                                          std::vector<config_error>* warnings) {
  std::vector<config_error> out;
  std::vector<config_error> notes;
  for (auto& [name, inst] : cfg.llm.providers)
    check_instance(instance_kind::llm, "llm.providers." + name, inst, plugin_keys, out, &notes);
  for (auto& [name, inst] : cfg.tools)
    check_instance(instance_kind::tool, "tools." + name, inst, plugin_keys, out, &notes);
  auto by_line = [](const config_error& a, const config_error& b) {
    return std::tie(a.file, a.line) < std::tie(b.file, b.line);
  };
  std::stable_sort(out.begin(), out.end(), by_line);
  std::stable_sort(notes.begin(), notes.end(), by_line);
  if (warnings != nullptr)
    warnings->insert(warnings->end(), notes.begin(), notes.end());
  return out;
}

} // namespace quarry::core
