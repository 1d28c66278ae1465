// The per-session citation collector.

#include "quarry/actors/citation_collector.hpp"

#include "quarry/core/document_numbers.hpp"
#include "quarry/core/findings.hpp"

#include <caf/all.hpp>

#include <algorithm>

namespace quarry::actors {

namespace {

struct collector_state {
  core::citation_mapping global;
  std::map<std::string, sdk::document> documents;
  std::vector<std::pair<std::string, std::string>> findings;
  static inline const char* name = "quarry.citation_collector";
};

citation_collector_actor::behavior_type
collector_impl(citation_collector_actor::stateful_pointer<collector_state> self,
               collector_start start) {
  self->state.global = std::move(start.global);
  self->state.documents = std::move(start.documents);
  self->state.findings = std::move(start.findings);
  return {
    [=](collapse_atom, collapse_request& req) {
      auto& st = self->state;
      collapse_reply out;
      for (auto& [task, result] : req.reports) {
        core::citation_mapping local;
        for (const auto& [n, doc] : result.cited) {
          local.insert(n, core::make_document_ref(doc));
          // A document another agent brought already gains what this one
          // read of it.
          auto [at, added] = st.documents.emplace(doc.id.empty() ? doc.url : doc.id, doc);
          if (!added)
            core::merge_document(at->second, doc);
        }
        auto collapsed = core::collapse_citations(result.report, st.global, local);
        st.global = std::move(collapsed.mapping);
        st.findings.emplace_back(task, collapsed.text);
        out.texts.push_back(std::move(collapsed.text));
      }
      out.global = st.global;
      out.documents = st.documents;
      out.findings = st.findings;
      return out;
    },
    [=](digest_atom) { return core::findings_digest(self->state.findings, self->state.global); },
  };
}

} // namespace

citation_collector_actor spawn_citation_collector(caf::actor_system& sys, collector_start start) {
  return sys.spawn(collector_impl, std::move(start));
}

} // namespace quarry::actors
