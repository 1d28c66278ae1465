#include "final_report.hpp"

#include "quarry/core/document_numbers.hpp"
#include "quarry/lexical/lexical.hpp"

#include <caf/send.hpp>

#include <algorithm>

namespace quarry::actors::detail {

std::vector<sdk::document> final_documents(const core::citation_mapping& global,
                                           const std::map<std::string, sdk::document>& docs) {
  std::vector<sdk::document> out;
  for (const auto& [n, ref] : global)
    if (auto d = docs.find(ref.document_id); d != docs.end())
      out.push_back(d->second);
  return out;
}

void emit_chunk(const packet_sink_actor& em, const core::placement& at, std::string& text,
                const core::citation_chunk& chunk) {
  auto send = [&](const nlohmann::json& obj) {
    caf::anon_send(em, packet_atom::value, make_packet(at, obj));
  };
  size_t pos = 0;
  for (const auto& ev : chunk.citations) {
    if (ev.offset > pos) {
      auto piece = chunk.text.substr(pos, ev.offset - pos);
      text += piece;
      send(core::packets::message_delta(piece));
      pos = ev.offset;
    }
    send(core::packets::citation_info(ev.info.citation_number, ev.info.document_id));
  }
  if (pos < chunk.text.size()) {
    auto piece = chunk.text.substr(pos);
    text += piece;
    send(core::packets::message_delta(piece));
  }
}

std::vector<report_source> cited_sources(const core::citation_processor& processor,
                                         const core::citation_mapping& global) {
  std::vector<report_source> out;
  for (const auto& ref : processor.cited_documents())
    for (const auto& [n, r] : global)
      if (r.document_id == ref.document_id) {
        report_source s;
        s.number = n;
        s.document_id = ref.document_id;
        s.title = ref.title;
        s.url = ref.link;
        out.push_back(std::move(s));
        break;
      }
  std::sort(out.begin(), out.end(),
            [](const report_source& x, const report_source& y) { return x.number < y.number; });
  return out;
}

verifier_spec verification_spec(std::string report, const core::citation_mapping& global,
                                const std::map<std::string, sdk::document>& docs,
                                core::verification::action what, std::chrono::milliseconds timeout,
                                std::chrono::milliseconds left, std::string judge_system) {
  verifier_spec vs;
  vs.report = std::move(report);
  for (const auto& [n, ref] : global) {
    core::verification::source_text s;
    s.number = n;
    s.title = ref.title;
    s.url = ref.link;
    s.document_id = ref.document_id;
    if (auto d = docs.find(ref.document_id); d != docs.end()) {
      // What was read; a result never opened is judged by its snippet, and
      // says so.
      s.snippet_only = core::snippet_only(d->second);
      s.text = s.snippet_only ? d->second.snippet : d->second.content;
    }
    vs.sources.push_back(std::move(s));
  }
  vs.what = what;
  vs.budget = std::min(timeout, std::max(left, std::chrono::milliseconds{1000}));
  vs.judge_system = std::move(judge_system);
  return vs;
}

std::string verification_section(const std::string& report) {
  auto at = report.rfind("\n\n## Verification");
  return at == std::string::npos ? std::string{} : report.substr(at);
}

std::optional<std::string> unanswered_notice(const std::string& question,
                                             const std::map<std::string, sdk::document>& docs) {
  std::vector<std::string> texts;
  for (const auto& [id, doc] : docs)
    texts.push_back(doc.title + "\n" + (doc.content.empty() ? doc.snippet : doc.content));
  auto cover = lexical::question_coverage(question, texts);
  if (cover.answered)
    return std::nullopt;
  if (cover.terms == 0)
    return "The documents found cannot answer the question: it has no words to search for "
           "beyond the most common ones.";
  return "The documents found do not seem to answer the question: of its "
         + std::to_string(cover.terms) + " key words, " + std::to_string(cover.found)
         + " occur in them, and no document holds more than " + std::to_string(cover.best_passage)
         + ".";
}

std::string no_sources_reason(const std::vector<std::string>& notices) {
  std::string why = "the research read no source, so there is no report to trust";
  size_t shown = 0;
  for (const auto& n : notices) {
    if (shown == 5) {
      why += "; ...";
      break;
    }
    why += shown == 0 ? ": " : "; ";
    why += n;
    ++shown;
  }
  return why;
}

} // namespace quarry::actors::detail
