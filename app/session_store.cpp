// The CLI's side of the research store.

#include "session_store.hpp"

#include "report_render.hpp"

#include "quarry/core/reflective.hpp"
#include "quarry/core/settings.hpp"
#include "quarry/host/services.hpp"
#include "quarry/lexical/lexical.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/store/store.hpp"

#include "quarry/actors/session.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <unistd.h>

namespace quarry::app {

namespace fs = std::filesystem;

std::string data_dir_of(const core::settings& cfg) {
  return cfg.runtime.data_dir.empty() ? host::default_data_dir() : cfg.runtime.data_dir;
}

std::string store_path(const core::settings& cfg) {
  if (!cfg.store.path.empty())
    return cfg.store.path;
  return (fs::path{data_dir_of(cfg)} / "quarry.db").string();
}

std::variant<std::shared_ptr<store::store>, std::string> open_store(const core::settings& cfg,
                                                                    bool read_only) {
  store::open_options opts;
  opts.read_only = read_only;
  auto path = store_path(cfg);
  auto opened = store::store::open(path, opts);
  if (auto* err = std::get_if<sdk::error>(&opened))
    return with_store_path(path, *err);
  return std::shared_ptr<store::store>{std::get<std::unique_ptr<store::store>>(std::move(opened))};
}

// -- session locks ----------------------------------------------------------

/// The lock file of one store, open for the life of the process.
struct session_lock::table {
  std::mutex mtx;
  std::string path;
  /// -1 until opened; opened read-only when the folder cannot be written
  /// (held() still works), reopened for writing by take().
  int fd = -1;
  bool writable = false;
  /// The offsets this process holds.
  std::set<int64_t> mine;
};

namespace {

// The lock table of `store_file`'s folder (one per folder, never freed: its
// descriptor must stay open while any lock is held).
session_lock::table& lock_table(const std::string& store_file) {
  static std::mutex mtx;
  static std::map<std::string, std::unique_ptr<session_lock::table>> tables;
  auto path = (fs::path{store_file}.parent_path() / "locks" / "sessions.lock").string();
  std::lock_guard<std::mutex> guard{mtx};
  auto& t = tables[path];
  if (!t) {
    t = std::make_unique<session_lock::table>();
    t->path = std::move(path);
  }
  return *t;
}

// The byte a session's lock covers: the 64 bits of its id (`q` and 16 hex
// digits) shifted right by 2, so that the byte lies below OFF_MAX.
int64_t lock_offset(const std::string& session_id) {
  uint64_t v = 0;
  for (size_t i = 1; i < session_id.size(); ++i) {
    auto c = session_id[i];
    v = (v << 4) | static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  return static_cast<int64_t>(v >> 2);
}

struct flock one_byte(short type, int64_t offset) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(offset);
  fl.l_len = 1;
  return fl;
}

// Opens the table's file (for writing if `write`); an error names it as
// HTTP clients may read it. Called with t.mtx held.
std::string open_table(session_lock::table& t, bool write) {
  if (t.fd >= 0 && (t.writable || !write))
    return {};
  const std::string shown = "locks/sessions.lock beside the research store";
  std::error_code ec;
  if (write) {
    fs::create_directories(fs::path{t.path}.parent_path(), ec);
    if (ec)
      return "cannot create the folder of " + shown + ": " + ec.message();
  }
  int fd = ::open(t.path.c_str(), (write ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW,
                  0600);
  if (fd < 0)
    return "cannot open the lock file " + shown + ": " + std::strerror(errno);
  // A read-only descriptor holds no lock (a write lock needs a writable
  // one), so closing it releases nothing.
  if (t.fd >= 0)
    ::close(t.fd);
  t.fd = fd;
  t.writable = write;
  return {};
}

} // namespace

std::variant<std::unique_ptr<session_lock>, std::string>
session_lock::take(const std::string& store_file, const std::string& session_id) {
  if (!store::is_session_id(session_id))
    return "not a session id: '" + session_id + "'";
  auto& t = lock_table(store_file);
  auto offset = lock_offset(session_id);
  std::lock_guard<std::mutex> guard{t.mtx};
  if (t.mine.count(offset) != 0)
    return "session " + session_id + " is running in this process";
  if (auto err = open_table(t, true); !err.empty())
    return err;
  auto fl = one_byte(F_WRLCK, offset);
  if (::fcntl(t.fd, F_SETLK, &fl) != 0) {
    auto why = errno;
    if (why == EACCES || why == EAGAIN) {
      auto probe = one_byte(F_WRLCK, offset);
      std::string pid;
      if (::fcntl(t.fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK && probe.l_pid > 0)
        pid = " (pid " + std::to_string(probe.l_pid) + ")";
      return "session " + session_id + " is running in another process" + pid;
    }
    return "cannot lock session " + session_id
           + " in locks/sessions.lock beside the research store: " + std::strerror(why);
  }
  t.mine.insert(offset);
  return std::unique_ptr<session_lock>{new session_lock(&t, offset)};
}

bool session_lock::held(const std::string& store_file, const std::string& session_id) {
  if (!store::is_session_id(session_id))
    return false;
  auto& t = lock_table(store_file);
  auto offset = lock_offset(session_id);
  std::lock_guard<std::mutex> guard{t.mtx};
  if (t.mine.count(offset) != 0)
    return true;
  if (t.fd < 0 && !open_table(t, false).empty())
    return false;
  // F_GETLK does not report this process's own locks: those are `mine`.
  auto probe = one_byte(F_WRLCK, offset);
  return ::fcntl(t.fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
}

session_lock::~session_lock() {
  std::lock_guard<std::mutex> guard{table_->mtx};
  auto fl = one_byte(F_UNLCK, offset_);
  (void)::fcntl(table_->fd, F_SETLK, &fl);
  table_->mine.erase(offset_);
}

std::string strategy_option_problem(const std::string& strategy, const std::string& mode,
                                    const std::string& depth) {
  if (!strategy.empty() && strategy != "orchestrator" && strategy != "reflective")
    return "strategy: not orchestrator or reflective: '" + strategy + "'";
  if (!mode.empty() && !core::reflective::parse_query_mode(mode))
    return "mode: not simple, web_search or deep_research: '" + mode + "'";
  if (!depth.empty() && depth != "auto" && !core::reflective::parse_depth(depth))
    return "depth: not auto, light, medium or extended: '" + depth + "'";
  return {};
}

bool imply_reflective(std::string& strategy, const std::string& mode, const std::string& depth,
                      std::string& problem) {
  if (mode.empty() && depth.empty())
    return false;
  if (strategy == "orchestrator") {
    problem = std::string{!mode.empty() ? "mode" : "depth"}
              + ": an option of the reflective strategy, which the orchestrator does not read "
                "(choose the reflective strategy, or leave it out)";
    return false;
  }
  if (!strategy.empty())
    return false;
  strategy = "reflective";
  return true;
}

nlohmann::json to_json(const stored_options& x) {
  nlohmann::json j{{"question", x.question}, {"clarify", x.clarify}};
  if (!x.answers.empty())
    j["answers"] = x.answers;
  if (x.deadline_ms > 0)
    j["deadline_ms"] = x.deadline_ms;
  if (x.max_agents > 0)
    j["max_agents"] = x.max_agents;
  if (x.max_cycles > 0)
    j["max_cycles"] = x.max_cycles;
  if (!x.corpus.empty())
    j["corpus"] = x.corpus;
  if (!x.uploads.empty()) {
    auto list = nlohmann::json::array();
    for (const auto& u : x.uploads) {
      nlohmann::json e{{"id", u.id}};
      if (!u.name.empty())
        e.update({{"name", u.name}, {"bytes", u.bytes}, {"type", u.type}});
      list.push_back(std::move(e));
    }
    j["uploads"] = std::move(list);
  }
  if (!x.follow_up_context.text.empty())
    j["follow_up_context"] = x.follow_up_context.text;
  if (!x.follow_up_context.thread.empty())
    j["conversation"] = thread_json(x.follow_up_context.thread);
  if (!x.verify.empty())
    j["verify"] = x.verify;
  if (!x.strategy.empty())
    j["strategy"] = x.strategy;
  if (!x.mode.empty())
    j["mode"] = x.mode;
  if (!x.depth.empty())
    j["depth"] = x.depth;
  return j;
}

std::variant<stored_options, std::string> stored_options_from(const nlohmann::json& j) {
  if (!j.is_object())
    return std::string{"the stored options are not an object"};
  stored_options out;
  auto text = [&](const char* key, std::string& into) -> bool {
    auto i = j.find(key);
    if (i == j.end())
      return true;
    if (!i->is_string())
      return false;
    into = i->get<std::string>();
    return true;
  };
  for (auto [key, into] : {std::pair{"question", &out.question}, std::pair{"answers", &out.answers},
                           std::pair{"corpus", &out.corpus},
                           std::pair{"follow_up_context", &out.follow_up_context.text},
                           std::pair{"verify", &out.verify}, std::pair{"strategy", &out.strategy},
                           std::pair{"mode", &out.mode}, std::pair{"depth", &out.depth}})
    if (!text(key, *into))
      return std::string{"stored options: "} + key + ": not text";
  if (!out.verify.empty() && out.verify != "on" && out.verify != "off")
    return std::string{"stored options: verify: not on or off"};
  if (auto why = strategy_option_problem(out.strategy, out.mode, out.depth); !why.empty())
    return "stored options: " + why;
  if (auto i = j.find("conversation"); i != j.end()) {
    auto thread = thread_from(*i);
    if (auto* why = std::get_if<std::string>(&thread))
      return "stored options: conversation: " + *why;
    out.follow_up_context.thread = std::get<std::vector<sdk::chat_message>>(std::move(thread));
  }
  if (auto i = j.find("clarify"); i != j.end()) {
    if (!i->is_boolean())
      return std::string{"stored options: clarify: not true or false"};
    out.clarify = i->get<bool>();
  }
  if (auto i = j.find("deadline_ms"); i != j.end()) {
    if (!i->is_number_integer() || i->get<int64_t>() < 0)
      return std::string{"stored options: deadline_ms: not a duration"};
    out.deadline_ms = i->get<int64_t>();
  }
  if (auto i = j.find("max_agents"); i != j.end()) {
    if (!i->is_number_integer() || i->get<int64_t>() < 1 || i->get<int64_t>() > 16)
      return std::string{"stored options: max_agents: not between 1 and 16"};
    out.max_agents = i->get<int>();
  }
  if (auto i = j.find("max_cycles"); i != j.end()) {
    if (!i->is_number_integer() || i->get<int64_t>() < 1 || i->get<int64_t>() > 1000)
      return std::string{"stored options: max_cycles: not between 1 and 1000"};
    out.max_cycles = i->get<int>();
  }
  if (auto i = j.find("uploads"); i != j.end()) {
    if (!i->is_array() || i->size() > 20)
      return std::string{"stored options: uploads: not a list of at most 20 files"};
    for (const auto& e : *i) {
      session_upload u;
      auto field = [&](const char* key, std::string& into) {
        auto f = e.find(key);
        if (f == e.end())
          return true;
        if (!f->is_string())
          return false;
        into = f->get<std::string>();
        return true;
      };
      if (!e.is_object() || !field("id", u.id) || !field("name", u.name) || !field("type", u.type))
        return std::string{"stored options: uploads: not a list of files"};
      if (auto b = e.find("bytes"); b != e.end()) {
        if (!b->is_number_integer() || b->get<int64_t>() < 0)
          return std::string{"stored options: uploads: bytes: not a size"};
        u.bytes = b->get<int64_t>();
      }
      out.uploads.push_back(std::move(u));
    }
  }
  if (out.question.empty())
    return std::string{"stored options: no question"};
  return out;
}

std::string question_for_model(const stored_options& x) {
  std::string out;
  if (!x.follow_up_context.text.empty())
    out += x.follow_up_context.text + "\n\n" + std::string{lexical::follow_up_marker};
  out += x.question;
  if (!x.answers.empty())
    out += "\n\nClarifications from the user:\n" + x.answers;
  return out;
}

namespace {

// Bytes of each report in a follow-up's thread (its sources follow it), and
// of any message of a kept thread.
constexpr size_t report_bytes = 16'000;
constexpr size_t message_bytes = 20'000;

sdk::chat_message said(sdk::role author, std::string text) {
  sdk::chat_message m;
  m.author = author;
  m.content = std::move(text);
  return m;
}

std::string cut(const std::string& text, size_t bytes) {
  if (text.size() <= bytes)
    return text;
  return std::string{sdk::utf8_prefix(text, bytes)} + "\n[...]";
}

// The sources a stored report cites, one line each (`[n] title url`), after
// a heading; empty when it cites none.
store::result<std::string> sources_of(store::store& db, const std::string& id) {
  auto docs = db.documents(id);
  if (!docs)
    return docs.error();
  auto cites = db.citations(id);
  if (!cites)
    return cites.error();
  std::map<std::string, const store::document_row*> by_id;
  for (const auto& d : *docs)
    by_id[d.document_id] = &d;
  std::string sources;
  for (const auto& c : *cites) {
    auto d = by_id.find(c.document_id);
    sources += "[" + std::to_string(c.number) + "] "
               + (d != by_id.end() ? d->second->title + " " + d->second->url : c.document_id)
               + "\n";
  }
  if (sources.empty())
    return std::string{};
  return "\n\nSources of that report:\n" + sources;
}

// A stored session's question as it was asked: with the answers to its
// clarifying questions.
std::string asked_in(const store::session_row& row) {
  auto parsed = stored_options_from(row.options);
  auto* so = std::get_if<stored_options>(&parsed);
  if (so == nullptr)
    return row.question;
  auto out = so->question;
  if (!so->answers.empty())
    out += "\n\nClarifications from the user:\n" + so->answers;
  return out;
}

// The thread up to session `row`, its question and report included: the
// thread stored with it (else, `depth` sessions up at most, its parents'),
// then its own question and report.
store::result<std::vector<sdk::chat_message>>
thread_through(store::store& db, const store::session_row& row, size_t depth) {
  std::vector<sdk::chat_message> out;
  auto parsed = stored_options_from(row.options);
  auto* so = std::get_if<stored_options>(&parsed);
  if (so != nullptr && !so->follow_up_context.thread.empty()) {
    out = so->follow_up_context.thread;
  } else if (depth > 1 && !row.parent_id.empty()) {
    auto parent = db.session(row.parent_id);
    if (!parent)
      return parent.error();
    if (*parent) {
      auto before = thread_through(db, **parent, depth - 1);
      if (!before)
        return before.error();
      out = std::move(*before);
    }
  }
  out.push_back(said(sdk::role::user, asked_in(row)));
  auto report = db.final_report(row.id);
  if (!report)
    return report.error();
  if (*report && !sdk::trim((*report)->text).empty()) {
    // The report cut to its share, then the sources it cites.
    auto sources = sources_of(db, row.id);
    if (!sources)
      return sources.error();
    out.push_back(said(sdk::role::assistant, cut((*report)->text, report_bytes) + *sources));
  }
  return kept_thread(std::move(out));
}

} // namespace

std::vector<sdk::chat_message> kept_thread(std::vector<sdk::chat_message> thread) {
  auto counts = [](const sdk::chat_message& m) {
    return (m.author == sdk::role::user || m.author == sdk::role::assistant)
           && !sdk::trim(m.content).empty();
  };
  // From the thread_questions-th last user message on.
  size_t first = 0;
  size_t users = 0;
  for (size_t i = thread.size(); i > 0; --i)
    if (counts(thread[i - 1]) && thread[i - 1].author == sdk::role::user
        && ++users == thread_questions) {
      first = i - 1;
      break;
    }
  std::vector<sdk::chat_message> out;
  for (size_t i = first; i < thread.size(); ++i)
    if (counts(thread[i]))
      out.push_back(said(thread[i].author, cut(thread[i].content, message_bytes)));
  return out;
}

nlohmann::json thread_json(const std::vector<sdk::chat_message>& thread) {
  auto out = nlohmann::json::array();
  for (const auto& m : thread)
    if (m.author == sdk::role::user || m.author == sdk::role::assistant)
      out.push_back(
        {{"role", m.author == sdk::role::user ? "user" : "assistant"}, {"content", m.content}});
  return out;
}

std::variant<std::vector<sdk::chat_message>, std::string> thread_from(const nlohmann::json& j) {
  if (!j.is_array())
    return std::string{"not a list of messages"};
  std::vector<sdk::chat_message> out;
  for (const auto& m : j) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content")
        || !m["content"].is_string())
      return std::string{"a message is not {\"role\", \"content\"}"};
    auto role = m["role"].get<std::string>();
    if (role != "user" && role != "assistant")
      return "a message's role is not user or assistant: '" + role + "'";
    out.push_back(said(role == "user" ? sdk::role::user : sdk::role::assistant,
                       m["content"].get<std::string>()));
  }
  return out;
}

// The earlier session's question, report and sources, as the models see
// them in a follow-up (bounded: the report is cut at 24,000 characters),
// and the thread through it.
store::result<conversation_context> follow_up_context(store::store& db, const std::string& id,
                                                      std::string& problem) {
  if (!store::is_session_id(id))
    return problem = "--follow-up: not a session id: '" + id + "'", conversation_context{};
  auto row = db.session(id);
  if (!row)
    return row.error();
  if (!*row)
    return problem = "--follow-up: no session " + id, conversation_context{};
  auto report = db.final_report(id);
  if (!report)
    return report.error();
  if (!*report)
    return problem = "--follow-up: session " + id + " has no report ("
                     + store::to_string((*row)->state) + ")",
           conversation_context{};
  constexpr size_t max_report = 24'000;
  auto text = (*report)->text;
  if (text.size() > max_report)
    text = std::string{sdk::utf8_prefix(text, max_report)} + "\n[...]";
  std::string out = "Earlier research in this conversation.\nQuestion: " + (*row)->question
                    + "\n\nReport:\n" + text;
  auto sources = sources_of(db, id);
  if (!sources)
    return sources.error();
  out += *sources;
  auto thread = thread_through(db, **row, thread_questions);
  if (!thread)
    return thread.error();
  conversation_context ctx;
  // Stored text may be anything a process wrote: valid UTF-8 from here on.
  ctx.text = sdk::repair_utf8(out);
  ctx.thread = std::move(*thread);
  for (auto& m : ctx.thread)
    m.content = sdk::repair_utf8(m.content);
  return ctx;
}

const char* state_after(const actors::session_result& r) {
  if (r.interrupted)
    return "interrupted";
  switch (r.status) {
    case actors::session_status::report:
      return "completed";
    case actors::session_status::clarification:
      return "clarification";
    case actors::session_status::failed:
      break;
  }
  return "failed";
}

// A stored `running` session whose process died is shown as interrupted.
store::session_state effective_state(store::store& db, const store::session_row& row) {
  auto runs = [](store::session_state s) {
    return s == store::session_state::running || s == store::session_state::pending;
  };
  if (!runs(row.state) || session_lock::held(db.path(), row.id))
    return row.state;
  auto again = db.session(row.id);
  if (again && *again && !runs((*again)->state))
    return (*again)->state;
  return store::session_state::interrupted;
}

// The cited sources of a stored report: the citation numbers its body uses.
std::map<int, int> shown_numbering(const std::string& body, const std::set<int>& known) {
  std::map<int, int> out;
  int next = 1;
  for (int n : citation_order(body))
    if (known.count(n) != 0)
      out[n] = next++;
  return out;
}

store::result<std::vector<cited_source>> report_sources(store::store& db, const std::string& id,
                                                        const std::string& body) {
  auto documents = db.documents(id);
  if (!documents)
    return documents.error();
  auto cites = db.citations(id);
  if (!cites)
    return cites.error();
  std::map<std::string, store::document_row> docs;
  for (auto& d : *documents)
    docs.emplace(d.document_id, std::move(d));
  std::set<int> known;
  for (const auto& c : *cites)
    known.insert(c.number);
  auto shown = shown_numbering(body, known);
  std::vector<cited_source> out;
  for (const auto& c : *cites) {
    auto number = shown.find(c.number);
    if (number == shown.end())
      continue;
    auto d = docs.find(c.document_id);
    cited_source s;
    s.number = number->second;
    s.stored_number = c.number;
    s.document_id = c.document_id;
    s.title = d != docs.end() ? d->second.title : c.document_id;
    s.url = d != docs.end() ? d->second.url : std::string{};
    s.snippet_only = d != docs.end() && d->second.snippet_only;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const cited_source& x, const cited_source& y) { return x.number < y.number; });
  return out;
}

std::map<int, int> shown_numbers(const std::vector<cited_source>& sources) {
  std::map<int, int> out;
  for (const auto& s : sources)
    out[s.stored()] = s.number;
  return out;
}

store::result<std::optional<report_parts>>
stored_report(store::store& db, const store::session_row& row, store::session_state state,
              bool as_stored) {
  auto r = db.final_report(row.id);
  if (!r)
    return r.error();
  std::optional<report_parts> out;
  if (!*r)
    return out;
  auto sources = report_sources(db, row.id, (*r)->text);
  if (!sources)
    return sources.error();
  report_parts parts;
  parts.question = row.question;
  if (as_stored) {
    parts.body = (*r)->text;
    for (auto& s : *sources) {
      s.number = s.stored();
      s.stored_number = 0;
    }
    std::sort(sources->begin(), sources->end(),
              [](const cited_source& x, const cited_source& y) { return x.number < y.number; });
  } else {
    parts.body = renumber_citations((*r)->text, shown_numbers(*sources)).text;
  }
  parts.sources = std::move(*sources);
  parts.partial = state != store::session_state::completed;
  out = std::move(parts);
  return out;
}

store::result<std::vector<store::claim_row>> shown_claims(store::store& db, const std::string& id) {
  auto claims = db.claims(id);
  if (!claims)
    return claims.error();
  if (claims->empty())
    return claims;
  auto report = db.final_report(id);
  if (!report)
    return report.error();
  if (!*report)
    return claims;
  auto sources = report_sources(db, id, (*report)->text);
  if (!sources)
    return sources.error();
  auto shown = shown_numbers(*sources);
  auto body = renumber_citations((*report)->text, shown);
  auto number = [&](int n) {
    auto found = shown.find(n);
    return found != shown.end() ? found->second : 0;
  };
  for (auto& c : *claims) {
    std::vector<int> cited;
    for (int n : c.citations)
      if (auto m = number(n); m != 0)
        cited.push_back(m);
    c.citations = std::move(cited);
    if (c.source) {
      if (auto m = number(*c.source); m != 0)
        c.source = m;
    }
    if (c.recited_to) {
      if (auto m = number(*c.recited_to); m != 0)
        c.recited_to = m;
    }
    if (c.report_begin)
      c.report_begin = static_cast<int64_t>(body.shifted(static_cast<size_t>(*c.report_begin)));
    if (c.report_end)
      c.report_end = static_cast<int64_t>(body.shifted(static_cast<size_t>(*c.report_end)));
  }
  return claims;
}

report_parts report_of(const std::string& question, const actors::session_result& r, bool partial) {
  report_parts out;
  out.question = question;
  out.body = r.report;
  out.partial = partial;
  std::set<int> known;
  for (const auto& s : r.sources)
    known.insert(s.number);
  auto shown = shown_numbering(r.report, known);
  out.body = renumber_citations(r.report, shown).text;
  for (const auto& s : r.sources) {
    auto number = shown.find(s.number);
    if (number == shown.end())
      continue;
    cited_source c;
    c.number = number->second;
    c.stored_number = s.number;
    c.title = s.title;
    c.url = s.url;
    c.snippet_only = s.snippet_only;
    out.sources.push_back(std::move(c));
  }
  std::sort(out.sources.begin(), out.sources.end(),
            [](const cited_source& x, const cited_source& y) { return x.number < y.number; });
  return out;
}

nlohmann::json claims_json(const std::string& id, const std::vector<store::claim_row>& claims) {
  nlohmann::json list = nlohmann::json::array();
  std::map<std::string, int64_t> counts{{"supported", 0},
                                        {"partly_supported", 0},
                                        {"unsupported", 0},
                                        {"no_evidence", 0},
                                        {"unverified", 0}};
  int64_t recited = 0;
  int64_t snippet_only = 0;
  for (const auto& c : claims) {
    list.push_back(store::to_json(c));
    ++counts[c.verdict];
    recited += c.recited_to ? 1 : 0;
    snippet_only += c.snippet_only && c.verdict != "unverified" ? 1 : 0;
  }
  nlohmann::json summary = {
    {"claims", claims.size()}, {"recited", recited}, {"snippet_only", snippet_only}};
  for (const auto& [verdict, n] : counts)
    summary[verdict] = n;
  return {{"id", id}, {"claims", std::move(list)}, {"summary", std::move(summary)}};
}

std::string with_store_path(const std::string& store_file, const sdk::error& err) {
  static constexpr std::string_view prefix = "research store: ";
  std::string_view msg = err.message;
  if (msg.substr(0, prefix.size()) == prefix)
    msg.remove_prefix(prefix.size());
  return "research store '" + store_file + "': " + std::string{msg};
}

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::string rfc3339(int64_t ms) {
  if (ms <= 0)
    return {};
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

} // namespace quarry::app
