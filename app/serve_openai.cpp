// The OpenAI-compatible endpoints of `quarry serve` (docs/api.md): any
// OpenAI client runs a research as a chat completion. A completion is an
// ordinary stored session, started through the session manager and followed
// like an event stream's client follows it.

#include "serve_service.hpp"

#include "report_render.hpp"
#include "session_store.hpp"

#include "quarry/core/research_requests.hpp"
#include "quarry/http/server.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"
#include "quarry/store/store.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <optional>

#include <spdlog/spdlog.h>

namespace quarry::app {

namespace {

using nlohmann::json;

constexpr size_t max_messages = 1000;
// The earlier messages the models see, at most (the most recent are kept).
constexpr size_t max_context_bytes = 24'000;

/// A model of GET /v1/models and what its sessions run with.
struct model_info {
  const char* id;
  /// 0: as configured.
  int max_agents;
  int max_cycles;
};

constexpr model_info models[] = {
  {"quarry-research", 0, 0},
  {"quarry-research-fast", 1, 2},
};

const model_info* find_model(const std::string& id) {
  for (const auto& m : models)
    if (id == m.id)
      return &m;
  return nullptr;
}

json model_json(const model_info& m) {
  return {{"id", m.id}, {"object", "model"}, {"created", 0}, {"owned_by", "quarry"}};
}

const char* error_type(int status) {
  if (status == 401)
    return "authentication_error";
  if (status == 429)
    return "rate_limit_error";
  if (status >= 500)
    return "server_error";
  return "invalid_request_error";
}

/// An error in OpenAI's shape: `{"error": {"message", "type", "param",
/// "code"}}`.
json error_json(int status, const std::string& code, const std::string& message,
                const std::string& param = {}) {
  return {{"error",
           {{"message", message},
            {"type", error_type(status)},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

http::response openai_error(int status, const std::string& code, const std::string& message,
                            const std::string& param = {}) {
  auto res = http::json_response(status, error_json(status, code, message, param));
  if (status == 429)
    res.headers.emplace_back("Retry-After", "5");
  return res;
}

/// A checked chat completion request.
struct chat_request {
  const model_info* model = nullptr;
  stored_options options;
  bool stream = false;
  bool include_usage = false;
};

/// A refused request: the status and OpenAI error.
struct request_refusal {
  int status = 400;
  std::string code;
  std::string message;
  std::string param;
};

request_refusal bad(std::string message, std::string param, std::string code = "invalid_value") {
  return request_refusal{400, std::move(code), std::move(message), std::move(param)};
}

size_t utf8_chars(const std::string& x) {
  size_t n = 0;
  for (unsigned char c : x)
    if ((c & 0xC0) != 0x80)
      ++n;
  return n;
}

// The last `max_bytes` bytes of `x`, cut at a character boundary.
std::string utf8_suffix(const std::string& x, size_t max_bytes) {
  if (x.size() <= max_bytes)
    return x;
  auto from = x.size() - max_bytes;
  while (from < x.size() && (static_cast<unsigned char>(x[from]) & 0xC0) == 0x80)
    ++from;
  return "[...]\n" + x.substr(from);
}

// The text of a message's content: a string, an array of text parts, or
// null (for messages other than the user's).
std::variant<std::string, request_refusal>
content_text(const json& content, const std::string& where, bool null_allowed) {
  if (content.is_string())
    return sdk::repair_utf8(content.get<std::string>());
  if (content.is_null() && null_allowed)
    return std::string{};
  if (!content.is_array())
    return bad(where + ": must be a string or an array of text parts", where, "invalid_type");
  std::string out;
  for (size_t i = 0; i < content.size() && i < max_messages; ++i) {
    const auto& part = content[i];
    auto at = where + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return bad(at + ": must be an object with a type", at, "invalid_type");
    if (part["type"] != "text")
      return bad(at + ": only text parts are supported, not '"
                   + sdk::repair_utf8(part["type"].get<std::string>().substr(0, 40)) + "'",
                 at);
    if (!part.contains("text") || !part["text"].is_string())
      return bad(at + ".text: must be a string", at + ".text", "invalid_type");
    if (!out.empty())
      out += "\n";
    out += sdk::repair_utf8(part["text"].get<std::string>());
  }
  if (content.size() > max_messages)
    return bad(where + ": too many parts", where);
  return out;
}

// Checks the body of POST /v1/chat/completions. Unknown fields are ignored,
// as OpenAI's own optional fields are.
std::variant<chat_request, request_refusal> parse_chat(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded())
    return bad("the body is not JSON", {}, "invalid_json");
  if (!j.is_object())
    return bad("the body must be a JSON object", {}, "invalid_type");
  chat_request out;
  out.options.clarify = false;
  auto model = j.find("model");
  if (model == j.end())
    return bad("model: missing", "model", "missing_required_parameter");
  if (!model->is_string())
    return bad("model: must be a string", "model", "invalid_type");
  out.model = find_model(model->get<std::string>());
  if (out.model == nullptr)
    return request_refusal{404, "model_not_found",
                           "The model '" + sdk::repair_utf8(model->get<std::string>().substr(0, 80))
                             + "' does not exist; use quarry-research or quarry-research-fast",
                           "model"};
  out.options.max_agents = out.model->max_agents;
  out.options.max_cycles = out.model->max_cycles;
  if (auto s = j.find("stream"); s != j.end() && !s->is_null()) {
    if (!s->is_boolean())
      return bad("stream: must be true or false", "stream", "invalid_type");
    out.stream = s->get<bool>();
  }
  if (auto so = j.find("stream_options"); so != j.end() && !so->is_null()) {
    if (!so->is_object())
      return bad("stream_options: must be an object", "stream_options", "invalid_type");
    if (auto u = so->find("include_usage"); u != so->end() && !u->is_null()) {
      if (!u->is_boolean())
        return bad("stream_options.include_usage: must be true or false",
                   "stream_options.include_usage", "invalid_type");
      out.include_usage = u->get<bool>();
    }
  }
  auto messages = j.find("messages");
  if (messages == j.end())
    return bad("messages: missing", "messages", "missing_required_parameter");
  if (!messages->is_array() || messages->empty())
    return bad("messages: must be a non-empty array", "messages", "invalid_type");
  if (messages->size() > max_messages)
    return bad("messages: at most " + std::to_string(max_messages) + " messages", "messages");
  // Every message checked; the last user message is the question.
  std::vector<std::pair<std::string, std::string>> texts;
  std::optional<size_t> last_user;
  for (size_t i = 0; i < messages->size(); ++i) {
    const auto& m = (*messages)[i];
    auto where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object())
      return bad(where + ": must be an object", where, "invalid_type");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return bad(where + ".role: must be a string", where + ".role", "invalid_type");
    auto r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool"
        && r != "function")
      return bad(where + ".role: unknown role '" + sdk::repair_utf8(r.substr(0, 40)) + "'",
                 where + ".role");
    auto content = m.find("content");
    if (content == m.end() && r == "user")
      return bad(where + ".content: missing", where + ".content", "missing_required_parameter");
    auto text = content_text(content == m.end() ? json(nullptr) : *content, where + ".content",
                             r != "user");
    if (auto* why = std::get_if<request_refusal>(&text))
      return *why;
    if (r == "user")
      last_user = texts.size();
    texts.emplace_back(r, std::get<std::string>(std::move(text)));
  }
  if (!last_user)
    return bad("messages: no user message (the last one is the question)", "messages");
  auto question = std::string{sdk::trim(texts[*last_user].second)};
  if (question.empty())
    return bad("messages: the last user message is empty", "messages");
  if (utf8_chars(question) > max_question_chars)
    return bad("messages: the question (the last user message) has more than 20000 characters",
               "messages");
  out.options.question = std::move(question);
  // The messages before the question are the conversation it follows: as
  // text, and its user and assistant messages as the session's thread.
  std::string context;
  std::vector<sdk::chat_message> thread;
  for (size_t i = 0; i < *last_user; ++i) {
    auto t = std::string{sdk::trim(texts[i].second)};
    if (t.empty())
      continue;
    context += texts[i].first + ": " + t + "\n\n";
    if (texts[i].first == "user" || texts[i].first == "assistant") {
      sdk::chat_message m;
      m.author = texts[i].first == "user" ? sdk::role::user : sdk::role::assistant;
      m.content = std::move(t);
      thread.push_back(std::move(m));
    }
  }
  if (!context.empty())
    out.options.follow_up_context.text = "Earlier messages in this conversation:\n\n"
                                         + utf8_suffix(context, max_context_bytes);
  out.options.follow_up_context.thread = kept_thread(std::move(thread));
  return out;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

/// What every chunk and completion of one session carries.
struct completion_meta {
  std::string session;
  std::string model;
  int64_t created = 0;
  bool include_usage = false;

  std::string id() const {
    return "chatcmpl-" + session;
  }

  json chunk(json delta, json finish_reason = nullptr) const {
    json c{{"id", id()},
           {"object", "chat.completion.chunk"},
           {"created", created},
           {"model", model},
           {"system_fingerprint", nullptr},
           {"choices", json::array({{{"index", 0},
                                     {"delta", std::move(delta)},
                                     {"logprobs", nullptr},
                                     {"finish_reason", std::move(finish_reason)}}})}};
    if (include_usage)
      c["usage"] = nullptr;
    return c;
  }
};

json usage_json(const store::usage_total& u) {
  return {{"prompt_tokens", u.input_tokens},
          {"completion_tokens", u.output_tokens},
          {"total_tokens", u.input_tokens + u.output_tokens}};
}

/// What a finished session left in the store.
struct outcome {
  bool found = false;
  std::string state = "unknown";
  std::string error;
  std::optional<report_parts> report;
  store::usage_total usage;
  /// Why the store could not be read, if it could not.
  std::string read_error;
};

outcome read_outcome(store::store* db, const std::string& id) {
  outcome out;
  if (db == nullptr)
    return out;
  auto failed = [&](const sdk::error& err) {
    spdlog::error("{}", err.message);
    out.read_error = err.message;
    return out;
  };
  auto row = db->session(id);
  if (!row)
    return failed(row.error());
  if (!*row)
    return out;
  auto state = effective_state(*db, **row);
  // As streamed: the stored numbers.
  auto report = stored_report(*db, **row, state, true);
  if (!report)
    return failed(report.error());
  auto usage = db->usage(id);
  if (!usage)
    return failed(usage.error());
  out.found = true;
  out.state = store::to_string(state);
  out.error = (*row)->error;
  out.report = std::move(*report);
  out.usage = *usage;
  return out;
}

// The error of a session that ended without a report.
std::string no_report_message(const outcome& o) {
  if (!o.read_error.empty())
    return "the research store cannot be read: " + o.read_error;
  if (!o.found)
    return "the research store cannot be read";
  std::string m = "the research ended without a report (" + o.state + ")";
  if (!o.error.empty())
    m += ": " + o.error;
  return m;
}

// The sources after `body` as the CLI prints them, with the blank line
// that separates them from the body; empty without sources.
std::string sources_after(const std::string& body, const std::vector<cited_source>& sources) {
  auto list = sources_markdown(sources);
  if (list.empty())
    return {};
  return (body.empty() || body.back() == '\n' ? "\n" : "\n\n") + list;
}

// Progress a packet shows as reasoning; empty for packets that show none.
std::string progress_text(const json& obj) {
  auto type = obj.value("type", "");
  auto text = [&](const char* key) {
    auto i = obj.find(key);
    return i != obj.end() && i->is_string() ? i->get<std::string>() : std::string{};
  };
  auto list = [&](const char* key, const char* prefix) {
    std::string out;
    auto i = obj.find(key);
    if (i == obj.end() || !i->is_array())
      return out;
    for (const auto& x : *i)
      if (x.is_string())
        out += prefix + x.get<std::string>() + "\n";
    return out;
  };
  if (type == "deep_research_plan_start")
    return "Plan:\n";
  if (type == "deep_research_plan_delta")
    return text("content");
  if (type == "research_agent_start")
    return "\n\nResearch agent: " + text("research_task") + "\n";
  if (type == "search_tool_queries_delta")
    return list("queries", "- Searching: ");
  if (type == "open_url_urls")
    return list("urls", "- Reading: ");
  if (type == "notice")
    return "\nNote: " + text("text") + "\n";
  if (type == "error")
    return "\nError: " + text("message") + "\n";
  return {};
}

/// A streamed completion: progress as `delta.reasoning_content`, the report
/// as `delta.content`, then the Sources, the stop, the usage if asked, and
/// `[DONE]`.
class chunk_follower : public session_follower {
public:
  chunk_follower(std::shared_ptr<http::event_stream> stream, completion_meta meta,
                 sdk::blocking_pool& pool, std::string store_file)
    : stream_(std::move(stream)),
      meta_(std::move(meta)),
      pool_(pool),
      store_file_(std::move(store_file)) {
  }

  bool packet(uint64_t, const std::string& line) override {
    auto p = json::parse(line, nullptr, false);
    if (!p.is_object() || !p.contains("obj") || !p["obj"].is_object())
      return true;
    const auto& obj = p["obj"];
    if (obj.value("type", "") == "message_delta") {
      auto i = obj.find("content");
      if (i == obj.end() || !i->is_string() || i->get_ref<const std::string&>().empty())
        return true;
      content_ += i->get<std::string>();
      return send(meta_.chunk({{"content", *i}}));
    }
    auto progress = progress_text(obj);
    if (progress.empty())
      return true;
    return send(meta_.chunk({{"reasoning_content", sdk::repair_utf8(progress)}}));
  }

  void end(const std::string&) override {
    auto stream = stream_;
    auto meta = meta_;
    auto file = store_file_;
    auto content = content_;
    auto queued = with_reader(pool_, file, [=](store::store* db, const std::string&) {
      auto o = read_outcome(db, meta.session);
      if (!o.report && content.empty()) {
        stream->send("", "",
                     error_json(500, "research_failed", no_report_message(o))
                       .dump(-1, ' ', false, json::error_handler_t::replace));
        stream->end("", "[DONE]");
        return;
      }
      if (o.report) {
        auto tail = sources_after(content, o.report->sources);
        if (!tail.empty())
          stream->send(
            "", "",
            meta.chunk({{"content", tail}}).dump(-1, ' ', false, json::error_handler_t::replace));
      }
      // A report the output limit cut ends as OpenAI's `length`.
      auto finish = o.report && core::is_cut_report(o.report->body) ? "length" : "stop";
      stream->send(
        "", "",
        meta.chunk(json::object(), finish).dump(-1, ' ', false, json::error_handler_t::replace));
      if (meta.include_usage) {
        json last{{"id", meta.id()},
                  {"object", "chat.completion.chunk"},
                  {"created", meta.created},
                  {"model", meta.model},
                  {"system_fingerprint", nullptr},
                  {"choices", json::array()},
                  {"usage", usage_json(o.usage)}};
        stream->send("", "", last.dump(-1, ' ', false, json::error_handler_t::replace));
      }
      stream->end("", "[DONE]");
    });
    if (!queued) {
      // Never a stream that looks whole without its finish: the client
      // hears why it ends here.
      stream->send(
        "", "",
        error_json(429, "busy",
                   "the server is busy; the research is stored as session " + meta.session)
          .dump(-1, ' ', false, json::error_handler_t::replace));
      stream->end("", "[DONE]");
    }
  }

  void on_gone(std::function<void()> gone) override {
    stream_->on_close(std::move(gone));
  }

private:
  bool send(const json& chunk) {
    return stream_->send("", "", chunk.dump(-1, ' ', false, json::error_handler_t::replace));
  }

  std::shared_ptr<http::event_stream> stream_;
  completion_meta meta_;
  sdk::blocking_pool& pool_;
  std::string store_file_;
  std::string content_;
};

/// A completion answered at once when the session ends: the report with its
/// Sources, and the usage.
class completion_follower : public session_follower {
public:
  completion_follower(std::shared_ptr<http::responder> res, completion_meta meta,
                      sdk::blocking_pool& pool, std::string store_file)
    : res_(std::move(res)),
      meta_(std::move(meta)),
      pool_(pool),
      store_file_(std::move(store_file)) {
  }

  bool packet(uint64_t, const std::string&) override {
    return true;
  }

  void end(const std::string&) override {
    auto res = res_;
    auto meta = meta_;
    auto file = store_file_;
    auto queued = with_reader(pool_, file, [=](store::store* db, const std::string&) {
      auto o = read_outcome(db, meta.session);
      if (!o.report) {
        res->respond(openai_error(500, "research_failed", no_report_message(o)));
        return;
      }
      auto content = o.report->body + sources_after(o.report->body, o.report->sources);
      json message{{"role", "assistant"}, {"content", content}, {"refusal", nullptr}};
      res->respond(http::json_response(
        200, {{"id", meta.id()},
              {"object", "chat.completion"},
              {"created", meta.created},
              {"model", meta.model},
              {"system_fingerprint", nullptr},
              {"choices",
               json::array(
                 {{{"index", 0},
                   {"message", std::move(message)},
                   {"logprobs", nullptr},
                   {"finish_reason", core::is_cut_report(o.report->body) ? "length" : "stop"}}})},
              {"usage", usage_json(o.usage)}}));
    });
    if (!queued)
      res->respond(openai_error(429, "busy", "the server is busy"));
  }

  void on_gone(std::function<void()>) override {
    // A waiting response cannot tell when its client goes away.
  }

private:
  std::shared_ptr<http::responder> res_;
  completion_meta meta_;
  sdk::blocking_pool& pool_;
  std::string store_file_;
};

// The manager's answer to a start: the new session's id, or the error to
// answer.
std::variant<std::string, http::response> started_id(const std::string& reply) {
  auto j = json::parse(reply, nullptr, false);
  if (!j.is_object())
    return openai_error(500, "internal", "the session manager answered nonsense");
  if (auto e = j.find("error"); e != j.end() && e->is_object()) {
    auto status = e->value("status", 500);
    return openai_error(status, e->value("code", "internal"), e->value("message", ""));
  }
  if (!j.contains("id") || !j["id"].is_string())
    return openai_error(500, "internal", "the session manager answered no id");
  return j["id"].get<std::string>();
}

// Follows a started session for the client: streamed or answered at once.
void answer_completion(const std::shared_ptr<service>& svc,
                       const std::shared_ptr<http::responder>& res, const chat_request& req,
                       const std::string& id) {
  completion_meta meta{id, req.model->id, unix_seconds(), req.include_usage};
  if (!req.stream) {
    follow_session(svc->sys(), svc->pool, svc->manager, svc->store_file, id, 1,
                   std::make_shared<completion_follower>(res, meta, svc->pool, svc->store_file));
    return;
  }
  auto stream = res->start_events();
  if (!stream) {
    // Answered 429 or 503: nobody follows the session.
    caf::anon_send(svc->manager, actors::cancel_atom::value, id);
    return;
  }
  stream->send("", "",
               meta.chunk({{"role", "assistant"}, {"content", ""}})
                 .dump(-1, ' ', false, json::error_handler_t::replace));
  follow_session(svc->sys(), svc->pool, svc->manager, svc->store_file, id, 1,
                 std::make_shared<chunk_follower>(stream, meta, svc->pool, svc->store_file), true);
}

bool json_body(const http::request& req) {
  std::string t{req.header("Content-Type").value_or("")};
  for (auto& c : t)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t.rfind("application/json", 0) == 0;
}

} // namespace

void add_openai_routes(http::router& r, std::shared_ptr<service> svc) {
  r.add("GET", "/v1/models", [](http::request&, std::shared_ptr<http::responder> res) {
    json data = json::array();
    for (const auto& m : models)
      data.push_back(model_json(m));
    res->respond(http::json_response(200, {{"object", "list"}, {"data", std::move(data)}}));
  });
  r.add("GET", "/v1/models/{id}", [](http::request& req, std::shared_ptr<http::responder> res) {
    const auto* m = find_model(std::string{req.param("id")});
    if (m == nullptr) {
      res->respond(openai_error(404, "model_not_found", "no such model", "model"));
      return;
    }
    res->respond(http::json_response(200, model_json(*m)));
  });
  r.add("POST", "/v1/chat/completions",
        [svc](http::request& req, std::shared_ptr<http::responder> res) {
          if (!json_body(req)) {
            res->respond(openai_error(415, "unsupported_media_type",
                                      "the body must be JSON (Content-Type: application/json)"));
            return;
          }
          auto parsed = parse_chat(req.body);
          if (auto* why = std::get_if<request_refusal>(&parsed)) {
            res->respond(openai_error(why->status, why->code, why->message, why->param));
            return;
          }
          auto chat = std::get<chat_request>(std::move(parsed));
          auto options = to_json(chat.options).dump(-1, ' ', false, json::error_handler_t::replace);
          auto mgr = svc->manager;
          svc->sys().spawn([=](caf::event_based_actor* self) {
            self->request(mgr, std::chrono::seconds{60}, start_atom::value, std::string{}, options)
              .then(
                [=](std::string& reply) {
                  auto started = started_id(reply);
                  if (auto* refused = std::get_if<http::response>(&started)) {
                    res->respond(std::move(*refused));
                    return;
                  }
                  answer_completion(svc, res, chat, std::get<std::string>(started));
                },
                [=](caf::error& err) {
                  res->respond(
                    openai_error(503, "unavailable",
                                 "the session manager did not answer: " + caf::to_string(err)));
                });
          });
        });
}

} // namespace quarry::app
