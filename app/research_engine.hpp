// What every research of a process shares: the prompts, the corpus index,
// the plugin instances, and once started the actor system with one actor per
// provider and tool and the store actor. `quarry research` makes one for its
// session; `quarry serve` one for all of its sessions.

#pragma once

#include "context.hpp"
#include "model_check.hpp"
#include "session_store.hpp"

#include "quarry/actors/session.hpp"
#include "quarry/actors/store.hpp"
#include "quarry/actors/tool_provider.hpp"
#include "quarry/corpus/index.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>

namespace quarry::actors {
class runtime;
} // namespace quarry::actors

namespace quarry::sdk {
class blocking_pool;
} // namespace quarry::sdk

namespace quarry::app {

/// What a research engine is prepared with.
struct engine_setup {
  /// A folder to index and search (absolute), or empty: the configured
  /// `research.corpus`, or the example corpus when nothing else can search.
  std::string corpus;
};

class research_engine {
public:
  /// Finds the corpus (indexing it), loads the prompts and makes the plugin
  /// instances. Says what it uses and any problem on stderr; on failure,
  /// returns the exit code.
  static std::variant<std::unique_ptr<research_engine>, int> prepare(context& ctx,
                                                                     const engine_setup& setup);

  ~research_engine();
  research_engine(const research_engine&) = delete;
  research_engine& operator=(const research_engine&) = delete;

  /// Starts the actor system and the provider and tool actors, and the store
  /// actor when `db` is set (it owns `db` from then on).
  void start(std::shared_ptr<store::store> db);

  /// Starts the actor system and the LLM provider actors only (start() does
  /// it too, once), so that check_context() can ask the models before
  /// anything is stored.
  void start_models();

  /// Asks the providers of the orchestrator, research and report roles for
  /// their models' facts (`describe_atom`, all at once, each answered within
  /// actors::llm_describe_timeout) and decides with check_context_windows();
  /// spec_for() gives the sessions the verdict's prompt budget. Starts the
  /// models if needed. Blocks the calling thread (never an actor's).
  const context_verdict& check_context();

  /// The verdict of the last check_context(); before any, an empty one.
  const context_verdict& windows() const;

  actors::runtime& runtime();
  const actors::session_models& models() const;
  const actors::tool_set& tools() const;
  /// The provider instance (`llm.providers` name) each role of a research
  /// uses: clarify, plan, orchestrator, research, report and judge, as
  /// `llm.roles` assigns them (with the same fallbacks as the session).
  std::map<std::string, std::string> role_providers() const;
  const std::shared_ptr<const core::prompt_library>& prompts() const;
  /// The provider actors by instance name (`llm.providers`), once started.
  const std::map<std::string, actors::llm_provider_actor>& llm_providers() const;
  /// The tool actors by instance name (`tools`; `INSTANCE/TOOL` for each
  /// tool of an instance that offers a set, as an `mcp` one), once started.
  const std::map<std::string, actors::tool_provider_actor>& tool_providers() const;
  /// The store actor; null without a store.
  const actors::store_actor& store() const;
  /// The corpus searched (absolute), or empty.
  const std::string& corpus() const;
  /// The data folder (runtime.data_dir, resolved): where `quarry serve`
  /// keeps uploads and each session's own files (upload_files.hpp).
  const std::string& data_dir() const;
  /// The host's blocking pool (file and index work off the actors' threads).
  sdk::blocking_pool& blocking_pool();
  /// The size caps of indexing (the same as `quarry index`'s).
  corpus::update_options index_caps() const;

  /// The `session_files` tool of a session with uploaded files: an instance
  /// of the `local_corpus` plugin over the session's index `db` (its
  /// documents `upload:<n>`), offered to the model as `session_files` (an
  /// internal_search), with an actor of its own. The caller stops that
  /// actor (`stop_atom`) when the session ends. Thread-safe; an error names
  /// what failed.
  std::variant<actors::tool_set::entry, std::string> session_files_tool(const std::string& db);

  /// The session of `so` under the configured research settings (deadline
  /// and agents as `so` overrides them; a resumed session gets what was left
  /// of its deadline).
  actors::session_spec spec_for(const std::string& session_id, const stored_options& so,
                                const resume_info* resume) const;

private:
  research_engine(context& ctx);
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Whether a session checks its report claim by claim: `asked` (`on` or
/// `off` from --verify/--no-verify), else research.verify, whose `auto`
/// means when the report's provider is not the extractive one.
bool verify_for(const core::settings& cfg, const std::string& asked);

/// Whether the research treats its models as reasoning models, and why.
struct reasoning_model_choice {
  bool on = false;
  /// research.reasoning_model is `auto` (the first answer may still decide).
  bool automatic = false;
  std::string reason;
};

/// research.reasoning_model; `auto`: the orchestrator's provider by its
/// configuration or model name (core::reasoning_model_by_config).
reasoning_model_choice reasoning_model_for(const core::settings& cfg);

} // namespace quarry::app
