// What every research of a process shares (see research_engine.hpp).

#include "research_engine.hpp"

#include "cli.hpp"
#include "index_progress.hpp"

#include "quarry/actors/llm_provider.hpp"
#include "quarry/actors/runtime.hpp"
#include "quarry/core/model_profile.hpp"
#include "quarry/core/prompts.hpp"
#include "quarry/core/research_tools.hpp"
#include "quarry/corpus/index.hpp"
#include "quarry/store/store.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include <unistd.h>

namespace quarry::app {

namespace {

namespace fs = std::filesystem;

// The example corpus: installed next to the executable (<prefix>/bin/quarry
// and <prefix>/share/quarry/examples/corpus), else in the source tree this
// binary was built from (a build folder may be anywhere).
std::optional<std::string> find_example_corpus() {
  std::error_code ec;
  std::vector<fs::path> candidates;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto prefix = exe.parent_path().parent_path();
    candidates.push_back(prefix / QUARRY_INSTALL_DATADIR / "quarry" / "examples" / "corpus");
  }
  candidates.push_back(fs::path{QUARRY_BUILD_SOURCE_DIR} / "examples" / "corpus");
  for (const auto& candidate : candidates) {
    if (fs::is_directory(candidate, ec))
      return fs::weakly_canonical(candidate, ec).string();
  }
  return std::nullopt;
}

// A database per corpus folder, in the data folder.
std::string corpus_db_for(const std::string& data_dir, const std::string& folder) {
  uint64_t h = 1469598103934665603ULL;
  for (auto c : folder) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return (fs::path{data_dir} / "corpora" / (std::string{buf} + ".db")).string();
}

} // namespace

struct research_engine::impl {
  context& ctx;
  std::string corpus;
  std::shared_ptr<const core::prompt_library> prompts;
  std::map<std::string, std::shared_ptr<sdk::llm_provider>> made_llms;
  std::map<std::string, actors::llm_actor_settings> llm_settings;
  std::string default_llm;
  // By configured instance; an instance may offer several tools.
  std::vector<std::pair<std::string, host::made_tool>> made_tools;
  // Declared last: destroyed first, so the actors go before the plugin
  // objects they use.
  std::unique_ptr<actors::runtime> rt;
  actors::session_models models;
  actors::tool_set tools;
  actors::store_actor store;
  std::map<std::string, actors::llm_provider_actor> llm_actors;
  std::map<std::string, actors::tool_provider_actor> tool_actors;
  // The models' context windows (check_context).
  context_verdict windows;

  explicit impl(context& c) : ctx(c) {
  }
};

research_engine::research_engine(context& ctx) : impl_(std::make_unique<impl>(ctx)) {
}

research_engine::~research_engine() {
  // The actors stop first. Then the threads of the host's pool and HTTP
  // client end: a thread that sent a message to an actor holds on to the
  // actor system (CAF's logger) until it ends, and the actor system's
  // destructor waits for that. Then the actor system goes, and after it the
  // plugins.
  impl_->store = actors::store_actor{};
  impl_->models = actors::session_models{};
  impl_->tools = actors::tool_set{};
  impl_->llm_actors.clear();
  impl_->tool_actors.clear();
  if (impl_->rt) {
    impl_->rt->stop();
    impl_->rt->await_stopped(impl_->ctx.config.values.runtime.shutdown_grace);
  }
  if (impl_->ctx.services)
    impl_->ctx.services->shutdown();
  impl_->rt.reset();
}

std::variant<std::unique_ptr<research_engine>, int>
research_engine::prepare(context& ctx, const engine_setup& setup) {
  std::unique_ptr<research_engine> self{new research_engine(ctx)};
  auto& st = *self->impl_;
  auto& cfg = ctx.config.values;
  auto corpus = !setup.corpus.empty() ? setup.corpus : cfg.research.corpus;
  if (!corpus.empty()) {
    std::error_code ec;
    if (!fs::is_directory(corpus, ec)) {
      std::cerr << "quarry: the corpus " << corpus << " is not a folder\n";
      return exit_usage;
    }
    corpus = fs::weakly_canonical(corpus, ec).string();
  }
  // The embedded defaults (providers and tools from the environment) were
  // added when the configuration was loaded (core::apply_environment_defaults,
  // called from app/cli.cpp), so every command sees the same ones.
  ctx.load_plugins();
  bool has_search = false;
  for (const auto& [name, entry] : cfg.tools)
    if (const auto* info = ctx.registry->find(entry.plugin);
        info == nullptr || info->tool_kind != sdk::tool_kind::page_reader)
      has_search = true;
  // The index `quarry index` built, when nothing else searches: used as it
  // is (`quarry index` keeps it up to date).
  if (corpus.empty() && !has_search) {
    auto db = default_index_db(ctx.services->data_dir());
    std::error_code ec;
    if (fs::is_regular_file(db, ec)) {
      auto opened = corpus::corpus_index::open(db);
      if (opened.failure) {
        std::cerr << "quarry: cannot open the index " << db
                  << " (built by quarry index): " << opened.failure->message << "\n";
        return exit_failure;
      }
      auto documents = opened.index->size().first;
      if (documents > 0) {
        std::cerr << "quarry: searching the index built by quarry index (" << db << ", "
                  << documents << (documents == 1 ? " document" : " documents")
                  << "; quarry corpus list shows them, --corpus DIR searches another folder)\n";
        core::tool_instance is;
        is.plugin = "local_corpus";
        is.config = {{"db", db}};
        cfg.tools["internal_search"] = std::move(is);
        if (cfg.tools.count("open_url") == 0) {
          core::tool_instance ou;
          ou.plugin = "open_url";
          ou.config = {{"corpus_db", db}};
          cfg.tools["open_url"] = std::move(ou);
        }
        has_search = true;
      }
    }
  }
  if (corpus.empty() && !has_search) {
    auto example = find_example_corpus();
    if (!example) {
      std::cerr << "quarry: nothing to research with: configure web_search or "
                   "internal_search under tools, set BRAVE_API_KEY, TAVILY_API_KEY, "
                   "EXA_API_KEY, SERPER_API_KEY or SEARXNG_URL, or pass --corpus DIR\n";
      return exit_failure;
    }
    corpus = *example;
    std::cerr << "quarry: using the example corpus " << corpus
              << " (no search tool is configured; pass --corpus DIR for your own "
                 "documents)\n";
  }
  st.corpus = corpus;

  // The prompts.
  auto prompts = std::make_shared<core::prompt_library>(core::prompt_library::embedded());
  if (!cfg.research.prompts_dir.empty()) {
    auto r = prompts->load_overrides(cfg.research.prompts_dir);
    if (auto* err = std::get_if<core::prompt_error>(&r)) {
      std::cerr << "quarry: research.prompts_dir: " << err->message << "\n";
      return exit_usage;
    }
  }
  st.prompts = std::move(prompts);

  // The corpus index, updated on every run (cheap when nothing changed).
  if (!corpus.empty()) {
    auto corpus_db = corpus_db_for(ctx.services->data_dir(), corpus);
    auto opened = corpus::corpus_index::open(corpus_db);
    if (opened.failure) {
      std::cerr << "quarry: cannot open the corpus index " << corpus_db << ": "
                << opened.failure->message << "\n";
      return exit_failure;
    }
    auto caps = corpus_size_caps(cfg);
    if (auto* err = std::get_if<std::string>(&caps)) {
      std::cerr << "quarry: " << *err << "\n";
      return exit_usage;
    }
    // The same size caps as `quarry index` and open_url.
    auto update_opts = std::get<corpus::update_options>(caps);
    // On a terminal, a long first indexing shows how far it has come.
    std::optional<index_progress_line> line;
    if (::isatty(STDERR_FILENO) == 1) {
      line.emplace(stderr);
      update_opts.progress = line->callback();
    }
    auto up = opened.index->update({corpus}, update_opts);
    if (line)
      line->finish();
    if (up.failure) {
      std::cerr << "quarry: indexing " << corpus << " failed: " << up.failure->message << "\n";
      return exit_failure;
    }
    if (up.added + up.updated + up.removed > 0)
      std::cerr << "quarry: indexed " << corpus << ": " << up.added << " added, " << up.updated
                << " updated, " << up.removed << " removed\n";
    // Research over nothing would only pretend: an empty corpus is an error.
    if (opened.index->size().first == 0) {
      std::cerr << "quarry: the corpus " << corpus
                << " holds no document Quarry can read (Markdown, text, HTML or PDF "
                   "files)";
      if (!up.notes.empty())
        std::cerr << "; " << up.notes.front()
                  << (up.notes.size() > 1
                        ? " (and " + std::to_string(up.notes.size() - 1) + " more skipped)"
                        : std::string{});
      std::cerr << "\n";
      return exit_failure;
    }
    core::tool_instance is;
    is.plugin = "local_corpus";
    is.config = {{"db", corpus_db}};
    cfg.tools["internal_search"] = std::move(is);
    // The open_url plugin reads `corpus:<n>` ids from the same index (an
    // option of that plugin, whatever the instance is called). Without one,
    // an instance is added, so that agents can read whole documents of the
    // corpus and not only the passages search returns.
    bool reader = false;
    for (auto& [name, entry] : cfg.tools)
      if (entry.plugin == "open_url") {
        reader = true;
        if (!entry.config.contains("corpus_db"))
          entry.config["corpus_db"] = corpus_db;
      }
    if (!reader && cfg.tools.count("open_url") == 0) {
      core::tool_instance ou;
      ou.plugin = "open_url";
      ou.config = {{"corpus_db", corpus_db}};
      cfg.tools["open_url"] = std::move(ou);
    }
  }

  // Providers by role.
  for (const auto& [name, entry] : cfg.llm.providers) {
    auto made = ctx.registry->make_llm(entry.plugin, entry.config, name);
    if (auto* err = std::get_if<std::string>(&made)) {
      std::cerr << "quarry: llm.providers." << name << ": " << *err << "\n";
      return exit_failure;
    }
    st.made_llms[name] = std::get<std::shared_ptr<sdk::llm_provider>>(std::move(made));
    st.llm_settings[name] = actors::llm_actor_settings::of(name, entry.limits);
    st.llm_settings[name].offline = entry.plugin == "extractive"; // no model runs
  }
  st.default_llm = cfg.llm.default_provider.empty() ? st.made_llms.begin()->first
                                                    : cfg.llm.default_provider;
  for (const auto& [name, entry] : cfg.tools) {
    auto made = ctx.registry->make_tools(entry.plugin, entry.config, name);
    if (auto* err = std::get_if<std::string>(&made)) {
      std::cerr << "quarry: tools." << name << ": " << *err << "\n";
      return exit_failure;
    }
    for (auto& tool : std::get<std::vector<host::made_tool>>(std::move(made)))
      st.made_tools.emplace_back(name, std::move(tool));
  }
  return self;
}

namespace {

// The role names looked up in `llm.roles`, first found wins, for each role
// of a research (as start_models gives them their actors).
const std::vector<std::pair<const char*, std::vector<const char*>>>& role_lookups() {
  static const std::vector<std::pair<const char*, std::vector<const char*>>> xs{
    {"clarify", {"clarification", "clarify"}}, {"plan", {"plan", "orchestrator"}},
    {"orchestrator", {"orchestrator"}},        {"research", {"research_agent", "research"}},
    {"report", {"final_report", "report"}},    {"judge", {"judge", "final_report", "report"}}};
  return xs;
}

} // namespace

std::map<std::string, std::string> research_engine::role_providers() const {
  const auto& cfg = impl_->ctx.config.values;
  std::map<std::string, std::string> out;
  for (const auto& [role, names] : role_lookups()) {
    out[role] = impl_->default_llm;
    for (const auto* n : names)
      if (auto r = cfg.llm.roles.find(n);
          r != cfg.llm.roles.end() && impl_->made_llms.count(r->second) > 0) {
        out[role] = r->second;
        break;
      }
  }
  return out;
}

void research_engine::start_models() {
  auto& st = *impl_;
  if (st.rt)
    return;
  auto& cfg = st.ctx.config.values;
  st.rt = std::make_unique<actors::runtime>(cfg);
  auto& rt = *st.rt;
  auto& llm_actors = st.llm_actors;
  for (auto& [name, provider] : st.made_llms) {
    auto hdl = actors::spawn_llm_provider(rt.system(), provider, st.llm_settings[name]);
    rt.add_stoppable(hdl);
    llm_actors[name] = hdl;
  }
  auto roles = role_providers();
  st.models.clarify = llm_actors[roles["clarify"]];
  st.models.plan = llm_actors[roles["plan"]];
  st.models.orchestrator = llm_actors[roles["orchestrator"]];
  st.models.research = llm_actors[roles["research"]];
  st.models.report = llm_actors[roles["report"]];
  st.models.judge = llm_actors[roles["judge"]];
}

void research_engine::start(std::shared_ptr<store::store> db) {
  auto& st = *impl_;
  auto& cfg = st.ctx.config.values;
  start_models();
  auto& rt = *st.rt;
  for (auto& [name, made] : st.made_tools) {
    // One actor per tool: named by its instance, or `INSTANCE/TOOL` for an
    // instance that offers a set (whose limits apply to each of its tools).
    auto tool_name = made.tool->name();
    const auto* info = st.ctx.registry->find(cfg.tools[name].plugin);
    auto key = info != nullptr && info->tool_set ? name + "/" + tool_name : name;
    auto hdl = actors::spawn_tool_provider(
      rt.system(), made.tool, actors::tool_actor_settings::of(key, cfg.tools[name].limits));
    rt.add_stoppable(hdl);
    st.tool_actors[key] = hdl;
    st.tools.tools[tool_name] = {hdl, made.tool->definition(), made.kind};
  }
  // Research agents go to the workers of cluster.workers (docs/cluster.md).
  if (!cfg.cluster.workers.empty()) {
    actors::directory_setup ds;
    ds.workers = cfg.cluster.workers;
    ds.heartbeat = cfg.cluster.heartbeat;
    ds.heartbeat_timeout = cfg.cluster.heartbeat_timeout;
    ds.connect_timeout = cfg.cluster.spawn_timeout;
    st.models.workers = actors::spawn_worker_directory(rt.system(), std::move(ds));
    st.models.spawn_timeout = cfg.cluster.spawn_timeout;
    rt.add_stoppable(st.models.workers);
  }
  // The store actor owns the store from here on; it is stopped (writing
  // what is pending) with the other actors.
  if (db) {
    st.store = actors::spawn_store(rt.system(), std::move(db));
    rt.add_stoppable(st.store);
  }
}

actors::runtime& research_engine::runtime() {
  return *impl_->rt;
}

const actors::session_models& research_engine::models() const {
  return impl_->models;
}

const actors::tool_set& research_engine::tools() const {
  return impl_->tools;
}

const std::shared_ptr<const core::prompt_library>& research_engine::prompts() const {
  return impl_->prompts;
}

const context_verdict& research_engine::check_context() {
  auto& st = *impl_;
  const auto& cfg = st.ctx.config.values;
  start_models();
  // The models of the orchestrator, the research agents and the report,
  // each provider once.
  std::vector<model_window> models;
  auto add = [&](const char* role, std::initializer_list<const char*> names) {
    auto name = provider_for_role(cfg.llm, names, st.default_llm);
    for (auto& m : models)
      if (m.provider == name) {
        m.roles.emplace_back(role);
        return;
      }
    model_window m;
    m.roles.emplace_back(role);
    m.provider = name;
    if (auto i = cfg.llm.providers.find(name); i != cfg.llm.providers.end())
      m.plugin = i->second.plugin;
    if (auto i = st.made_llms.find(name); i != st.made_llms.end())
      m.info = i->second->info();
    m.info.context_window = 0; // unknown until the provider says
    m.info.context_window_source.clear();
    models.push_back(std::move(m));
  };
  add("orchestrator", {"orchestrator"});
  add("research agents", {"research_agent", "research"});
  add("final report", {"final_report", "report"});
  // All asked at once; the answers come back as ordinary messages.
  caf::scoped_actor self{st.rt->system()};
  std::map<caf::actor_addr, size_t> asked;
  for (size_t i = 0; i < models.size(); ++i) {
    if (models[i].plugin == "extractive")
      continue; // no window to find
    auto a = st.llm_actors.find(models[i].provider);
    if (a == st.llm_actors.end())
      continue;
    asked.emplace(a->second.address(), i);
    self->send(a->second, actors::describe_atom::value);
  }
  auto deadline = std::chrono::steady_clock::now() + actors::llm_describe_timeout
                  + std::chrono::seconds{2};
  while (!asked.empty()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;
    auto done = false;
    auto from = [&]() -> std::optional<size_t> {
      auto sender = self->current_sender();
      if (!sender)
        return std::nullopt;
      auto i = asked.find(sender->address());
      if (i == asked.end())
        return std::nullopt;
      auto index = i->second;
      asked.erase(i);
      return index;
    };
    self->receive(
      [&](sdk::model_info& info) {
        if (auto i = from())
          models[*i].info = std::move(info);
      },
      [&](caf::error&) {
        from(); // the window stays unknown
      },
      caf::after(left) >> [&] { done = true; });
    if (done)
      break;
  }
  st.windows = check_context_windows(cfg.research, models);
  return st.windows;
}

const context_verdict& research_engine::windows() const {
  return impl_->windows;
}

const std::map<std::string, actors::llm_provider_actor>& research_engine::llm_providers() const {
  return impl_->llm_actors;
}

const std::map<std::string, actors::tool_provider_actor>& research_engine::tool_providers() const {
  return impl_->tool_actors;
}

const actors::store_actor& research_engine::store() const {
  return impl_->store;
}

const std::string& research_engine::corpus() const {
  return impl_->corpus;
}

const std::string& research_engine::data_dir() const {
  return impl_->ctx.services->data_dir();
}

sdk::blocking_pool& research_engine::blocking_pool() {
  return impl_->ctx.services->pool();
}

corpus::update_options research_engine::index_caps() const {
  auto caps = corpus_size_caps(impl_->ctx.config.values);
  if (auto* opts = std::get_if<corpus::update_options>(&caps))
    return *opts;
  return {};
}

std::variant<actors::tool_set::entry, std::string>
research_engine::session_files_tool(const std::string& db) {
  auto& st = *impl_;
  if (!st.rt)
    return std::string{"the research engine has not started"};
  auto made = st.ctx.registry->make_tools("local_corpus", {{"db", db}, {"id_prefix", "upload"}},
                                          core::attached_files_tool_name);
  if (auto* err = std::get_if<std::string>(&made))
    return "the session_files tool cannot be made: " + *err;
  auto& tools = std::get<std::vector<host::made_tool>>(made);
  if (tools.size() != 1)
    return std::string{"the session_files tool cannot be made: the local_corpus plugin "
                       "offers no single tool"};
  auto& tool = tools.front();
  actors::tool_set::entry e;
  e.actor = actors::spawn_tool_provider(
    st.rt->system(), tool.tool,
    actors::tool_actor_settings::of(core::attached_files_tool_name, {}));
  e.definition = tool.tool->definition();
  e.definition.name = core::attached_files_tool_name;
  e.definition.description
    = "Search the files the user uploaded to this research (PDF, Markdown, text, HTML and DOCX "
      "documents). Use it for anything the uploaded files may answer.";
  e.kind = tool.kind;
  return e;
}

bool verify_for(const core::settings& cfg, const std::string& asked) {
  auto mode = asked.empty() ? cfg.research.verify : asked;
  if (mode == "on")
    return true;
  if (mode == "off")
    return false;
  // auto: when a model writes the report (not the extractive provider).
  auto name = cfg.llm.default_provider;
  for (const char* r : {"final_report", "report"})
    if (auto i = cfg.llm.roles.find(r); i != cfg.llm.roles.end()) {
      name = i->second;
      break;
    }
  auto p = cfg.llm.providers.find(name);
  return p != cfg.llm.providers.end() && p->second.plugin != "extractive";
}

reasoning_model_choice reasoning_model_for(const core::settings& cfg) {
  reasoning_model_choice out;
  const auto& mode = cfg.research.reasoning_model;
  if (mode == "on" || mode == "true" || mode == "off" || mode == "false") {
    out.on = mode == "on" || mode == "true";
    out.reason = "research.reasoning_model: " + mode;
    return out;
  }
  out.automatic = true;
  // auto: the orchestrator's model, by its provider's configuration or name.
  auto name = cfg.llm.default_provider;
  if (auto i = cfg.llm.roles.find("orchestrator"); i != cfg.llm.roles.end())
    name = i->second;
  auto p = cfg.llm.providers.find(name);
  if (p == cfg.llm.providers.end()) {
    out.reason = "no orchestrator model configured";
    return out;
  }
  const auto& c = p->second.config;
  auto model = c.is_object() && c.contains("model") && c["model"].is_string()
                 ? c["model"].get<std::string>()
                 : std::string{};
  out.on = core::reasoning_model_by_config(p->second.plugin, c);
  if (p->second.plugin == "extractive")
    out.reason = "the offline extractive provider";
  else if (c.is_object() && (c.contains("reasoning") || c.contains("thinking_budget")))
    out.reason = "provider " + name + "'s configuration";
  else
    out.reason = out.on ? "the model's name (" + model + ")"
                        : "the model's name (" + model + ") is not a known reasoning model";
  return out;
}

actors::session_spec research_engine::spec_for(const std::string& session_id,
                                               const stored_options& so,
                                               const resume_info* resume) const {
  const auto& research = impl_->ctx.config.values.research;
  actors::session_spec spec;
  spec.session_id = session_id;
  spec.question = question_for_model(so);
  spec.conversation = so.follow_up_context.thread;
  spec.checkpoints = static_cast<bool>(impl_->store);
  spec.clarify = so.clarify;
  spec.max_parallel_agents = so.max_agents > 0 ? so.max_agents : research.max_parallel_agents;
  // A session's own limit may lower the configured one (0: the default).
  spec.max_cycles = research.max_cycles;
  if (so.max_cycles > 0 && (spec.max_cycles == 0 || so.max_cycles < spec.max_cycles))
    spec.max_cycles = so.max_cycles;
  spec.agent_max_cycles = research.agent_max_cycles;
  spec.max_plan_steps = research.max_plan_steps;
  auto reasoning = reasoning_model_for(impl_->ctx.config.values);
  spec.reasoning_model = reasoning.on;
  spec.reasoning_model_auto = reasoning.automatic;
  spec.reasoning_model_reason = std::move(reasoning.reason);
  // The session's own limit, else its strategy and mode's (the reflective
  // deep_research mode has its own, research.deep_research_deadline).
  spec.deadline = so.deadline_ms > 0 ? std::chrono::milliseconds{so.deadline_ms}
                                     : research.deadline_for(so.strategy, so.mode);
  if (resume != nullptr) {
    spec.resumed = true;
    spec.resume_from = resume->checkpoint;
    spec.resume_checkpoint = resume->checkpoint_number;
    spec.superseded_after = resume->checkpoint_seq;
    if (resume->checkpoint)
      spec.deadline = std::chrono::milliseconds{
        core::resume_deadline_ms(spec.deadline.count(), resume->checkpoint->elapsed_ms)};
  }
  spec.final_report_timeout = research.final_report_timeout;
  spec.agent_force_report = research.agent_report_after;
  spec.agent_hard_timeout = research.agent_timeout;
  spec.context_tokens = research.context_tokens;
  // The models' window, when check_context() found one (model_check.hpp).
  if (impl_->windows.context_tokens > 0)
    spec.context_tokens = impl_->windows.context_tokens;
  spec.orchestrator_max_tokens = research.orchestrator_max_tokens;
  spec.final_max_tokens = research.final_report_max_tokens;
  spec.agent_step_max_tokens = research.agent_step_max_tokens;
  spec.agent_report_max_tokens = research.agent_report_max_tokens;
  spec.report_continuations = research.report_continuations;
  spec.current_datetime = core::prompt_date(std::chrono::system_clock::now());
  spec.verify = verify_for(impl_->ctx.config.values, so.verify);
  spec.verify_action = research.verify_action == "drop" ? core::verification::action::drop
                                                        : core::verification::action::mark;
  spec.verify_timeout = research.verify_timeout;
  // Both names were checked with the configuration and the options.
  spec.strategy = actors::parse_research_strategy(so.strategy.empty() ? research.strategy
                                                                      : so.strategy)
                    .value_or(actors::research_strategy::orchestrator);
  auto& rs = spec.reflective;
  rs.mode = core::reflective::parse_query_mode(so.mode.empty() ? research.mode : so.mode)
              .value_or(core::reflective::query_mode::deep_research);
  auto depth = so.depth.empty() ? research.depth : so.depth;
  rs.depth = depth == "auto"
               ? core::reflective::depth::automatic
               : core::reflective::parse_depth(depth).value_or(core::reflective::depth::automatic);
  rs.max_plan_iterations = research.max_plan_iterations;
  rs.max_search_queries = research.max_search_queries;
  rs.max_urls_to_crawl = research.max_urls_to_crawl;
  rs.max_clarifying_questions = research.max_clarifying_questions;
  rs.web_search_fallback = research.web_search_fallback;
  return spec;
}

} // namespace quarry::app
