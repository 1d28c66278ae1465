// The `openai` LLM provider: configuration, request building and the
// streaming call that feeds the host's HTTP client into a stream_decoder.

#include "openai_provider.hpp"

#include "openai_models.hpp"
#include "openai_stream.hpp"

#include "quarry/sdk/json.hpp"
#include "quarry/sdk/secrets.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace quarry::plugins::llm_openai {

namespace {

using nlohmann::json;

// Largest error (or non-streamed JSON) body we keep.
constexpr size_t max_kept_body = 8 * 1024 * 1024;

[[noreturn]] void reject(const std::string& what) {
  throw std::invalid_argument("openai: " + what);
}

std::string get_string(const std::string& key, const json& value) {
  if (!value.is_string())
    reject("`" + key + "` must be a string");
  return value.get<std::string>();
}

bool get_bool(const std::string& key, const json& value) {
  if (!value.is_boolean())
    reject("`" + key + "` must be true or false");
  return value.get<bool>();
}

int64_t get_count(const std::string& key, const json& value) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0)
    reject("`" + key + "` must be a non-negative integer");
  return value.get<int64_t>();
}

// `auto` (nothing), true or false.
std::optional<bool> get_auto_bool(const std::string& key, const json& value) {
  if (value.is_string() && value.get<std::string>() == "auto")
    return std::nullopt;
  if (!value.is_boolean())
    reject("`" + key + "` must be true, false or auto");
  return value.get<bool>();
}

// `reasoning_tags`: true (the defaults), false (none) or a list of pairs,
// each `[open, close]` or `{open, close}`.
std::vector<sdk::reasoning_tag> parse_tags(const json& value) {
  if (value.is_boolean())
    return value.get<bool>() ? sdk::default_reasoning_tags() : std::vector<sdk::reasoning_tag>{};
  auto bad = [] {
    reject("`reasoning_tags` must be true, false or a list of [open, close] pairs, "
           "e.g. [[\"<think>\", \"</think>\"]]");
  };
  if (!value.is_array() || value.size() > 16)
    bad();
  std::vector<sdk::reasoning_tag> out;
  for (const auto& item : value) {
    sdk::reasoning_tag tag;
    if (item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_string()) {
      tag.open = item[0].get<std::string>();
      tag.close = item[1].get<std::string>();
    } else if (item.is_object() && item.size() == 2 && item.contains("open")
               && item.contains("close") && item["open"].is_string() && item["close"].is_string()) {
      tag.open = item["open"].get<std::string>();
      tag.close = item["close"].get<std::string>();
    } else {
      bad();
    }
    for (const auto* t : {&tag.open, &tag.close})
      if (t->empty() || t->size() > 64
          || !std::all_of(t->begin(), t->end(), [](char c) { return c > 0x20 && c < 0x7f; }))
        reject("`reasoning_tags`: a tag must be 1 to 64 printable ASCII characters "
               "without spaces, not `"
               + *t + "`");
    out.push_back(std::move(tag));
  }
  return out;
}

json to_json(const sdk::chat_message& msg, bool round_trip) {
  json result;
  result["role"] = sdk::to_string(msg.author);
  switch (msg.author) {
    case sdk::role::assistant:
      if (msg.content.empty())
        result["content"] = nullptr;
      else
        result["content"] = msg.content;
      // DeepSeek's thinking mode: a tool-call turn goes back with its
      // reasoning (an empty one too: the field must be there).
      if (round_trip && !msg.tool_calls.empty())
        result["reasoning_content"] = msg.reasoning;
      if (!msg.tool_calls.empty()) {
        auto calls = json::array();
        for (const auto& call : msg.tool_calls)
          calls.push_back({{"id", call.id},
                           {"type", "function"},
                           {"function",
                            {{"name", call.name},
                             {"arguments", call.arguments.empty() ? "{}" : call.arguments}}}});
        result["tool_calls"] = std::move(calls);
      }
      break;
    case sdk::role::tool:
      result["tool_call_id"] = msg.tool_call_id;
      result["content"] = msg.content;
      break;
    default:
      result["content"] = msg.content;
  }
  return result;
}

// The state of one chat call, shared by the handle given to the caller and
// the sink given to the HTTP client. A recursive mutex serialises the I/O
// thread's deliveries with cancel() from any thread (a sink may cancel from
// inside one of its callbacks); `finished_` makes the final callback unique.
class call_state final : public stream_handler {
public:
  call_state(std::shared_ptr<sdk::chat_sink> sink, std::string model, std::string secret,
             sdk::reasoning_tag_splitter splitter, std::shared_ptr<learned_facts> learned,
             bool round_trip, bool may_learn)
    : sink_(std::move(sink)),
      model_(std::move(model)),
      secret_(std::move(secret)),
      learned_(std::move(learned)),
      round_trip_(round_trip),
      may_learn_(may_learn),
      decoder_(std::move(splitter)) {
    // nop
  }

  void set_http(std::shared_ptr<sdk::http_call> call) {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    if (!finished_)
      http_ = std::move(call);
  }

  void cancel() {
    std::shared_ptr<sdk::http_call> http;
    {
      std::lock_guard<std::recursive_mutex> guard{mtx_};
      if (finished_)
        return;
      http = http_;
      fail(sdk::make_error(sdk::errc::cancelled, "chat call cancelled"), decoder_.streamed());
    }
    if (http)
      http->cancel();
  }

  bool on_response(int status, const sdk::http_headers& headers) {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    if (finished_)
      return done_ok_;
    status_ = status;
    headers_ = headers;
    // A server that ignores `stream` answers with one JSON document.
    auto type = sdk::find_header(headers, "content-type");
    whole_json_ = status < 400 && type && type->find("application/json") != std::string::npos;
    return true;
  }

  bool on_data(std::string_view bytes) {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    if (finished_)
      return done_ok_; // drain what follows [DONE], abort otherwise
    if (status_ >= 400 || whole_json_) {
      auto room = max_kept_body - std::min(max_kept_body, body_.size());
      body_.append(bytes.data(), std::min(room, bytes.size()));
      return true;
    }
    auto state = decoder_.feed(bytes, *this);
    if (finished_)
      return false; // the sink cancelled from inside a callback
    switch (state) {
      case stream_decoder::state::running:
        return true;
      case stream_decoder::state::done:
        succeed();
        return true;
      case stream_decoder::state::failed:
        fail(*decoder_.failure(), decoder_.streamed());
        return false;
    }
    return false;
  }

  void on_complete(std::optional<sdk::error> failure) {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    if (finished_) {
      http_.reset();
      return;
    }
    if (failure && failure->code != sdk::errc::cancelled && decoder_.finished() && status_ < 400
        && !whole_json_) {
      // The answer was complete (a finish reason arrived) but the server
      // neither sent [DONE] nor closed the connection: keep the answer.
      succeed();
    } else if (failure) {
      fail(std::move(*failure), decoder_.streamed());
    } else if (status_ >= 400) {
      auto err = classify_error(status_, headers_, std::string_view{body_});
      if (may_learn_ && !round_trip_ && err.code == sdk::errc::bad_request
          && asks_for_reasoning_back(err.message)) {
        // The server needs the reasoning of tool-call turns back: from now
        // on it gets it, and this request is worth one more try.
        learned_->round_trip = true;
        err.retry_hint = true;
        err.message += " (Quarry now sends reasoning_content back; set "
                       "reasoning_round_trip: true to start with it)";
      }
      fail(std::move(err), false);
    } else {
      auto state = stream_decoder::state::running;
      if (whole_json_) {
        // One JSON body: decoded as the one event of a stream, whose end is
        // the answer's end.
        sdk::sse_event ev;
        ev.data = std::move(body_);
        decoder_.on_event(ev, *this);
        state = decoder_.finish_document(*this);
      } else {
        state = decoder_.finish(*this);
      }
      if (finished_)
        return;
      if (state == stream_decoder::state::done)
        succeed();
      else
        fail(*decoder_.failure(), decoder_.streamed());
    }
  }

  // -- stream_handler ---------------------------------------------------------

  void on_text(std::string_view delta) override {
    if (finished_)
      return;
    auto keep = sink_;
    keep->on_text(delta);
  }

  void on_reasoning(std::string_view delta) override {
    if (finished_)
      return;
    auto keep = sink_;
    keep->on_reasoning(delta);
  }

  void on_tool_call(const sdk::tool_call_delta& delta) override {
    if (finished_)
      return;
    auto keep = sink_;
    keep->on_tool_call(delta);
  }

  void on_usage(const sdk::usage& counts) override {
    if (finished_)
      return;
    auto keep = sink_;
    keep->on_usage(counts);
  }

private:
  void succeed() {
    decoder_.end_text(*this);
    if (finished_)
      return; // the sink cancelled from inside a callback
    if (decoder_.splitter().orphan_closer_seen())
      learned_->opener_in_prompt = true;
    auto result = decoder_.result();
    if (auto why = empty_answer(result)) {
      fail(sdk::make_error(sdk::errc::empty_response, *why), decoder_.streamed());
      return;
    }
    finished_ = true;
    done_ok_ = true;
    if (result.model.empty())
      result.model = model_;
    auto sink = std::move(sink_);
    http_.reset();
    sink->on_done(result);
  }

  /// Why `result` is an empty answer, or nothing: no text (white space is
  /// none) and no tool call, unless the output limit or a filter explains
  /// it (the host decides about those).
  std::optional<std::string> empty_answer(const sdk::chat_result& result) const {
    if (!result.tool_calls.empty() || result.finish == sdk::finish_reason::length
        || result.finish == sdk::finish_reason::content_filter)
      return std::nullopt;
    if (result.text.find_first_not_of(" \t\r\n") != std::string::npos)
      return std::nullopt;
    std::string why = "the model returned an empty answer (";
    if (!decoder_.choice_seen())
      why += "no choice, ";
    why += "no text, no tool call, finish reason ";
    why += sdk::to_string(result.finish);
    if (!result.reasoning.empty())
      why += ", " + std::to_string(result.reasoning.size()) + " bytes of reasoning only";
    why += ")";
    return why;
  }

  void fail(sdk::error err, bool streamed) {
    finished_ = true;
    err.message = redact(std::move(err.message), secret_);
    auto sink = std::move(sink_);
    http_.reset();
    sink->on_error(err, streamed);
  }

  std::recursive_mutex mtx_;
  bool finished_ = false;
  bool done_ok_ = false;
  std::shared_ptr<sdk::chat_sink> sink_;
  std::shared_ptr<sdk::http_call> http_;
  std::string model_;
  std::string secret_;
  std::shared_ptr<learned_facts> learned_;
  bool round_trip_ = false;
  // The configuration leaves reasoning_round_trip to Quarry (`auto`).
  bool may_learn_ = true;
  int status_ = 0;
  bool whole_json_ = false;
  sdk::http_headers headers_;
  std::string body_;
  stream_decoder decoder_;
};

class http_sink final : public sdk::http_response_sink {
public:
  explicit http_sink(std::shared_ptr<call_state> state) : state_(std::move(state)) {
    // nop
  }

  bool on_response(int status, const sdk::http_headers& headers) override {
    return state_->on_response(status, headers);
  }

  bool on_data(std::string_view bytes) override {
    return state_->on_data(bytes);
  }

  void on_complete(std::optional<sdk::error> failure) override {
    state_->on_complete(std::move(failure));
  }

private:
  std::shared_ptr<call_state> state_;
};

class call_handle final : public sdk::chat_call {
public:
  explicit call_handle(std::shared_ptr<call_state> state) : state_(std::move(state)) {
    // nop
  }

  void cancel() override {
    state_->cancel();
  }

private:
  std::shared_ptr<call_state> state_;
};

// -- configuration ------------------------------------------------------------

// The options that are one string, one flag or one count each.
const std::pair<const char*, std::string provider_config::*> string_keys[] = {
  {"base_url", &provider_config::base_url},
  {"api_key", &provider_config::api_key},
  {"model", &provider_config::model},
  {"api_version", &provider_config::api_version},
  {"organization", &provider_config::organization},
  {"project", &provider_config::project},
  {"reasoning_effort", &provider_config::reasoning_effort}};

const std::pair<const char*, bool provider_config::*> flag_keys[] = {
  {"azure", &provider_config::azure},
  {"reasoning", &provider_config::reasoning},
  {"supports_tools", &provider_config::supports_tools}};

const std::pair<const char*, int64_t provider_config::*> count_keys[] = {
  {"max_tokens", &provider_config::max_tokens},
  {"context_window", &provider_config::context_window}};

// Sets the member of `table` named `key` through `get`; false when the
// table has no such key.
template <class Table, class Get>
bool set_from(const Table& table, provider_config& cfg, const std::string& key, const json& value,
              Get get) {
  for (const auto& [name, member] : table)
    if (key == name) {
      cfg.*member = get(key, value);
      return true;
    }
  return false;
}

} // namespace

provider_config parse_config(const json& config) {
  if (!config.is_object())
    reject("the configuration must be an object");
  provider_config cfg;
  for (const auto& [key, value] : config.items()) {
    if (set_from(string_keys, cfg, key, value, get_string)
        || set_from(flag_keys, cfg, key, value, get_bool)
        || set_from(count_keys, cfg, key, value, get_count))
      continue;
    if (key == "headers") {
      if (!value.is_object())
        reject("`headers` must be a map of header names to strings");
      for (const auto& [name, field] : value.items()) {
        if (name.empty() || name.find_first_of(":\r\n ") != std::string::npos)
          reject("`headers` has an invalid header name `" + name + "`");
        auto text = get_string("headers." + name, field);
        if (text.find_first_of("\r\n") != std::string::npos)
          reject("`headers." + name + "` must not contain line breaks");
        cfg.headers.emplace_back(name, std::move(text));
      }
    } else if (key == "reasoning_tags") {
      cfg.reasoning_tags = parse_tags(value);
    } else if (key == "reasoning_opener_in_prompt") {
      cfg.opener_in_prompt = get_auto_bool(key, value);
    } else if (key == "reasoning_round_trip") {
      cfg.reasoning_round_trip = get_auto_bool(key, value);
    } else if (key == "temperature") {
      if (!value.is_number())
        reject("`temperature` must be a number");
      cfg.temperature = value.get<double>();
    } else {
      reject("unknown configuration key `" + key + "`");
    }
  }
  if (cfg.model.empty())
    reject("`model` is required");
  if (cfg.base_url.rfind("http://", 0) != 0 && cfg.base_url.rfind("https://", 0) != 0)
    reject("`base_url` must start with http:// or https://");
  while (!cfg.base_url.empty() && cfg.base_url.back() == '/')
    cfg.base_url.pop_back();
  return cfg;
}

// -- requests -----------------------------------------------------------------

std::string request_url(const provider_config& cfg) {
  auto url = cfg.base_url + "/chat/completions";
  if (!cfg.api_version.empty())
    url += "?api-version=" + sdk::url_encode(cfg.api_version);
  return url;
}

json request_body(const provider_config& cfg, const sdk::chat_request& req, bool round_trip) {
  json body;
  body["model"] = req.model.empty() ? cfg.model : req.model;
  auto messages = json::array();
  for (const auto& msg : req.messages)
    messages.push_back(to_json(msg, round_trip));
  body["messages"] = std::move(messages);
  if (!req.tools.empty() && cfg.supports_tools) {
    auto tools = json::array();
    for (const auto& tool : req.tools)
      tools.push_back(tool.to_openai());
    body["tools"] = std::move(tools);
    body["tool_choice"] = sdk::to_string(req.choice);
  }
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto max_tokens = req.max_tokens > 0 ? req.max_tokens : cfg.max_tokens;
  if (max_tokens > 0)
    body[cfg.reasoning ? "max_completion_tokens" : "max_tokens"] = max_tokens;
  auto effort = req.reasoning_effort.empty() ? cfg.reasoning_effort : req.reasoning_effort;
  if (!effort.empty())
    body["reasoning_effort"] = effort;
  auto temperature = req.temperature ? req.temperature : cfg.temperature;
  if (temperature && !cfg.reasoning)
    body["temperature"] = *temperature;
  return body;
}

namespace {

// One message as to_json() makes it, written as dump_json() writes that
// object (keys in nlohmann::json's sorted order).
void append_message(std::string& out, const sdk::chat_message& msg, bool round_trip) {
  auto key = [&](const char* name) {
    out += '"';
    out += name;
    out += "\":";
  };
  out += '{';
  switch (msg.author) {
    case sdk::role::assistant:
      key("content");
      if (msg.content.empty())
        out += "null";
      else
        sdk::append_json_string(out, msg.content);
      if (round_trip && !msg.tool_calls.empty()) {
        out += ',';
        key("reasoning_content");
        sdk::append_json_string(out, msg.reasoning);
      }
      out += ',';
      key("role");
      sdk::append_json_string(out, sdk::to_string(msg.author));
      if (!msg.tool_calls.empty()) {
        out += ',';
        key("tool_calls");
        out += '[';
        bool first = true;
        for (const auto& call : msg.tool_calls) {
          if (!first)
            out += ',';
          first = false;
          out += "{\"function\":{\"arguments\":";
          sdk::append_json_string(out, call.arguments.empty() ? std::string_view{"{}"}
                                                              : std::string_view{call.arguments});
          out += ",\"name\":";
          sdk::append_json_string(out, call.name);
          out += "},\"id\":";
          sdk::append_json_string(out, call.id);
          out += ",\"type\":\"function\"}";
        }
        out += ']';
      }
      break;
    case sdk::role::tool:
      key("content");
      sdk::append_json_string(out, msg.content);
      out += ',';
      key("role");
      sdk::append_json_string(out, sdk::to_string(msg.author));
      out += ',';
      key("tool_call_id");
      sdk::append_json_string(out, msg.tool_call_id);
      break;
    default:
      key("content");
      sdk::append_json_string(out, msg.content);
      out += ',';
      key("role");
      sdk::append_json_string(out, sdk::to_string(msg.author));
  }
  out += '}';
}

// The `tools` member's text for `tools`, kept for the last few sets of
// tools each thread wrote: a role sends the same tools with every call, and
// each request copied their schemas into a tree and wrote them again. A set
// is the same when every tool's name, description and schema compare equal
// (a tree comparison, without allocating).
const std::string& tools_text_for(const std::vector<sdk::tool_definition>& tools) {
  struct written {
    std::vector<sdk::tool_definition> tools;
    std::string text;
  };
  constexpr size_t kept = 8;
  thread_local std::vector<written> cache;
  auto same = [&](const written& w) {
    if (w.tools.size() != tools.size())
      return false;
    for (size_t i = 0; i < tools.size(); ++i)
      if (w.tools[i].name != tools[i].name || w.tools[i].description != tools[i].description
          || w.tools[i].parameters != tools[i].parameters)
        return false;
    return true;
  };
  for (auto i = cache.size(); i-- > 0;)
    if (same(cache[i]))
      return cache[i].text;
  auto list = json::array();
  for (const auto& tool : tools)
    list.push_back(tool.to_openai());
  if (cache.size() == kept)
    cache.erase(cache.begin());
  cache.push_back({tools, sdk::dump_json(list)});
  return cache.back().text;
}

} // namespace

std::string request_text(const provider_config& cfg, const sdk::chat_request& req,
                         bool round_trip) {
  // The keys in nlohmann::json's order (sorted), so that the text is
  // request_body(...) as dump_json() writes it, byte for byte (a unit test
  // compares them); the conversation is written once, without a tree.
  //
  // Sized once: the request is held while the call runs (and resent from
  // it on a retry), so a string regrown by doubling would keep up to twice
  // its text. Escapes are guessed at one byte in eight (quotes and line
  // breaks of tool results written as JSON text).
  static const std::string no_tools;
  const auto& tools_text = !req.tools.empty() && cfg.supports_tools ? tools_text_for(req.tools)
                                                                    : no_tools;
  size_t text = 0;
  size_t size = 512 + tools_text.size();
  for (const auto& msg : req.messages) {
    text += msg.content.size() + msg.reasoning.size();
    size += 64 + msg.tool_call_id.size();
    for (const auto& call : msg.tool_calls) {
      text += call.arguments.size();
      size += 64 + call.name.size() + call.id.size();
    }
  }
  size += text + text / 8;
  std::string out;
  out.reserve(size);
  out += '{';
  auto max_tokens = req.max_tokens > 0 ? req.max_tokens : cfg.max_tokens;
  if (max_tokens > 0) {
    out += cfg.reasoning ? "\"max_completion_tokens\":" : "\"max_tokens\":";
    out += std::to_string(max_tokens);
    out += ',';
  }
  out += "\"messages\":[";
  for (size_t i = 0; i < req.messages.size(); ++i) {
    if (i > 0)
      out += ',';
    append_message(out, req.messages[i], round_trip);
  }
  out += "],\"model\":";
  sdk::append_json_string(out, req.model.empty() ? cfg.model : req.model);
  auto effort = req.reasoning_effort.empty() ? cfg.reasoning_effort : req.reasoning_effort;
  if (!effort.empty()) {
    out += ",\"reasoning_effort\":";
    sdk::append_json_string(out, effort);
  }
  out += ",\"stream\":true,\"stream_options\":{\"include_usage\":true}";
  auto temperature = req.temperature ? req.temperature : cfg.temperature;
  if (temperature && !cfg.reasoning) {
    out += ",\"temperature\":";
    out += json(*temperature).dump();
  }
  if (!tools_text.empty()) {
    out += ",\"tool_choice\":";
    sdk::append_json_string(out, sdk::to_string(req.choice));
    out += ",\"tools\":";
    out += tools_text;
  }
  out += '}';
  // Escapes beyond the guess grew the string by doubling: what it does not
  // use is given back (one copy) rather than held while the call runs.
  if (out.capacity() - out.size() > out.size() / 4)
    out.shrink_to_fit();
  return out;
}

sdk::http_request build_request(const provider_config& cfg, const sdk::chat_request& req,
                                bool round_trip) {
  sdk::http_request result;
  result.method = "POST";
  result.url = request_url(cfg);
  result.headers.emplace_back("Content-Type", "application/json");
  result.headers.emplace_back("Accept", "text/event-stream");
  if (!cfg.api_key.empty()) {
    if (cfg.azure)
      result.headers.emplace_back("api-key", cfg.api_key);
    else
      result.headers.emplace_back("Authorization", "Bearer " + cfg.api_key);
  }
  if (!cfg.organization.empty())
    result.headers.emplace_back("OpenAI-Organization", cfg.organization);
  if (!cfg.project.empty())
    result.headers.emplace_back("OpenAI-Project", cfg.project);
  for (const auto& field : cfg.headers)
    result.headers.push_back(field);
  result.body = request_text(cfg, req, round_trip);
  return result;
}

std::string redact(std::string text, const std::string& secret) {
  return sdk::mask_secret(std::move(text), secret);
}

// -- provider -----------------------------------------------------------------

provider::provider(sdk::host_context& host, provider_config cfg)
  : host_(host), cfg_(std::move(cfg)), probe_(std::make_shared<model_probe>(host, cfg_)) {
  // nop
}

void provider::describe(std::function<void(sdk::model_info)> done) {
  auto facts = info();
  if (cfg_.context_window > 0) {
    facts.context_window_source = "config";
    done(std::move(facts));
    return;
  }
  probe_->describe(std::move(facts), std::move(done));
}

sdk::model_info provider::info() const {
  sdk::model_info result;
  result.model = cfg_.model;
  result.context_window = cfg_.context_window;
  result.supports_tools = cfg_.supports_tools;
  result.supports_reasoning = cfg_.reasoning;
  return result;
}

bool opener_in_prompt_by_name(std::string_view model) {
  auto name = sdk::to_lower(model);
  if (sdk::contains(name, "deepseek-r1") || sdk::contains(name, "r1-distill"))
    return true;
  // `...-r1`, `...-r1:7b`, `...-r1-0528`, `...:r1`: r1 as a word of the name.
  for (size_t pos = name.find("r1"); pos != std::string::npos; pos = name.find("r1", pos + 1)) {
    auto before = pos == 0 ? '-' : name[pos - 1];
    auto after = pos + 2 < name.size() ? name[pos + 2] : '-';
    auto sep = [](char c) { return c == '-' || c == ':' || c == '_' || c == '/' || c == '.'; };
    if (sep(before) && sep(after))
      return true;
  }
  return false;
}

bool round_trip_by_default(const std::string& base_url, const std::string& model) {
  return sdk::contains(sdk::to_lower(base_url), "api.deepseek.com")
         || sdk::to_lower(model).rfind("deepseek", 0) == 0;
}

bool asks_for_reasoning_back(std::string_view message) {
  return sdk::contains(sdk::to_lower(message), "reasoning_content");
}

bool provider::round_trip() const noexcept {
  if (cfg_.reasoning_round_trip)
    return *cfg_.reasoning_round_trip;
  return learned_->round_trip || round_trip_by_default(cfg_.base_url, cfg_.model);
}

std::shared_ptr<sdk::chat_call> provider::chat(sdk::chat_request request,
                                               std::shared_ptr<sdk::chat_sink> sink) {
  auto model = request.model.empty() ? cfg_.model : request.model;
  auto opener = cfg_.opener_in_prompt
                  ? *cfg_.opener_in_prompt
                  : learned_->opener_in_prompt || opener_in_prompt_by_name(model);
  auto round_trip = this->round_trip();
  auto state = std::make_shared<call_state>(
    std::move(sink), std::move(model), cfg_.api_key,
    sdk::reasoning_tag_splitter{cfg_.reasoning_tags, opener}, learned_, round_trip,
    !cfg_.reasoning_round_trip.has_value());
  auto http = host_.http().start(build_request(cfg_, request, round_trip),
                                 std::make_shared<http_sink>(state));
  state->set_http(std::move(http));
  return std::make_shared<call_handle>(std::move(state));
}

} // namespace quarry::plugins::llm_openai
