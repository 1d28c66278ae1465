// The fake LLM server: script parsing, request matching, and the rendering of
// scripted answers as OpenAI and Anthropic streams.

#include "support/fake_llm_server.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

namespace quarry::test {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using std::chrono::milliseconds;

// Arbitrary but fixed `created` timestamp, for deterministic output.
constexpr int64_t created_time = 1700000000;

// Pause between the last bytes and a `reset_after_bytes` reset, so that the
// client reads the bytes before the reset discards them.
constexpr milliseconds reset_grace{50};

const char* event_stream_type = "text/event-stream; charset=utf-8";

sdk::error script_error(std::string message) {
  return sdk::make_error(sdk::errc::bad_request, "fake_llm_server: " + std::move(message));
}

bool ends_with(std::string_view x, std::string_view suffix) {
  return x.size() >= suffix.size()
         && x.compare(x.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

std::string dump(const ojson& x, int indent = -1) {
  return x.dump(indent, ' ', false, ojson::error_handler_t::replace);
}

std::string dump(const json& x, int indent = -1) {
  return x.dump(indent, ' ', false, json::error_handler_t::replace);
}

// Splits `text` into pieces of `n` words; each piece but the first starts
// with the whitespace before its first word. The pieces concatenate to
// `text`.
std::vector<std::string> split_words(const std::string& text, size_t n) {
  std::vector<std::string> result;
  if (text.empty())
    return result;
  std::vector<size_t> starts;
  for (size_t i = 0; i < text.size(); ++i)
    if (!is_space(text[i]) && (i == 0 || is_space(text[i - 1])))
      starts.push_back(i);
  size_t begin = 0;
  for (size_t k = std::max<size_t>(n, 1); k < starts.size(); k += std::max<size_t>(n, 1)) {
    auto cut = starts[k];
    while (cut > begin && is_space(text[cut - 1]))
      --cut;
    if (cut > begin) {
      result.push_back(text.substr(begin, cut - begin));
      begin = cut;
    }
  }
  result.push_back(text.substr(begin));
  return result;
}

// Splits `text` into pieces of about `n` bytes, never inside a UTF-8
// sequence.
std::vector<std::string> split_bytes(const std::string& text, size_t n) {
  std::vector<std::string> result;
  n = std::max<size_t>(n, 1);
  size_t i = 0;
  while (i < text.size()) {
    auto end = std::min(i + n, text.size());
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
      ++end;
    result.push_back(text.substr(i, end - i));
    i = end;
  }
  return result;
}

std::optional<std::string> read_whole_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return std::nullopt;
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad())
    return std::nullopt;
  return buf.str();
}

std::string resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || path.front() == '/' || base_dir.empty())
    return path;
  return base_dir + "/" + path;
}

std::string content_type_for(const std::string& path) {
  if (ends_with(path, ".sse"))
    return event_stream_type;
  if (ends_with(path, ".json"))
    return "application/json";
  return "application/octet-stream";
}

// Appends the text in a message `content` (a string or an array of blocks,
// tool results included) to `out`.
void collect_text(const json& content, std::string& out) {
  if (content.is_string()) {
    if (!out.empty())
      out += '\n';
    out += content.get<std::string>();
  } else if (content.is_array()) {
    for (const auto& x : content)
      collect_text(x, out);
  } else if (content.is_object()) {
    if (auto i = content.find("text"); i != content.end())
      collect_text(*i, out);
    if (auto i = content.find("content"); i != content.end())
      collect_text(*i, out);
  }
}

// Normalizes a tool_choice of either protocol, or a script's expectation, to
// `unset`, `auto`, `none`, `required` or `tool:NAME`.
std::string normalize_tool_choice(const json& x) {
  if (x.is_null())
    return "unset";
  if (x.is_string()) {
    auto value = x.get<std::string>();
    if (value == "any")
      return "required";
    if (value.compare(0, 9, "function:") == 0)
      return "tool:" + value.substr(9);
    return value;
  }
  if (!x.is_object())
    return dump(x);
  auto type = x.value("type", std::string{});
  if (type == "function") {
    auto fn = x.find("function");
    if (fn != x.end() && fn->is_object())
      return "tool:" + fn->value("name", std::string{});
    return "tool:" + x.value("name", std::string{});
  }
  if (type == "tool")
    return "tool:" + x.value("name", std::string{});
  if (type == "any")
    return "required";
  return type;
}

// What matching needs to know about a request.
struct request_info {
  std::string last_user;
  std::string system;
  std::string all;
  std::vector<std::string> tools;
  std::string tool_choice;
  std::string model;
  bool stream = false;
  bool include_usage = false;
  // An assistant turn with tool calls lacks its reasoning: OpenAI without
  // `reasoning_content`, Anthropic without a leading thinking block.
  bool tool_turn_without_reasoning = false;
  // The body's size for the default input token count: its bytes without
  // the occurrences of fake_llm_server::uncounted() texts.
  size_t counted_bytes = 0;
};

request_info inspect(const llm_request& req) {
  request_info result;
  const auto& body = req.body;
  if (!body.is_object()) {
    result.tool_choice = "unset";
    return result;
  }
  if (auto i = body.find("model"); i != body.end() && i->is_string())
    result.model = i->get<std::string>();
  if (auto i = body.find("stream"); i != body.end() && i->is_boolean())
    result.stream = i->get<bool>();
  if (auto i = body.find("stream_options"); i != body.end() && i->is_object())
    if (auto j = i->find("include_usage"); j != i->end() && j->is_boolean())
      result.include_usage = j->get<bool>();
  std::string top_system;
  if (auto i = body.find("system"); i != body.end())
    collect_text(*i, top_system);
  result.system = top_system;
  if (auto i = body.find("messages"); i != body.end() && i->is_array()) {
    for (const auto& msg : *i) {
      if (!msg.is_object())
        continue;
      auto role = msg.value("role", std::string{});
      auto content = msg.find("content");
      if (content == msg.end())
        continue;
      if (role == "system" || role == "developer")
        collect_text(*content, result.system);
      if (role == "user") {
        result.last_user.clear();
        collect_text(*content, result.last_user);
      }
      if (role == "assistant") {
        auto calls = msg.find("tool_calls");
        if (calls != msg.end() && calls->is_array() && !calls->empty()
            && !msg.contains("reasoning_content"))
          result.tool_turn_without_reasoning = true;
        if (content->is_array()) {
          bool tool_use = false;
          for (const auto& block : *content)
            if (block.is_object() && block.value("type", std::string{}) == "tool_use")
              tool_use = true;
          auto first = content->empty() || !(*content)[0].is_object()
                         ? std::string{}
                         : (*content)[0].value("type", std::string{});
          if (tool_use && first != "thinking" && first != "redacted_thinking")
            result.tool_turn_without_reasoning = true;
        }
      }
      collect_text(*content, result.all);
    }
  }
  if (!top_system.empty())
    result.all = top_system + "\n" + result.all;
  if (auto i = body.find("tools"); i != body.end() && i->is_array()) {
    for (const auto& tool : *i) {
      if (!tool.is_object())
        continue;
      auto fn = tool.find("function");
      if (fn != tool.end() && fn->is_object())
        result.tools.push_back(fn->value("name", std::string{}));
      else
        result.tools.push_back(tool.value("name", std::string{}));
    }
  }
  auto choice = body.find("tool_choice");
  result.tool_choice = normalize_tool_choice(choice == body.end() ? json{} : *choice);
  return result;
}

std::string json_string_or_dump(const json& x) {
  return x.is_string() ? x.get<std::string>() : dump(x);
}

std::string shorten(const std::string& x, size_t n) {
  if (x.size() <= n)
    return x;
  return x.substr(0, n) + "...";
}

// -- script pieces ------------------------------------------------------------

struct tool_call_spec {
  std::string name;
  std::string arguments;
  std::string id;
};

struct respond_spec {
  std::string text;
  std::string reasoning;
  std::vector<tool_call_spec> tool_calls;
  std::string finish_reason;
  std::optional<int64_t> input_tokens;
  std::optional<int64_t> output_tokens;
  size_t chunk_words = 1;
  size_t args_chunk_chars = 8;
  std::string model;
  std::string reasoning_field = "reasoning_content";
  std::optional<bool> include_usage;
  std::optional<bool> stream;
  sdk::http_headers headers;
};

struct error_spec {
  int status = 500;
  std::optional<std::string> body;
  std::string content_type = "application/json";
  std::string type;
  std::string message;
  std::string code;
  sdk::http_headers headers;
};

struct replay_spec {
  std::string bytes;
  std::string content_type;
  int status = 200;
  sdk::http_headers headers;
  size_t chunk_bytes = 0;
};

struct fault_spec {
  milliseconds latency{0};
  milliseconds chunk_delay{0};
  std::optional<uint64_t> stall_after;
  std::optional<uint64_t> reset_after;
  // Index of the event before which an invalid data line goes; -1: none.
  int64_t malformed_at = -1;
  // Whether to drop the terminating event ([DONE] / message_stop).
  bool drop_terminal = false;
  // Number of events to keep; -1: all.
  int64_t keep_events = -1;
};

// Reads typed fields of one JSON object, remembering the first error.
class reader {
public:
  reader(const json& obj, std::string where) : obj_(obj), where_(std::move(where)) {
    if (!obj_.is_object())
      fail("must be an object");
  }

  // Fails if the object has a key outside `allowed`.
  void only(std::initializer_list<const char*> allowed) {
    if (!obj_.is_object())
      return;
    for (const auto& item : obj_.items()) {
      const auto& key = item.key();
      auto known = std::any_of(allowed.begin(), allowed.end(),
                               [&key](const char* x) { return key == x; });
      if (!known)
        fail("unknown key `" + key + "`");
    }
  }

  bool has(const char* key) const {
    return obj_.is_object() && obj_.contains(key);
  }

  const json* get(const char* key) const {
    if (!obj_.is_object())
      return nullptr;
    auto i = obj_.find(key);
    return i == obj_.end() ? nullptr : &*i;
  }

  void str(const char* key, std::string& out) {
    if (auto x = get(key)) {
      if (x->is_string())
        out = x->get<std::string>();
      else
        fail(std::string{"`"} + key + "` must be a string");
    }
  }

  void str(const char* key, std::optional<std::string>& out) {
    if (auto x = get(key)) {
      if (x->is_string())
        out = x->get<std::string>();
      else
        fail(std::string{"`"} + key + "` must be a string");
    }
  }

  void boolean(const char* key, std::optional<bool>& out) {
    if (auto x = get(key)) {
      if (x->is_boolean())
        out = x->get<bool>();
      else
        fail(std::string{"`"} + key + "` must be true or false");
    }
  }

  template <class Int>
  void integer(const char* key, Int& out, int64_t min_value = 0) {
    if (auto x = get(key)) {
      if (x->is_number_integer() && x->get<int64_t>() >= min_value)
        out = static_cast<Int>(x->get<int64_t>());
      else
        fail(std::string{"`"} + key + "` must be an integer >= " + std::to_string(min_value));
    }
  }

  void integer(const char* key, std::optional<int64_t>& out) {
    int64_t value = 0;
    if (has(key)) {
      integer(key, value);
      out = value;
    }
  }

  void integer(const char* key, std::optional<uint64_t>& out) {
    uint64_t value = 0;
    if (has(key)) {
      integer(key, value);
      out = value;
    }
  }

  void millis(const char* key, milliseconds& out) {
    if (!has(key))
      return;
    int64_t value = 0;
    integer(key, value);
    out = milliseconds{value};
  }

  void headers(const char* key, sdk::http_headers& out) {
    auto x = get(key);
    if (x == nullptr)
      return;
    if (!x->is_object()) {
      fail(std::string{"`"} + key + "` must be an object");
      return;
    }
    for (const auto& [name, value] : x->items())
      out.emplace_back(name, json_string_or_dump(value));
  }

  void fail(std::string message) {
    if (!error)
      error = where_ + ": " + std::move(message);
  }

  std::optional<std::string> error;

private:
  const json& obj_;
  std::string where_;
};

void read_faults(reader& in, fault_spec& out) {
  in.millis("latency_ms", out.latency);
  in.millis("chunk_delay_ms", out.chunk_delay);
  in.integer("stall_after_bytes", out.stall_after);
  in.integer("reset_after_bytes", out.reset_after);
  if (auto x = in.get("malformed_chunk")) {
    if (x->is_boolean())
      out.malformed_at = x->get<bool>() ? 1 : -1;
    else if (x->is_number_integer() && x->get<int64_t>() >= 0)
      out.malformed_at = x->get<int64_t>();
    else
      in.fail("`malformed_chunk` must be true, false or an event index");
  }
  if (auto x = in.get("truncate")) {
    if (x->is_boolean())
      out.drop_terminal = x->get<bool>();
    else if (x->is_number_integer() && x->get<int64_t>() >= 0)
      out.keep_events = x->get<int64_t>();
    else
      in.fail("`truncate` must be true, false or a number of events");
  }
}

} // namespace

// -- rules --------------------------------------------------------------------

struct fake_llm_server::rule {
  // What the rule matches.
  std::string protocol;
  std::optional<std::string> last_user_contains;
  std::optional<std::string> system_contains;
  std::optional<std::string> message_contains;
  std::optional<std::string> path_contains;
  std::optional<std::string> model;
  std::optional<std::string> tool;
  std::optional<std::string> tool_choice;
  std::optional<bool> has_tools;
  std::optional<bool> tool_turn_without_reasoning;
  int64_t times = -1;
  // Requests answered so far (guarded by the server's mutex).
  int64_t used = 0;
  // How the rule answers.
  enum class kind { respond, error, replay } what = kind::respond;
  respond_spec respond;
  error_spec error;
  replay_spec replay;
  fault_spec faults;

  bool matches(const llm_request& req, const request_info& info) const {
    auto contains = [](const std::string& haystack, const std::optional<std::string>& needle) {
      return !needle || haystack.find(*needle) != std::string::npos;
    };
    if (!protocol.empty() && protocol != req.protocol)
      return false;
    if (!contains(info.last_user, last_user_contains) || !contains(info.system, system_contains)
        || !contains(info.all, message_contains) || !contains(req.target, path_contains))
      return false;
    if (model && *model != info.model)
      return false;
    if (has_tools && *has_tools == info.tools.empty())
      return false;
    if (tool_turn_without_reasoning
        && *tool_turn_without_reasoning != info.tool_turn_without_reasoning)
      return false;
    if (tool && std::find(info.tools.begin(), info.tools.end(), *tool) == info.tools.end())
      return false;
    if (tool_choice && normalize_tool_choice(json(*tool_choice)) != info.tool_choice)
      return false;
    return true;
  }
};

// -- rendering ----------------------------------------------------------------

namespace {

// Maps a finish reason of either vocabulary to the one of `protocol`.
std::string finish_reason_for(const std::string& protocol, const std::string& given,
                              bool has_tools) {
  // OpenAI's name and Anthropic's of the same reason.
  static const std::pair<const char*, const char*> names[] = {{"stop", "end_turn"},
                                                              {"tool_calls", "tool_use"},
                                                              {"length", "max_tokens"},
                                                              {"content_filter", "refusal"}};
  bool openai = protocol == "openai";
  auto own = [openai](const std::pair<const char*, const char*>& name) {
    return std::string{openai ? name.first : name.second};
  };
  if (given.empty())
    return own(has_tools ? names[1] : names[0]);
  if (openai && given == "stop_sequence")
    return "stop";
  for (const auto& name : names)
    if (given == (openai ? name.second : name.first))
      return own(name);
  return given;
}

// A rendered answer before fault injection: pieces of the body, each sent as
// one chunk when `chunked`.
struct rendered {
  int status = 200;
  std::string content_type;
  sdk::http_headers headers;
  std::vector<std::string> pieces;
  bool chunked = true;
  // Whether the last piece is the stream's terminating event.
  bool has_terminal = false;
  std::string malformed;
};

struct usage_numbers {
  int64_t input = 0;
  int64_t output = 0;
};

usage_numbers usage_for(const respond_spec& spec, const request_info& info) {
  usage_numbers result;
  result.input = spec.input_tokens.value_or(
    std::max<int64_t>(1, static_cast<int64_t>(info.counted_bytes / 4)));
  auto produced = spec.text.size() + spec.reasoning.size();
  for (const auto& x : spec.tool_calls)
    produced += x.name.size() + x.arguments.size();
  result.output = spec.output_tokens.value_or(static_cast<int64_t>(produced / 4) + 1);
  return result;
}

std::string sse_data(const ojson& x) {
  return "data: " + dump(x) + "\n\n";
}

std::string sse_event(const char* type, const ojson& x) {
  return std::string{"event: "} + type + "\ndata: " + dump(x) + "\n\n";
}

rendered render_openai(const respond_spec& spec, const request_info& info, uint64_t number) {
  rendered result;
  auto id = "chatcmpl-fake-" + std::to_string(number);
  auto model = spec.model.empty() ? info.model : spec.model;
  auto stream = spec.stream.value_or(info.stream);
  auto with_usage = spec.include_usage.value_or(info.include_usage);
  auto usage = usage_for(spec, info);
  auto finish = finish_reason_for("openai", spec.finish_reason, !spec.tool_calls.empty());
  auto usage_json = [&] {
    ojson x = ojson::object();
    x["prompt_tokens"] = usage.input;
    x["completion_tokens"] = usage.output;
    x["total_tokens"] = usage.input + usage.output;
    return x;
  };
  auto call_id = [&](size_t i) {
    const auto& given = spec.tool_calls[i].id;
    return given.empty() ? "call_fake_" + std::to_string(number) + "_" + std::to_string(i) : given;
  };
  if (!stream) {
    ojson msg = ojson::object();
    msg["role"] = "assistant";
    if (spec.text.empty() && !spec.tool_calls.empty())
      msg["content"] = nullptr;
    else
      msg["content"] = spec.text;
    msg["refusal"] = nullptr;
    if (!spec.reasoning.empty())
      msg[spec.reasoning_field] = spec.reasoning;
    if (!spec.tool_calls.empty()) {
      ojson calls = ojson::array();
      for (size_t i = 0; i < spec.tool_calls.size(); ++i) {
        ojson fn = ojson::object();
        fn["name"] = spec.tool_calls[i].name;
        fn["arguments"] = spec.tool_calls[i].arguments;
        ojson call = ojson::object();
        call["id"] = call_id(i);
        call["type"] = "function";
        call["function"] = std::move(fn);
        calls.push_back(std::move(call));
      }
      msg["tool_calls"] = std::move(calls);
    }
    ojson choice = ojson::object();
    choice["index"] = 0;
    choice["message"] = std::move(msg);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish;
    ojson body = ojson::object();
    body["id"] = id;
    body["object"] = "chat.completion";
    body["created"] = created_time;
    body["model"] = model;
    body["choices"] = ojson::array();
    body["choices"].push_back(std::move(choice));
    body["usage"] = usage_json();
    body["system_fingerprint"] = "fp_fake";
    result.content_type = "application/json";
    result.chunked = false;
    result.pieces.push_back(dump(body, 2) + "\n");
    return result;
  }
  // A chunk's fields before its choices (none yet).
  auto chunk_head = [&] {
    ojson x = ojson::object();
    x["id"] = id;
    x["object"] = "chat.completion.chunk";
    x["created"] = created_time;
    x["model"] = model;
    x["system_fingerprint"] = "fp_fake";
    x["choices"] = ojson::array();
    return x;
  };
  auto chunk = [&](ojson delta, ojson finish_reason) {
    ojson choice = ojson::object();
    choice["index"] = 0;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = std::move(finish_reason);
    auto x = chunk_head();
    x["choices"].push_back(std::move(choice));
    if (with_usage)
      x["usage"] = nullptr;
    return sse_data(x);
  };
  result.content_type = event_stream_type;
  {
    ojson delta = ojson::object();
    delta["role"] = "assistant";
    delta["content"] = "";
    delta["refusal"] = nullptr;
    result.pieces.push_back(chunk(std::move(delta), nullptr));
  }
  for (auto& piece : split_words(spec.reasoning, spec.chunk_words)) {
    ojson delta = ojson::object();
    delta[spec.reasoning_field] = std::move(piece);
    result.pieces.push_back(chunk(std::move(delta), nullptr));
  }
  for (auto& piece : split_words(spec.text, spec.chunk_words)) {
    ojson delta = ojson::object();
    delta["content"] = std::move(piece);
    result.pieces.push_back(chunk(std::move(delta), nullptr));
  }
  for (size_t i = 0; i < spec.tool_calls.size(); ++i) {
    const auto& call = spec.tool_calls[i];
    {
      ojson fn = ojson::object();
      fn["name"] = call.name;
      fn["arguments"] = "";
      ojson entry = ojson::object();
      entry["index"] = i;
      entry["id"] = call_id(i);
      entry["type"] = "function";
      entry["function"] = std::move(fn);
      ojson delta = ojson::object();
      delta["tool_calls"] = ojson::array();
      delta["tool_calls"].push_back(std::move(entry));
      result.pieces.push_back(chunk(std::move(delta), nullptr));
    }
    for (auto& piece : split_bytes(call.arguments, spec.args_chunk_chars)) {
      ojson fn = ojson::object();
      fn["arguments"] = std::move(piece);
      ojson entry = ojson::object();
      entry["index"] = i;
      entry["function"] = std::move(fn);
      ojson delta = ojson::object();
      delta["tool_calls"] = ojson::array();
      delta["tool_calls"].push_back(std::move(entry));
      result.pieces.push_back(chunk(std::move(delta), nullptr));
    }
  }
  result.pieces.push_back(chunk(ojson::object(), finish));
  if (with_usage) {
    auto x = chunk_head();
    x["usage"] = usage_json();
    result.pieces.push_back(sse_data(x));
  }
  result.pieces.emplace_back("data: [DONE]\n\n");
  result.has_terminal = true;
  result.malformed = "data: {\"id\":\"" + id + "\",\"choices\":[{\"delta\":\n\n";
  return result;
}

rendered render_anthropic(const respond_spec& spec, const request_info& info, uint64_t number) {
  rendered result;
  auto id = "msg_fake_" + std::to_string(number);
  auto model = spec.model.empty() ? info.model : spec.model;
  auto stream = spec.stream.value_or(info.stream);
  auto usage = usage_for(spec, info);
  auto stop = finish_reason_for("anthropic", spec.finish_reason, !spec.tool_calls.empty());
  auto call_id = [&](size_t i) {
    const auto& given = spec.tool_calls[i].id;
    return given.empty() ? "toolu_fake_" + std::to_string(number) + "_" + std::to_string(i) : given;
  };
  const char* signature = "fake-signature";
  if (!stream) {
    ojson content = ojson::array();
    if (!spec.reasoning.empty()) {
      ojson block = ojson::object();
      block["type"] = "thinking";
      block["thinking"] = spec.reasoning;
      block["signature"] = signature;
      content.push_back(std::move(block));
    }
    if (!spec.text.empty()) {
      ojson block = ojson::object();
      block["type"] = "text";
      block["text"] = spec.text;
      content.push_back(std::move(block));
    }
    for (size_t i = 0; i < spec.tool_calls.size(); ++i) {
      const auto& call = spec.tool_calls[i];
      ojson block = ojson::object();
      block["type"] = "tool_use";
      block["id"] = call_id(i);
      block["name"] = call.name;
      auto input = ojson::parse(call.arguments, nullptr, false);
      block["input"] = input.is_discarded() ? ojson(call.arguments) : input;
      content.push_back(std::move(block));
    }
    ojson usage_json = ojson::object();
    usage_json["input_tokens"] = usage.input;
    usage_json["output_tokens"] = usage.output;
    ojson body = ojson::object();
    body["id"] = id;
    body["type"] = "message";
    body["role"] = "assistant";
    body["model"] = model;
    body["content"] = std::move(content);
    body["stop_reason"] = stop;
    body["stop_sequence"] = nullptr;
    body["usage"] = std::move(usage_json);
    result.content_type = "application/json";
    result.chunked = false;
    result.pieces.push_back(dump(body) + "\n");
    return result;
  }
  result.content_type = event_stream_type;
  {
    ojson usage_json = ojson::object();
    usage_json["input_tokens"] = usage.input;
    usage_json["output_tokens"] = 1;
    ojson msg = ojson::object();
    msg["id"] = id;
    msg["type"] = "message";
    msg["role"] = "assistant";
    msg["model"] = model;
    msg["content"] = ojson::array();
    msg["stop_reason"] = nullptr;
    msg["stop_sequence"] = nullptr;
    msg["usage"] = std::move(usage_json);
    ojson x = ojson::object();
    x["type"] = "message_start";
    x["message"] = std::move(msg);
    result.pieces.push_back(sse_event("message_start", x));
  }
  result.pieces.emplace_back("event: ping\ndata: {\"type\": \"ping\"}\n\n");
  int64_t index = 0;
  auto block_start = [&](ojson block) {
    ojson x = ojson::object();
    x["type"] = "content_block_start";
    x["index"] = index;
    x["content_block"] = std::move(block);
    result.pieces.push_back(sse_event("content_block_start", x));
  };
  auto block_delta = [&](const char* type, const char* field, std::string value) {
    ojson delta = ojson::object();
    delta["type"] = type;
    delta[field] = std::move(value);
    ojson x = ojson::object();
    x["type"] = "content_block_delta";
    x["index"] = index;
    x["delta"] = std::move(delta);
    result.pieces.push_back(sse_event("content_block_delta", x));
  };
  auto block_stop = [&] {
    ojson x = ojson::object();
    x["type"] = "content_block_stop";
    x["index"] = index;
    result.pieces.push_back(sse_event("content_block_stop", x));
    ++index;
  };
  if (!spec.reasoning.empty()) {
    ojson block = ojson::object();
    block["type"] = "thinking";
    block["thinking"] = "";
    block["signature"] = "";
    block_start(std::move(block));
    for (auto& piece : split_words(spec.reasoning, spec.chunk_words))
      block_delta("thinking_delta", "thinking", std::move(piece));
    block_delta("signature_delta", "signature", signature);
    block_stop();
  }
  if (!spec.text.empty()) {
    ojson block = ojson::object();
    block["type"] = "text";
    block["text"] = "";
    block_start(std::move(block));
    for (auto& piece : split_words(spec.text, spec.chunk_words))
      block_delta("text_delta", "text", std::move(piece));
    block_stop();
  }
  for (size_t i = 0; i < spec.tool_calls.size(); ++i) {
    const auto& call = spec.tool_calls[i];
    ojson block = ojson::object();
    block["type"] = "tool_use";
    block["id"] = call_id(i);
    block["name"] = call.name;
    block["input"] = ojson::object();
    block_start(std::move(block));
    block_delta("input_json_delta", "partial_json", "");
    for (auto& piece : split_bytes(call.arguments, spec.args_chunk_chars))
      block_delta("input_json_delta", "partial_json", std::move(piece));
    block_stop();
  }
  {
    ojson delta = ojson::object();
    delta["stop_reason"] = stop;
    delta["stop_sequence"] = nullptr;
    ojson usage_json = ojson::object();
    usage_json["output_tokens"] = usage.output;
    ojson x = ojson::object();
    x["type"] = "message_delta";
    x["delta"] = std::move(delta);
    x["usage"] = std::move(usage_json);
    result.pieces.push_back(sse_event("message_delta", x));
  }
  result.pieces.emplace_back("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
  result.has_terminal = true;
  result.malformed = "event: content_block_delta\n"
                     "data: {\"type\":\"content_block_delta\",\"index\":\n\n";
  return result;
}

std::string default_error_type(const std::string& protocol, int status) {
  if (protocol == "anthropic") {
    switch (status) {
      case 400:
        return "invalid_request_error";
      case 401:
        return "authentication_error";
      case 403:
        return "permission_error";
      case 404:
        return "not_found_error";
      case 413:
        return "request_too_large";
      case 429:
        return "rate_limit_error";
      case 529:
        return "overloaded_error";
      default:
        return "api_error";
    }
  }
  if (status == 429)
    return "requests";
  if (status >= 400 && status < 500)
    return "invalid_request_error";
  return "server_error";
}

// Renders an error body in the shape of `protocol`.
std::string error_body(const std::string& protocol, int status, std::string type,
                       std::string message, std::string code, uint64_t number) {
  if (type.empty())
    type = default_error_type(protocol, status);
  if (message.empty())
    message = "fake error " + std::to_string(status);
  ojson err = ojson::object();
  if (protocol == "anthropic") {
    err["type"] = std::move(type);
    err["message"] = std::move(message);
    ojson body = ojson::object();
    body["type"] = "error";
    body["error"] = std::move(err);
    body["request_id"] = "req_fake_" + std::to_string(number);
    return dump(body) + "\n";
  }
  if (code.empty() && status == 429)
    code = "rate_limit_exceeded";
  err["message"] = std::move(message);
  err["type"] = std::move(type);
  err["param"] = nullptr;
  err["code"] = code.empty() ? ojson(nullptr) : ojson(code);
  ojson body = ojson::object();
  body["error"] = std::move(err);
  return dump(body, 2) + "\n";
}

rendered render_error(const error_spec& spec, const std::string& protocol, uint64_t number) {
  rendered result;
  result.status = spec.status;
  result.content_type = spec.content_type;
  result.headers = spec.headers;
  result.chunked = false;
  if (spec.body)
    result.pieces.push_back(*spec.body);
  else
    result.pieces.push_back(
      error_body(protocol, spec.status, spec.type, spec.message, spec.code, number));
  return result;
}

rendered render_replay(const replay_spec& spec) {
  rendered result;
  result.status = spec.status;
  result.content_type = spec.content_type;
  result.headers = spec.headers;
  result.chunked = true;
  if (spec.chunk_bytes == 0) {
    result.pieces.push_back(spec.bytes);
  } else {
    for (size_t i = 0; i < spec.bytes.size(); i += spec.chunk_bytes)
      result.pieces.push_back(spec.bytes.substr(i, spec.chunk_bytes));
  }
  return result;
}

// Applies stream faults (truncation, malformed events) to the events, then
// turns the result into a plan with latency, delays, stalls and resets.
response_plan make_plan(rendered x, const fault_spec& faults) {
  if (faults.keep_events >= 0 && static_cast<size_t>(faults.keep_events) < x.pieces.size()) {
    x.pieces.resize(static_cast<size_t>(faults.keep_events));
    x.has_terminal = false;
  }
  if (faults.drop_terminal && x.has_terminal) {
    x.pieces.pop_back();
    x.has_terminal = false;
  }
  if (faults.malformed_at >= 0 && !x.malformed.empty()) {
    auto at = std::min(static_cast<size_t>(faults.malformed_at), x.pieces.size());
    x.pieces.insert(x.pieces.begin() + static_cast<ptrdiff_t>(at), x.malformed);
  }
  response_plan plan{x.status};
  if (!x.content_type.empty())
    plan.header("Content-Type", x.content_type);
  for (auto& [key, value] : x.headers)
    plan.header(key, value);
  if (x.chunked) {
    plan.chunked();
  } else if (!sdk::find_header(x.headers, "Content-Length")) {
    // Declared explicitly: a stall or reset may cut the body short.
    size_t total = 0;
    for (const auto& piece : x.pieces)
      total += piece.size();
    plan.header("Content-Length", std::to_string(total));
  }
  if (faults.latency.count() > 0)
    plan.delay(faults.latency);
  std::optional<uint64_t> limit;
  if (faults.stall_after)
    limit = faults.stall_after;
  if (faults.reset_after && (!limit || *faults.reset_after < *limit))
    limit = faults.reset_after;
  auto stall = faults.stall_after && limit == faults.stall_after;
  uint64_t sent = 0;
  for (size_t i = 0; i < x.pieces.size(); ++i) {
    auto& piece = x.pieces[i];
    if (i > 0 && faults.chunk_delay.count() > 0)
      plan.delay(faults.chunk_delay);
    if (limit && sent + piece.size() >= *limit) {
      auto n = static_cast<size_t>(*limit - sent);
      if (n > 0)
        plan.send(piece.substr(0, n));
      if (stall)
        plan.stall();
      else
        plan.delay(reset_grace).reset();
      return plan;
    }
    sent += piece.size();
    plan.send(std::move(piece));
  }
  return plan;
}

} // namespace

// -- llm_request --------------------------------------------------------------

std::optional<std::string> llm_request::header(std::string_view name) const {
  return sdk::find_header(headers, name);
}

// -- fake_llm_server ----------------------------------------------------------

fake_llm_server::fake_llm_server() {
  server_.fallback([this](const request& req) { return answer(req); });
}

fake_llm_server::~fake_llm_server() {
  stop();
}

std::optional<sdk::error> fake_llm_server::parse_rules(const json& rules,
                                                       const std::string& base_dir,
                                                       std::vector<rule_ptr>& out) {
  const json* list = &rules;
  if (rules.is_object()) {
    reader top{rules, "script"};
    top.only({"rules", "comment"});
    if (top.error)
      return script_error(*top.error);
    auto i = rules.find("rules");
    if (i == rules.end())
      return script_error("script: missing `rules`");
    list = &*i;
  }
  if (!list->is_array())
    return script_error("script: the rules must be an array");
  for (size_t n = 0; n < list->size(); ++n) {
    const auto& src = (*list)[n];
    auto where = "rule " + std::to_string(n);
    reader in{src, where};
    in.only({"match", "respond", "error", "replay", "times", "comment", "name", "latency_ms",
             "chunk_delay_ms", "stall_after_bytes", "reset_after_bytes", "malformed_chunk",
             "truncate"});
    auto result = std::make_shared<rule>();
    read_faults(in, result->faults);
    in.integer("times", result->times);
    if (auto m = in.get("match")) {
      reader match{*m, where + " match"};
      match.only({"protocol", "last_user_contains", "system_contains", "message_contains",
                  "path_contains", "model", "has_tools", "tool", "tool_choice",
                  "tool_turn_without_reasoning", "times"});
      match.str("protocol", result->protocol);
      if (result->protocol != "" && result->protocol != "openai" && result->protocol != "anthropic")
        match.fail("`protocol` must be openai or anthropic");
      match.str("last_user_contains", result->last_user_contains);
      match.str("system_contains", result->system_contains);
      match.str("message_contains", result->message_contains);
      match.str("path_contains", result->path_contains);
      match.str("model", result->model);
      match.boolean("has_tools", result->has_tools);
      match.boolean("tool_turn_without_reasoning", result->tool_turn_without_reasoning);
      match.str("tool", result->tool);
      match.str("tool_choice", result->tool_choice);
      match.integer("times", result->times);
      if (match.error)
        return script_error(*match.error);
    }
    auto answers = static_cast<int>(in.has("respond")) + static_cast<int>(in.has("error"))
                   + static_cast<int>(in.has("replay"));
    if (answers != 1)
      in.fail("needs exactly one of `respond`, `error` and `replay`");
    if (in.error)
      return script_error(*in.error);
    if (auto r = in.get("respond")) {
      result->what = rule::kind::respond;
      auto& spec = result->respond;
      reader resp{*r, where + " respond"};
      resp.only({"text", "reasoning", "tool_calls", "finish_reason", "usage", "chunk_words",
                 "args_chunk_chars", "model", "reasoning_field", "include_usage", "stream",
                 "headers", "latency_ms", "chunk_delay_ms", "stall_after_bytes",
                 "reset_after_bytes", "malformed_chunk", "truncate"});
      read_faults(resp, result->faults);
      resp.str("text", spec.text);
      resp.str("reasoning", spec.reasoning);
      resp.str("finish_reason", spec.finish_reason);
      resp.integer("chunk_words", spec.chunk_words, 1);
      resp.integer("args_chunk_chars", spec.args_chunk_chars, 1);
      resp.str("model", spec.model);
      resp.str("reasoning_field", spec.reasoning_field);
      resp.boolean("include_usage", spec.include_usage);
      resp.boolean("stream", spec.stream);
      resp.headers("headers", spec.headers);
      if (auto u = resp.get("usage")) {
        reader usage{*u, where + " usage"};
        usage.only({"input_tokens", "output_tokens"});
        usage.integer("input_tokens", spec.input_tokens);
        usage.integer("output_tokens", spec.output_tokens);
        if (usage.error)
          return script_error(*usage.error);
      }
      if (auto calls = resp.get("tool_calls")) {
        if (!calls->is_array())
          resp.fail("`tool_calls` must be an array");
        else
          for (size_t k = 0; k < calls->size(); ++k) {
            reader call{(*calls)[k], where + " tool call " + std::to_string(k)};
            call.only({"name", "arguments", "id"});
            tool_call_spec x;
            call.str("name", x.name);
            call.str("id", x.id);
            if (!call.has("name"))
              call.fail("missing `name`");
            if (auto args = call.get("arguments"))
              x.arguments = json_string_or_dump(*args);
            else
              x.arguments = "{}";
            if (call.error)
              return script_error(*call.error);
            spec.tool_calls.push_back(std::move(x));
          }
      }
      if (resp.error)
        return script_error(*resp.error);
    } else if (auto e = in.get("error")) {
      result->what = rule::kind::error;
      auto& spec = result->error;
      reader err{*e, where + " error"};
      err.only({"status", "body", "headers", "type", "message", "code", "content_type"});
      err.integer("status", spec.status, 100);
      err.headers("headers", spec.headers);
      err.str("type", spec.type);
      err.str("message", spec.message);
      err.str("code", spec.code);
      err.str("content_type", spec.content_type);
      if (auto body = err.get("body"))
        spec.body = body->is_string() ? body->get<std::string>() : dump(*body, 2) + "\n";
      if (err.error)
        return script_error(*err.error);
    } else if (auto r = in.get("replay")) {
      result->what = rule::kind::replay;
      auto& spec = result->replay;
      std::string file;
      std::optional<std::string> bytes;
      if (r->is_string()) {
        file = r->get<std::string>();
      } else {
        reader rep{*r, where + " replay"};
        rep.only({"file", "bytes", "content_type", "status", "headers", "chunk_bytes"});
        rep.str("file", file);
        rep.str("bytes", bytes);
        rep.str("content_type", spec.content_type);
        rep.integer("status", spec.status, 100);
        rep.headers("headers", spec.headers);
        rep.integer("chunk_bytes", spec.chunk_bytes);
        if (file.empty() == !bytes)
          rep.fail("needs exactly one of `file` and `bytes`");
        if (rep.error)
          return script_error(*rep.error);
      }
      if (bytes) {
        spec.bytes = std::move(*bytes);
        if (spec.content_type.empty())
          spec.content_type = event_stream_type;
      } else {
        auto path = resolve(file, base_dir);
        auto data = read_whole_file(path);
        if (!data)
          return script_error(where + " replay: cannot read `" + path + "`");
        spec.bytes = std::move(*data);
        if (spec.content_type.empty())
          spec.content_type = content_type_for(path);
      }
    }
    out.push_back(std::move(result));
  }
  return std::nullopt;
}

std::optional<sdk::error> fake_llm_server::script(const json& rules, const std::string& base_dir) {
  std::vector<rule_ptr> parsed;
  if (auto err = parse_rules(rules, base_dir, parsed))
    return err;
  std::lock_guard<std::mutex> guard{mtx_};
  rules_ = std::move(parsed);
  return std::nullopt;
}

std::optional<sdk::error> fake_llm_server::script_file(const std::string& path) {
  auto text = read_whole_file(path);
  if (!text)
    return script_error("cannot read script `" + path + "`");
  auto doc = json::parse(*text, nullptr, false);
  if (doc.is_discarded())
    return script_error("script `" + path + "` is not valid JSON");
  auto slash = path.rfind('/');
  auto dir = slash == std::string::npos ? std::string{} : path.substr(0, slash);
  if (slash == 0)
    dir = "/";
  return script(doc, dir);
}

std::optional<sdk::error> fake_llm_server::add_rule(const json& rule_json,
                                                    const std::string& base_dir) {
  std::vector<rule_ptr> parsed;
  if (auto err = parse_rules(json::array({rule_json}), base_dir, parsed))
    return err;
  std::lock_guard<std::mutex> guard{mtx_};
  rules_.insert(rules_.end(), parsed.begin(), parsed.end());
  return std::nullopt;
}

std::optional<sdk::error> fake_llm_server::replay(const std::string& path_or_bytes,
                                                  std::string content_type, replay_options opts) {
  if (path_or_bytes.find('\n') == std::string::npos)
    return replay_file(path_or_bytes, std::move(content_type), std::move(opts));
  if (content_type.empty())
    content_type = event_stream_type;
  replay_bytes(path_or_bytes, std::move(content_type), std::move(opts));
  return std::nullopt;
}

std::optional<sdk::error> fake_llm_server::replay_file(const std::string& path,
                                                       std::string content_type,
                                                       replay_options opts) {
  auto data = read_whole_file(path);
  if (!data)
    return script_error("cannot read replay file `" + path + "`");
  if (content_type.empty())
    content_type = content_type_for(path);
  replay_bytes(std::move(*data), std::move(content_type), std::move(opts));
  return std::nullopt;
}

void fake_llm_server::replay_bytes(std::string bytes, std::string content_type,
                                   replay_options opts) {
  auto result = std::make_shared<rule>();
  result->what = rule::kind::replay;
  result->times = opts.times;
  result->replay.bytes = std::move(bytes);
  result->replay.content_type = std::move(content_type);
  result->replay.status = opts.status;
  result->replay.headers = std::move(opts.headers);
  result->replay.chunk_bytes = opts.chunk_bytes;
  result->faults.chunk_delay = opts.chunk_delay;
  result->faults.latency = opts.latency;
  std::lock_guard<std::mutex> guard{mtx_};
  rules_.push_back(std::move(result));
}

void fake_llm_server::clear_script() {
  std::lock_guard<std::mutex> guard{mtx_};
  rules_.clear();
}

std::vector<llm_request> fake_llm_server::requests() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return requests_;
}

size_t fake_llm_server::request_count() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return request_count_;
}

void fake_llm_server::uncounted(std::string text) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!text.empty())
    uncounted_.push_back(std::move(text));
}

void fake_llm_server::record_requests(bool on) {
  std::lock_guard<std::mutex> guard{mtx_};
  recording_ = on;
}

std::optional<llm_request> fake_llm_server::request_at(size_t i) const {
  std::lock_guard<std::mutex> guard{mtx_};
  if (i >= requests_.size())
    return std::nullopt;
  return requests_[i];
}

void fake_llm_server::clear_requests() {
  std::lock_guard<std::mutex> guard{mtx_};
  requests_.clear();
  request_count_ = 0;
}

bool fake_llm_server::wait_for_requests(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> guard{mtx_};
  return cv_.wait_for(guard, timeout, [this, n] { return request_count_ >= n; });
}

size_t fake_llm_server::rules_left() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return static_cast<size_t>(std::count_if(rules_.begin(), rules_.end(), [](const rule_ptr& x) {
    return x->times < 0 || x->used < x->times;
  }));
}

uint16_t fake_llm_server::port() const noexcept {
  return server_.port();
}

std::string fake_llm_server::base_url_openai() const {
  return server_.url("/v1");
}

std::string fake_llm_server::base_url_anthropic() const {
  auto result = server_.url("/");
  result.pop_back();
  return result;
}

std::string fake_llm_server::url(std::string_view path) const {
  return server_.url(path);
}

void fake_llm_server::stop() {
  server_.stop();
}

response_plan fake_llm_server::answer(const request& req) {
  // Control endpoints of the standalone server; not recorded.
  if (req.path == "/_fake/requests" && req.method == "GET") {
    json list = json::array();
    for (const auto& x : requests()) {
      json headers = json::array();
      for (const auto& [key, value] : x.headers)
        headers.push_back(json::array({key, value}));
      json entry = json::object();
      entry["protocol"] = x.protocol;
      entry["method"] = x.method;
      entry["target"] = x.target;
      entry["headers"] = std::move(headers);
      entry["body"] = x.body.is_null() ? json(x.raw_body) : x.body;
      entry["rule"] = x.rule;
      list.push_back(std::move(entry));
    }
    return response_plan::json(200, dump(list, 2) + "\n");
  }
  if (req.path == "/_fake/script" && req.method == "POST") {
    auto doc = json::parse(req.body, nullptr, false);
    std::optional<sdk::error> err;
    if (doc.is_discarded())
      err = script_error("script is not valid JSON");
    else
      err = script(doc);
    if (err) {
      json reply = json::object();
      reply["error"] = err->message;
      return response_plan::json(400, dump(reply) + "\n");
    }
    return response_plan::json(200, "{\"ok\":true}\n");
  }
  // The model list a client asks for before chatting (the openai plugin's
  // context-window probe): an empty list, neither recorded nor counted, so
  // that scripts and request counts see the chat calls only. A test that
  // wants a model list routes the path on server() (routes come first).
  if (req.method == "GET" && ends_with(req.path, "/models"))
    return response_plan::json(200, "{\"object\":\"list\",\"data\":[]}\n");
  llm_request rec;
  rec.method = req.method;
  rec.path = req.path;
  rec.target = req.target;
  rec.headers = req.headers;
  rec.raw_body = req.body;
  auto body = json::parse(req.body, nullptr, false);
  if (!body.is_discarded())
    rec.body = std::move(body);
  if (ends_with(req.path, "/chat/completions"))
    rec.protocol = "openai";
  else if (ends_with(req.path, "/messages"))
    rec.protocol = "anthropic";
  auto info = inspect(rec);
  rule_ptr chosen;
  uint64_t number = 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    number = ++answered_;
    if (!rec.protocol.empty() && rec.method == "POST") {
      for (size_t i = 0; i < rules_.size(); ++i) {
        auto& x = rules_[i];
        if ((x->times < 0 || x->used < x->times) && x->matches(rec, info)) {
          ++x->used;
          chosen = x;
          rec.rule = static_cast<int>(i);
          break;
        }
      }
    }
    ++request_count_;
    if (recording_)
      requests_.push_back(rec);
    info.counted_bytes = rec.raw_body.size();
    // QUARRY_FAKE_LLM_DUMP=DIR: each request's body as DIR/<number>.json,
    // to see what a transcript's token counts are made of.
    if (const char* dump = std::getenv("QUARRY_FAKE_LLM_DUMP"); dump != nullptr && *dump != 0) {
      std::ofstream out{std::string{dump} + "/" + std::to_string(number) + ".json",
                        std::ios::binary};
      out << rec.raw_body;
    }
    for (const auto& text : uncounted_)
      for (auto at = rec.raw_body.find(text); at != std::string::npos;
           at = rec.raw_body.find(text, at + text.size()))
        info.counted_bytes -= text.size();
  }
  cv_.notify_all();
  auto fail = [&](int status, std::string message) {
    auto text = error_body(rec.protocol, status, "fake_llm_server_error", std::move(message),
                           "no_matching_rule", number);
    return response_plan::json(status, std::move(text)).header("x-should-retry", "false");
  };
  if (rec.protocol.empty())
    return fail(404, "fake_llm_server: no endpoint at " + req.method + " " + req.target);
  if (rec.method != "POST")
    return fail(405,
                "fake_llm_server: " + req.method + " " + req.target + " is not allowed (use POST)");
  if (!chosen) {
    std::string message = "fake_llm_server: no rule matches request #" + std::to_string(number)
                          + ": POST " + req.target + " (protocol " + rec.protocol + ", model \""
                          + info.model + "\", last user message \"" + shorten(info.last_user, 200)
                          + "\")";
    return fail(500, std::move(message));
  }
  switch (chosen->what) {
    case rule::kind::error:
      return make_plan(render_error(chosen->error, rec.protocol, number), chosen->faults);
    case rule::kind::replay:
      return make_plan(render_replay(chosen->replay), chosen->faults);
    case rule::kind::respond:
      break;
  }
  auto x = rec.protocol == "openai" ? render_openai(chosen->respond, info, number)
                                    : render_anthropic(chosen->respond, info, number);
  x.headers = chosen->respond.headers;
  return make_plan(std::move(x), chosen->faults);
}

} // namespace quarry::test
