// The Model Context Protocol server without I/O (mcp.hpp).

#include "quarry/core/mcp.hpp"

#include "quarry/core/tool_args.hpp"
#include "quarry/sdk/json.hpp"
#include "quarry/sdk/text.hpp"

#include <algorithm>
#include <limits>

namespace quarry::core::mcp {

using nlohmann::json;

namespace {

// An id as a key of the running calls: its JSON text, so that the string
// "1" and the number 1 stay apart.
std::string id_key(const json& id) {
  return sdk::dump_json(id);
}

// A text from outside, shortened for an error message.
std::string shown(std::string_view x) {
  return "'" + sdk::repair_utf8(sdk::utf8_prefix(x, 100)) + "'";
}

json resource_json(const resource& r) {
  json j{{"uri", r.uri}, {"name", r.name}};
  if (!r.title.empty())
    j["title"] = r.title;
  if (!r.description.empty())
    j["description"] = r.description;
  if (!r.mime_type.empty())
    j["mimeType"] = r.mime_type;
  return j;
}

// The `cursor` of a paginated list: absent, or a string.
std::optional<std::string> cursor_of(const json& params) {
  auto i = params.find("cursor");
  if (i == params.end() || i->is_null())
    return std::string{};
  if (!i->is_string())
    return std::nullopt;
  return i->get<std::string>();
}

} // namespace

const std::vector<std::string>& supported_protocol_versions() {
  static const std::vector<std::string> versions{std::string{latest_protocol_version}, "2025-06-18",
                                                 "2025-03-26", "2024-11-05"};
  return versions;
}

std::string negotiate_version(std::string_view requested) {
  for (const auto& v : supported_protocol_versions())
    if (v == requested)
      return v;
  return std::string{latest_protocol_version};
}

// -- line_splitter ------------------------------------------------------------

void line_splitter::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    auto piece = bytes.substr(0, nl);
    if (!dropping_) {
      if (buffer_.size() + piece.size() > max_line_) {
        dropping_ = true;
        buffer_.clear();
        buffer_.shrink_to_fit();
      } else {
        buffer_.append(piece);
      }
    }
    if (nl == std::string_view::npos)
      return;
    if (dropping_) {
      ready_.push_back(line{{}, true});
    } else {
      if (!buffer_.empty() && buffer_.back() == '\r')
        buffer_.pop_back();
      ready_.push_back(line{std::move(buffer_), false});
    }
    buffer_.clear();
    dropping_ = false;
    bytes.remove_prefix(nl + 1);
  }
}

std::optional<line_splitter::line> line_splitter::next() {
  if (scanned_ >= ready_.size()) {
    ready_.clear();
    scanned_ = 0;
    return std::nullopt;
  }
  return std::move(ready_[scanned_++]);
}

std::optional<line_splitter::line> line_splitter::finish() {
  if (auto l = next())
    return l;
  if (dropping_) {
    dropping_ = false;
    return line{{}, true};
  }
  if (buffer_.empty())
    return std::nullopt;
  line out{std::move(buffer_), false};
  buffer_.clear();
  if (!out.text.empty() && out.text.back() == '\r')
    out.text.pop_back();
  return out;
}

// -- lines ----------------------------------------------------------------------

std::string result_line(const json& id, const json& result) {
  return sdk::dump_json(json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
}

std::string error_line(const json& id, int code, std::string_view message, const json& data) {
  json err{{"code", code}, {"message", sdk::repair_utf8(message)}};
  if (!data.is_null())
    err["data"] = data;
  return sdk::dump_json(json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(err)}});
}

std::string notification_line(std::string_view method, const json& params) {
  return sdk::dump_json(json{{"jsonrpc", "2.0"}, {"method", method}, {"params", params}});
}

message read_message(std::string_view line) {
  message m;
  auto invalid = [&](int code, std::string why, const json& id = nullptr) {
    m.kind = message::invalid;
    m.error = error_line(id, code, why);
    return m;
  };
  if (line.size() > max_message_bytes)
    return invalid(error_code::invalid_request, "Invalid Request: a message is at most "
                                                  + std::to_string(max_message_bytes) + " bytes");
  std::string why;
  sdk::json_limits limits;
  limits.max_depth = max_message_depth;
  auto j = sdk::parse_json(line, &why, limits);
  if (j.is_discarded())
    return invalid(error_code::parse_error, "Parse error: " + why);
  if (j.is_array())
    return invalid(error_code::invalid_request,
                   "Invalid Request: batches are not supported (one message per line)");
  if (!j.is_object())
    return invalid(error_code::invalid_request, "Invalid Request: a message is a JSON object");
  // The id first, so that the errors below can name it.
  json id;
  bool has_id = false;
  if (auto i = j.find("id"); i != j.end()) {
    has_id = true;
    if (!i->is_string() && !i->is_number_integer())
      return invalid(error_code::invalid_request,
                     "Invalid Request: id must be a string or an integer");
    id = *i;
  }
  auto v = j.find("jsonrpc");
  if (v == j.end() || !v->is_string() || v->get_ref<const std::string&>() != "2.0")
    return invalid(error_code::invalid_request, "Invalid Request: jsonrpc must be \"2.0\"", id);
  auto method = j.find("method");
  if (method == j.end()) {
    if (has_id && (j.contains("result") || j.contains("error"))) {
      m.kind = message::response;
      m.id = std::move(id);
      return m;
    }
    return invalid(error_code::invalid_request, "Invalid Request: method missing", id);
  }
  if (!method->is_string())
    return invalid(error_code::invalid_request, "Invalid Request: method must be a string", id);
  m.method = method->get<std::string>();
  if (auto p = j.find("params"); p != j.end() && !p->is_null()) {
    if (p->is_array())
      return invalid(error_code::invalid_params,
                     "Invalid params: " + shown(m.method) + " takes named params (an object)", id);
    if (!p->is_object())
      return invalid(error_code::invalid_request, "Invalid Request: params must be an object", id);
    m.params = std::move(*p);
  }
  m.kind = has_id ? message::request : message::notification;
  m.id = std::move(id);
  return m;
}

// -- results --------------------------------------------------------------------

json tool_result(json structured, std::string text) {
  return json{{"content", json::array({{{"type", "text"}, {"text", std::move(text)}}})},
              {"structuredContent", std::move(structured)},
              {"isError", false}};
}

json tool_error(std::string message) {
  return json{{"content", json::array({{{"type", "text"}, {"text", std::move(message)}}})},
              {"isError", true}};
}

// -- call -------------------------------------------------------------------------

void call::progress(const std::string& message, std::optional<double> total) {
  if (token_.is_null())
    return;
  std::string line;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (finished_ || cancelled_.load())
      return;
    progress_ += 1;
    json params{{"progressToken", token_}, {"progress", progress_}};
    if (total)
      params["total"] = *total;
    if (!message.empty())
      params["message"] = sdk::repair_utf8(message);
    line = notification_line("notifications/progress", params);
    // Written under the call's lock: a result finished on another thread
    // cannot overtake it.
    owner_->write(line);
  }
}

void call::finish(const json& result) {
  bool send = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (finished_)
      return;
    finished_ = true;
    send = !cancelled_.load();
    if (send)
      owner_->write(result_line(id_, result));
  }
  owner_->ended(id_);
}

void call::on_cancel(std::function<void()> f) {
  bool now = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (cancelled_.load())
      now = true;
    else
      on_cancel_ = std::move(f);
  }
  if (now && f)
    f();
}

void call::cancel() {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (finished_ || cancelled_.exchange(true))
      return;
    f = std::move(on_cancel_);
  }
  if (f)
    f();
}

// -- server -------------------------------------------------------------------------

server::server(server_setup setup) : setup_(std::move(setup)) {
}

server::~server() = default;

void server::write(const std::string& line) {
  std::lock_guard<std::mutex> guard{write_mtx_};
  if (setup_.write)
    setup_.write(line);
}

void server::ended(const json& id) {
  std::lock_guard<std::mutex> guard{mtx_};
  calls_.erase(id_key(id));
}

size_t server::running() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return calls_.size();
}

std::string server::protocol_version() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return version_;
}

void server::cancel_all() {
  std::vector<std::shared_ptr<call>> running;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& [key, c] : calls_)
      running.push_back(c);
  }
  for (auto& c : running)
    c->cancel();
}

void server::handle_oversized() {
  write(error_line(nullptr, error_code::invalid_request,
                   "Invalid Request: a message is at most " + std::to_string(max_message_bytes)
                     + " bytes"));
}

void server::handle(std::string_view line) {
  // Blank lines between messages are no messages.
  if (line.find_first_not_of(" \t\r") == std::string_view::npos)
    return;
  auto m = read_message(line);
  switch (m.kind) {
    case message::invalid:
      write(m.error);
      return;
    case message::response:
      // This server sends no requests: nothing waits for an answer.
      return;
    case message::notification:
      if (m.method == "notifications/cancelled") {
        auto i = m.params.find("requestId");
        if (i == m.params.end() || !(i->is_string() || i->is_number_integer()))
          return;
        std::shared_ptr<call> c;
        {
          std::lock_guard<std::mutex> guard{mtx_};
          if (auto f = calls_.find(id_key(*i)); f != calls_.end())
            c = f->second;
        }
        if (c)
          c->cancel();
      }
      // notifications/initialized and any other notification: nothing to
      // answer (a notification never gets a response).
      return;
    case message::request:
      answer(m);
      return;
  }
}

void server::answer(const message& m) {
  const auto& p = m.params;
  auto bad_params = [&](const std::string& why) {
    write(error_line(m.id, error_code::invalid_params, "Invalid params: " + why));
  };
  if (m.method == "ping") {
    write(result_line(m.id, json::object()));
    return;
  }
  if (m.method == "initialize") {
    auto v = p.find("protocolVersion");
    if (v == p.end() || !v->is_string()) {
      bad_params("protocolVersion must be a string");
      return;
    }
    if (auto c = p.find("capabilities"); c != p.end() && !c->is_object()) {
      bad_params("capabilities must be an object");
      return;
    }
    if (auto c = p.find("clientInfo"); c != p.end() && !c->is_object()) {
      bad_params("clientInfo must be an object");
      return;
    }
    std::string version;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (initialized_) {
        write(error_line(m.id, error_code::invalid_request,
                         "Invalid Request: the connection is initialized already"));
        return;
      }
      initialized_ = true;
      version_ = negotiate_version(v->get<std::string>());
      version = version_;
    }
    json info{{"name", setup_.name}, {"version", setup_.version}};
    if (!setup_.title.empty())
      info["title"] = setup_.title;
    json result{{"protocolVersion", version},
                {"capabilities",
                 {{"tools", {{"listChanged", false}}},
                  {"resources", {{"listChanged", false}, {"subscribe", false}}}}},
                {"serverInfo", std::move(info)}};
    if (!setup_.instructions.empty())
      result["instructions"] = setup_.instructions;
    write(result_line(m.id, result));
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!initialized_) {
      write(
        error_line(m.id, error_code::invalid_request, "Invalid Request: send initialize first"));
      return;
    }
  }
  if (m.method == "tools/list") {
    if (!cursor_of(p)) {
      bad_params("cursor must be a string");
      return;
    }
    json tools = json::array();
    for (const auto& t : setup_.tools) {
      json j{{"name", t.name}, {"description", t.description}, {"inputSchema", t.input_schema}};
      if (!t.title.empty())
        j["title"] = t.title;
      if (!t.output_schema.is_null())
        j["outputSchema"] = t.output_schema;
      if (!t.annotations.is_null())
        j["annotations"] = t.annotations;
      tools.push_back(std::move(j));
    }
    write(result_line(m.id, {{"tools", std::move(tools)}}));
    return;
  }
  if (m.method == "tools/call") {
    call_tool(m);
    return;
  }
  if (m.method == "resources/list") {
    auto cursor = cursor_of(p);
    if (!cursor) {
      bad_params("cursor must be a string");
      return;
    }
    if (!setup_.list_resources) {
      write(result_line(m.id, {{"resources", json::array()}}));
      return;
    }
    auto page = setup_.list_resources(*cursor);
    if (auto* err = std::get_if<rpc_error>(&page)) {
      write(error_line(m.id, err->code, err->message));
      return;
    }
    auto& pg = std::get<resource_page>(page);
    json list = json::array();
    for (const auto& r : pg.resources)
      list.push_back(resource_json(r));
    json result{{"resources", std::move(list)}};
    if (!pg.next_cursor.empty())
      result["nextCursor"] = pg.next_cursor;
    write(result_line(m.id, result));
    return;
  }
  if (m.method == "resources/templates/list") {
    if (!cursor_of(p)) {
      bad_params("cursor must be a string");
      return;
    }
    json list = json::array();
    for (const auto& t : setup_.resource_templates) {
      json j{{"uriTemplate", t.uri_template}, {"name", t.name}};
      if (!t.title.empty())
        j["title"] = t.title;
      if (!t.description.empty())
        j["description"] = t.description;
      if (!t.mime_type.empty())
        j["mimeType"] = t.mime_type;
      list.push_back(std::move(j));
    }
    write(result_line(m.id, {{"resourceTemplates", std::move(list)}}));
    return;
  }
  if (m.method == "resources/read") {
    auto u = p.find("uri");
    if (u == p.end() || !u->is_string()) {
      bad_params("uri must be a string");
      return;
    }
    const auto& uri = u->get_ref<const std::string&>();
    if (!setup_.read_resource) {
      write(
        error_line(m.id, error_code::resource_not_found, "Resource not found", json{{"uri", uri}}));
      return;
    }
    auto read = setup_.read_resource(uri);
    if (auto* err = std::get_if<rpc_error>(&read)) {
      write(error_line(m.id, err->code, err->message,
                       err->code == error_code::resource_not_found ? json{{"uri", uri}} : json{}));
      return;
    }
    json contents = json::array();
    for (const auto& c : std::get<std::vector<resource_text>>(read))
      contents.push_back({{"uri", c.uri}, {"mimeType", c.mime_type}, {"text", c.text}});
    write(result_line(m.id, {{"contents", std::move(contents)}}));
    return;
  }
  write(error_line(m.id, error_code::method_not_found, "Method not found: " + shown(m.method)));
}

void server::call_tool(const message& m) {
  const auto& p = m.params;
  auto bad_params = [&](const std::string& why) {
    write(error_line(m.id, error_code::invalid_params, "Invalid params: " + why));
  };
  auto n = p.find("name");
  if (n == p.end() || !n->is_string()) {
    bad_params("name must be a string");
    return;
  }
  const auto& name = n->get_ref<const std::string&>();
  const tool* t = nullptr;
  for (const auto& x : setup_.tools)
    if (x.name == name)
      t = &x;
  if (t == nullptr) {
    bad_params("Unknown tool: " + shown(name));
    return;
  }
  json args = json::object();
  if (auto a = p.find("arguments"); a != p.end() && !a->is_null()) {
    if (!a->is_object()) {
      bad_params("arguments must be an object");
      return;
    }
    args = *a;
  }
  json token;
  if (auto meta = p.find("_meta"); meta != p.end() && meta->is_object())
    if (auto tk = meta->find("progressToken");
        tk != meta->end() && (tk->is_string() || tk->is_number_integer()))
      token = *tk;
  // Arguments that do not fit the input schema are the tool's error, which
  // the model reads and can correct (tools, "Error Handling", 2025-11-25).
  if (auto why = check_tool_arguments(t->input_schema, args)) {
    write(result_line(m.id, tool_error("Invalid arguments for " + name + ": " + *why)));
    return;
  }
  auto c = std::make_shared<call>(this, m.id, name, std::move(args), std::move(token));
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto key = id_key(m.id);
    if (calls_.count(key) > 0) {
      write(error_line(m.id, error_code::invalid_request,
                       "Invalid Request: a request with this id is still running"));
      return;
    }
    if (calls_.size() >= max_running_calls) {
      write(result_line(m.id, tool_error("The server runs " + std::to_string(max_running_calls)
                                         + " tool calls already; try again when one ended.")));
      return;
    }
    calls_.emplace(key, c);
  }
  if (!setup_.call_tool) {
    c->finish(tool_error("This tool cannot run here."));
    return;
  }
  setup_.call_tool(c);
}

} // namespace quarry::core::mcp
