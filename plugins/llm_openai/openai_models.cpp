// The `openai` provider's model facts: reading the window from the answers
// of OpenAI-compatible servers, and the probe that asks them once.

#include "openai_models.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace quarry::plugins::llm_openai {

namespace {

using nlohmann::json;

// Parses an answer from outside: bounded depth, repaired UTF-8.
json parse_bounded(std::string_view body) {
  sdk::json_limits limits;
  limits.max_depth = max_probe_depth;
  return sdk::parse_json(body, nullptr, limits);
}

// A window: a whole number from 1 to max_plausible_window, else nothing.
std::optional<int64_t> window_value(const json& x) {
  if (x.is_number_unsigned()) {
    auto v = x.get<uint64_t>();
    if (v >= 1 && v <= static_cast<uint64_t>(max_plausible_window))
      return static_cast<int64_t>(v);
    return std::nullopt;
  }
  if (x.is_number_integer()) {
    auto v = x.get<int64_t>();
    if (v >= 1 && v <= max_plausible_window)
      return v;
  }
  return std::nullopt;
}

// The member `key` of `x` as a window, if `x` is an object that has one.
std::optional<int64_t> window_at(const json& x, const char* key) {
  if (!x.is_object())
    return std::nullopt;
  auto i = x.find(key);
  if (i == x.end())
    return std::nullopt;
  return window_value(*i);
}

// The string member `key` of `x`, or empty.
std::string string_at(const json& x, const char* key) {
  if (!x.is_object())
    return {};
  auto i = x.find(key);
  if (i == x.end() || !i->is_string())
    return {};
  return i->get<std::string>();
}

// Whether the server's name `id` is the model `model` (Ollama adds `:latest`
// to a name without a tag).
bool same_model(const std::string& id, const std::string& model) {
  if (id.empty() || model.empty())
    return false;
  if (id == model)
    return true;
  auto tagless = [](const std::string& x) {
    auto suffix = std::string_view{":latest"};
    if (x.size() > suffix.size() && x.compare(x.size() - suffix.size(), suffix.size(), suffix) == 0)
      return x.substr(0, x.size() - suffix.size());
    return x;
  };
  return tagless(id) == tagless(model);
}

// The host and port of an http(s) URL (the scheme's port when none is
// written); empty host for anything else.
std::pair<std::string, int> host_port(const std::string& url) {
  auto lower = sdk::to_lower(url);
  int port = 0;
  std::string_view rest{lower};
  if (sdk::starts_with(rest, "http://")) {
    rest.remove_prefix(7);
    port = 80;
  } else if (sdk::starts_with(rest, "https://")) {
    rest.remove_prefix(8);
    port = 443;
  } else {
    return {{}, 0};
  }
  auto end = rest.find_first_of("/?#");
  auto authority = rest.substr(0, end);
  if (auto at = authority.rfind('@'); at != std::string_view::npos)
    authority.remove_prefix(at + 1);
  std::string_view host = authority;
  std::string_view port_text;
  if (sdk::starts_with(authority, "[")) {
    auto close = authority.find(']');
    if (close == std::string_view::npos)
      return {{}, 0};
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':')
      port_text = authority.substr(close + 2);
  } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
  }
  if (!port_text.empty()) {
    if (port_text.size() > 5 || !std::all_of(port_text.begin(), port_text.end(), [](char c) {
          return c >= '0' && c <= '9';
        }))
      return {std::string{host}, 0};
    port = std::stoi(std::string{port_text});
  }
  return {std::string{host}, port};
}

// The name of the server in a source text: from the kind, else the host.
std::string server_label(server_kind kind, const std::string& base_url) {
  if (kind != server_kind::unknown)
    return to_string(kind);
  auto host = host_port(base_url).first;
  if (sdk::contains(host, "openrouter"))
    return "openrouter";
  if (sdk::contains(host, "groq"))
    return "groq";
  if (sdk::contains(host, "together"))
    return "together";
  if (sdk::contains(host, "deepseek"))
    return "deepseek";
  return "server";
}

// The kind an entry's `owned_by` suggests.
server_kind kind_by_owner(const std::string& owned_by) {
  auto x = sdk::to_lower(owned_by);
  if (x == "library" || x == "ollama")
    return server_kind::ollama;
  if (x == "organization_owner")
    return server_kind::lm_studio;
  if (x == "llamacpp" || x == "llama.cpp")
    return server_kind::llama_cpp;
  if (x == "vllm")
    return server_kind::vllm;
  return server_kind::unknown;
}

} // namespace

// -- reading answers ------------------------------------------------------------

const char* to_string(server_kind x) noexcept {
  switch (x) {
    case server_kind::ollama:
      return "ollama";
    case server_kind::lm_studio:
      return "lm studio";
    case server_kind::llama_cpp:
      return "llama.cpp";
    case server_kind::vllm:
      return "vllm";
    case server_kind::unknown:
      break;
  }
  return "server";
}

std::string server_root(const std::string& base_url) {
  auto root = base_url;
  while (!root.empty() && root.back() == '/')
    root.pop_back();
  auto suffix = std::string_view{"/v1"};
  if (root.size() > suffix.size()
      && root.compare(root.size() - suffix.size(), suffix.size(), suffix) == 0)
    root.resize(root.size() - suffix.size());
  return root;
}

server_kind kind_by_url(const std::string& base_url) {
  switch (host_port(base_url).second) {
    case 11434:
      return server_kind::ollama;
    case 1234:
      return server_kind::lm_studio;
    default:
      return server_kind::unknown;
  }
}

models_answer read_models(std::string_view body, const std::string& model,
                          const std::string& base_url) {
  models_answer out;
  auto doc = parse_bounded(body);
  if (!doc.is_object())
    return out;
  auto data = doc.find("data");
  if (data == doc.end() || !data->is_array())
    return out;
  const json* entry = nullptr;
  for (const auto& x : *data) {
    if (!x.is_object())
      continue;
    // The first entry that names its owner tells the kind of server.
    if (out.kind == server_kind::unknown)
      out.kind = kind_by_owner(string_at(x, "owned_by"));
    if (entry == nullptr && same_model(string_at(x, "id"), model))
      entry = &x;
  }
  if (entry == nullptr)
    return out;
  out.listed = true;
  auto kind = kind_by_owner(string_at(*entry, "owned_by"));
  if (kind != server_kind::unknown)
    out.kind = kind;
  auto label = server_label(out.kind, base_url);
  // The window the server runs the model with comes before its maximum.
  for (const char* key :
       {"loaded_context_length", "max_model_len", "context_window", "context_length"})
    if (auto w = window_at(*entry, key)) {
      out.window = window_fact{*w, label + " /models " + key};
      return out;
    }
  if (auto top = entry->find("top_provider"); top != entry->end())
    if (auto w = window_at(*top, "context_length")) {
      out.window = window_fact{*w, label + " /models top_provider.context_length"};
      return out;
    }
  if (auto w = window_at(*entry, "max_context_length"))
    out.window = window_fact{*w, label + " /models max_context_length"};
  return out;
}

std::optional<window_fact> read_lm_studio(std::string_view body, const std::string& model) {
  auto doc = parse_bounded(body);
  if (!doc.is_object())
    return std::nullopt;
  auto from_entry = [](const json& x) -> std::optional<window_fact> {
    if (auto w = window_at(x, "loaded_context_length"))
      return window_fact{*w, "lm studio /api/v0/models loaded_context_length"};
    if (auto w = window_at(x, "max_context_length"))
      return window_fact{*w, "lm studio /api/v0/models max_context_length (the "
                             "model's maximum; LM Studio loads a model with the "
                             "context length set for it)"};
    return std::nullopt;
  };
  if (auto data = doc.find("data"); data != doc.end() && data->is_array()) {
    for (const auto& x : *data)
      if (x.is_object() && same_model(string_at(x, "id"), model))
        return from_entry(x);
    return std::nullopt;
  }
  if (same_model(string_at(doc, "id"), model))
    return from_entry(doc);
  return std::nullopt;
}

std::optional<int64_t> num_ctx_of(std::string_view parameters) {
  size_t pos = 0;
  while (pos < parameters.size()) {
    auto end = parameters.find('\n', pos);
    if (end == std::string_view::npos)
      end = parameters.size();
    auto line = parameters.substr(pos, end - pos);
    pos = end + 1;
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
    size_t i = 0;
    while (i < line.size() && is_space(line[i]))
      ++i;
    auto name_end = i;
    while (name_end < line.size() && !is_space(line[name_end]))
      ++name_end;
    if (line.substr(i, name_end - i) != "num_ctx")
      continue;
    auto v = name_end;
    while (v < line.size() && is_space(line[v]))
      ++v;
    auto v_end = v;
    while (v_end < line.size() && !is_space(line[v_end]))
      ++v_end;
    auto value = line.substr(v, v_end - v);
    if (value.empty() || value.size() > 9
        || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    auto n = std::stoll(std::string{value});
    if (n < 1 || n > max_plausible_window)
      return std::nullopt;
    return n;
  }
  return std::nullopt;
}

std::optional<ollama_show> read_ollama_show(std::string_view body) {
  auto doc = parse_bounded(body);
  if (!doc.is_object())
    return std::nullopt;
  ollama_show out;
  bool shaped = false;
  if (auto p = doc.find("parameters"); p != doc.end() && p->is_string()) {
    shaped = true;
    out.num_ctx = num_ctx_of(p->get<std::string>());
  }
  if (auto info = doc.find("model_info"); info != doc.end() && info->is_object()) {
    shaped = true;
    // `<arch>.context_length`, the architecture named by
    // `general.architecture`; else any key of that form.
    auto arch = string_at(*info, "general.architecture");
    if (!arch.empty())
      if (auto w = window_at(*info, (arch + ".context_length").c_str()))
        out.trained = *w;
    if (out.trained == 0)
      for (const auto& [key, value] : info->items())
        if (key.size() > 15 && key.compare(key.size() - 15, 15, ".context_length") == 0)
          if (auto w = window_value(value)) {
            out.trained = *w;
            break;
          }
  }
  if (!shaped && !doc.contains("details") && !doc.contains("modelfile"))
    return std::nullopt;
  return out;
}

std::optional<int64_t> read_ollama_ps(std::string_view body, const std::string& model) {
  auto doc = parse_bounded(body);
  if (!doc.is_object())
    return std::nullopt;
  auto models = doc.find("models");
  if (models == doc.end() || !models->is_array())
    return std::nullopt;
  for (const auto& x : *models)
    if (x.is_object()
        && (same_model(string_at(x, "model"), model) || same_model(string_at(x, "name"), model)))
      return window_at(x, "context_length");
  return std::nullopt;
}

std::optional<int64_t> read_llama_cpp_props(std::string_view body) {
  auto doc = parse_bounded(body);
  if (!doc.is_object())
    return std::nullopt;
  if (auto settings = doc.find("default_generation_settings"); settings != doc.end())
    if (auto w = window_at(*settings, "n_ctx"))
      return w;
  return window_at(doc, "n_ctx");
}

std::string ollama_default_source(int64_t trained) {
  std::string out = "ollama: the model sets no num_ctx and is not loaded, so Ollama "
                    "serves it with its default context (OLLAMA_CONTEXT_LENGTH, else "
                    "2,048 to 4,096 tokens by version, more with much VRAM)";
  if (trained > 0)
    out += "; the model was trained for " + sdk::digit_groups(trained) + " tokens";
  out += "; raise it with OLLAMA_CONTEXT_LENGTH=65536 or PARAMETER num_ctx 65536 in a "
         "Modelfile, or set context_window";
  return out;
}

// -- the probe ------------------------------------------------------------------

/// Collects one answer of a probe (bounded) and hands it back.
class probe_sink final : public sdk::http_response_sink {
public:
  probe_sink(std::shared_ptr<model_probe> probe, model_probe::step what)
    : probe_(std::move(probe)), what_(what) {
    // nop
  }

  bool on_response(int status, const sdk::http_headers&) override {
    status_ = status;
    return true;
  }

  bool on_data(std::string_view bytes) override {
    auto room = static_cast<size_t>(max_probe_body)
                - std::min(body_.size(), static_cast<size_t>(max_probe_body));
    if (bytes.size() > room)
      return false; // too large: aborted, read as no answer
    body_.append(bytes);
    return true;
  }

  void on_complete(std::optional<sdk::error> failure) override {
    probe_->on_answer(what_, status_, std::move(body_), failure.has_value());
  }

private:
  std::shared_ptr<model_probe> probe_;
  model_probe::step what_;
  int status_ = 0;
  std::string body_;
};

model_probe::model_probe(sdk::host_context& host, provider_config cfg)
  : host_(host), cfg_(std::move(cfg)) {
  // nop
}

size_t model_probe::requests_started() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return requests_;
}

void model_probe::describe(sdk::model_info base, std::function<void(sdk::model_info)> done) {
  {
    std::unique_lock<std::mutex> guard{mtx_};
    switch (phase_) {
      case phase::done: {
        guard.unlock();
        if (result_) {
          base.context_window = result_->tokens;
          base.context_window_source = result_->source;
        }
        done(std::move(base));
        return;
      }
      case phase::running:
        waiting_.push_back(std::move(done));
        return;
      case phase::idle:
        phase_ = phase::running;
        base_ = std::move(base);
        waiting_.push_back(std::move(done));
        deadline_ = std::chrono::steady_clock::now() + probe_budget;
        kind_ = kind_by_url(cfg_.base_url);
        break;
    }
  }
  if (cfg_.azure) {
    finish(std::nullopt);
    return;
  }
  start(step::models);
}

void model_probe::start(step what) {
  auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline_ - std::chrono::steady_clock::now());
  if (remaining.count() <= 0) {
    finish(std::nullopt);
    return;
  }
  auto root = server_root(cfg_.base_url);
  sdk::http_request req;
  req.method = "GET";
  switch (what) {
    case step::models:
      req.url = cfg_.base_url + "/models";
      break;
    case step::lm_studio:
      req.url = root + "/api/v0/models";
      break;
    case step::ollama_show:
      req.method = "POST";
      req.url = root + "/api/show";
      // `model` since Ollama 0.5; `name` before.
      req.body = sdk::dump_json(json{{"model", cfg_.model}, {"name", cfg_.model}});
      req.headers.emplace_back("Content-Type", "application/json");
      break;
    case step::ollama_ps:
      req.url = root + "/api/ps";
      break;
    case step::llama_cpp:
      req.url = root + "/props";
      break;
  }
  req.headers.emplace_back("Accept", "application/json");
  // The credentials and headers of the chat requests: gateways want them.
  if (!cfg_.api_key.empty())
    req.headers.emplace_back("Authorization", "Bearer " + cfg_.api_key);
  if (!cfg_.organization.empty())
    req.headers.emplace_back("OpenAI-Organization", cfg_.organization);
  if (!cfg_.project.empty())
    req.headers.emplace_back("OpenAI-Project", cfg_.project);
  for (const auto& field : cfg_.headers)
    req.headers.push_back(field);
  req.connect_timeout = std::min(probe_connect_timeout, remaining);
  req.total_timeout = remaining;
  req.stall_timeout = remaining;
  req.max_response_bytes = max_probe_body;
  req.max_redirects = 3;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    ++requests_;
  }
  // The HTTP client keeps the sink (and so this probe) alive until it
  // completed; the call's handle is not needed: it ends by itself.
  host_.http().start(std::move(req), std::make_shared<probe_sink>(shared_from_this(), what));
}

void model_probe::on_answer(step what, int status, std::string body, bool failed) {
  auto ok = !failed && status >= 200 && status < 300;
  auto next_by_kind = [this] {
    switch (kind_) {
      case server_kind::lm_studio:
        start(step::lm_studio);
        return;
      case server_kind::ollama:
        start(step::ollama_show);
        return;
      case server_kind::llama_cpp:
        start(step::llama_cpp);
        return;
      default:
        finish(std::nullopt);
        return;
    }
  };
  switch (what) {
    case step::models: {
      if (!ok) {
        next_by_kind();
        return;
      }
      auto answer = read_models(body, cfg_.model, cfg_.base_url);
      if (answer.window) {
        finish(std::move(answer.window));
        return;
      }
      if (kind_ == server_kind::unknown)
        kind_ = answer.kind;
      next_by_kind();
      return;
    }
    case step::lm_studio:
      finish(ok ? read_lm_studio(body, cfg_.model) : std::nullopt);
      return;
    case step::ollama_show: {
      auto show = ok ? read_ollama_show(body) : std::nullopt;
      if (show && show->num_ctx) {
        finish(window_fact{*show->num_ctx, "ollama /api/show num_ctx"});
        return;
      }
      if (!show) {
        finish(std::nullopt);
        return;
      }
      ollama_trained_ = show->trained;
      start(step::ollama_ps);
      return;
    }
    case step::ollama_ps: {
      auto loaded = ok ? read_ollama_ps(body, cfg_.model) : std::nullopt;
      if (loaded) {
        finish(window_fact{*loaded, "ollama /api/ps context_length (the loaded model)"});
        return;
      }
      // Not loaded: the window is the server's default, which its API does
      // not say. Unknown, with the reason and the remedy.
      finish(window_fact{0, ollama_default_source(ollama_trained_)});
      return;
    }
    case step::llama_cpp: {
      auto n = ok ? read_llama_cpp_props(body) : std::nullopt;
      if (n)
        finish(window_fact{*n, "llama.cpp /props n_ctx"});
      else
        finish(std::nullopt);
      return;
    }
  }
}

void model_probe::finish(std::optional<window_fact> found) {
  std::vector<std::function<void(sdk::model_info)>> waiting;
  sdk::model_info info;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (phase_ == phase::done)
      return;
    phase_ = phase::done;
    result_ = std::move(found);
    waiting.swap(waiting_);
    info = base_;
    if (result_) {
      info.context_window = result_->tokens;
      info.context_window_source = result_->source;
    }
  }
  if (info.context_window > 0)
    host_.log().log(sdk::log_level::debug, "model " + cfg_.model + ": context window "
                                             + std::to_string(info.context_window) + " tokens ("
                                             + info.context_window_source + ")");
  for (auto& done : waiting)
    done(info);
}

} // namespace quarry::plugins::llm_openai
