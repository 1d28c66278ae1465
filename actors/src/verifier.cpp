// The verifier (see verifier.hpp).

#include "quarry/actors/verifier.hpp"

#include "quarry/core/reflective.hpp"
#include "quarry/core/reflective_requests.hpp"

#include "quarry/sdk/text.hpp"

#include <caf/all.hpp>

#include <nlohmann/json.hpp>

#include <map>

namespace quarry::actors {

namespace {

namespace v = core::verification;

/// Most text indexed per document, and in all.
constexpr size_t max_document_bytes = 2 * 1024 * 1024;
constexpr size_t max_total_bytes = 32 * 1024 * 1024;

/// The verifier's own messages: its next batch and its deadline.
using verify_next_atom = caf::atom_constant<caf::atom("vnext")>;
using verify_deadline_atom = caf::atom_constant<caf::atom("vdeadline")>;

using verifier_full_actor
  = verifier_actor::extend<caf::reacts_to<verify_next_atom>, caf::reacts_to<verify_deadline_atom>>;

struct verifier_state {
  verifier_spec spec;
  llm_provider_actor judge;
  verification_listener_actor listener;
  std::vector<v::claim> claims;
  std::map<int, v::indexed_document> docs;
  std::vector<std::optional<v::evidence>> evidence;
  std::vector<v::claim_result> results;
  /// The next claim to judge.
  size_t next = 0;
  uint64_t next_call = 1;
  /// The judge call in flight (0: none).
  uint64_t in_flight = 0;
  /// Batches the judge could not judge (decided lexically).
  size_t judge_failures = 0;
  bool done = false;
  static inline const char* name = "quarry.verifier";
};

using verifier_ptr = verifier_full_actor::stateful_pointer<verifier_state>;

void send_claim(verifier_ptr self, const v::claim_result& r) {
  caf::anon_send(self->state.listener, verified_claim_atom::value,
                 v::claim_verified_packet(r).dump(-1, ' ', false,
                                                  nlohmann::json::error_handler_t::replace));
}

/// Records claim `i`'s verdict, re-citing it when it is not supported.
void settle(verifier_ptr self, size_t i, v::judgement j) {
  auto& st = self->state;
  auto& r = st.results[i];
  r.judged = std::move(j);
  if (r.judged.result != v::verdict::supported) {
    if (auto other = v::find_recitation(r.subject, st.docs)) {
      r.recited_to = other->number;
      r.judged = std::move(*other);
    }
  }
  send_claim(self, r);
}

void finish(verifier_ptr self) {
  auto& st = self->state;
  if (st.done)
    return;
  st.done = true;
  if (st.in_flight != 0 && st.judge)
    self->send(st.judge, cancel_atom::value, st.in_flight);
  // What the deadline cut stays unverified (and is said to be).
  for (size_t i = st.next; i < st.results.size(); ++i)
    send_claim(self, st.results[i]);
  auto summary = v::summarize(st.results);
  std::map<int, std::string> urls;
  for (const auto& [n, doc] : st.docs)
    urls.emplace(n, doc.source.url);
  std::vector<std::optional<v::span>> spans;
  auto report = v::apply_verification(st.spec.report, st.results, st.spec.what, urls, &spans);
  while (!report.empty() && (report.back() == '\n' || report.back() == ' '))
    report.pop_back();
  report += "\n\n" + v::summary_section(summary, st.spec.what);
  auto packet = v::summary_packet(summary);
  if (st.judge_failures > 0)
    packet["judged_lexically"] = st.judge_failures;
  std::map<int, std::string> ids;
  for (const auto& [n, doc] : st.docs)
    ids.emplace(n, doc.source.document_id);
  auto claims = v::claim_records(st.results, spans, ids);
  caf::anon_send(st.listener, verified_atom::value, std::move(report),
                 packet.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                 claims.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  self->quit();
}

/// Judges claims [first, last) lexically.
void judge_lexically(verifier_ptr self, size_t first, size_t last) {
  auto& st = self->state;
  for (size_t i = first; i < last; ++i)
    settle(self, i, v::judge_lexically(st.claims[i].text, st.evidence[i]));
}

void next_batch(verifier_ptr self);

void judge_batch(verifier_ptr self, size_t first, size_t last, bool repairing,
                 sdk::chat_request request) {
  auto& st = self->state;
  auto id = st.next_call++;
  st.in_flight = id;
  self->request(st.judge, caf::infinite, chat_atom::value, llm_call{id, request})
    .then(
      [=](llm_reply& reply) {
        auto& st = self->state;
        if (st.done || st.in_flight != id)
          return;
        st.in_flight = 0;
        std::vector<std::optional<v::evidence>> ev(st.evidence.begin() + first,
                                                   st.evidence.begin() + last);
        auto args = core::reflective::structured_arguments(reply.result.tool_calls, "judge_claims");
        std::string problem;
        if (auto* bad = std::get_if<core::reflective::invalid_output>(&args)) {
          problem = bad->problem;
        } else {
          auto read = v::read_judgements(std::get<nlohmann::json>(args), ev);
          if (auto* why = std::get_if<std::string>(&read)) {
            problem = *why;
          } else {
            auto& js = std::get<std::vector<v::judgement>>(read);
            for (size_t k = 0; k < js.size(); ++k) {
              // A claim the judge left out is judged lexically.
              if (js[k].result == v::verdict::unverified)
                js[k] = v::judge_lexically(st.claims[first + k].text, ev[k]);
              settle(self, first + k, js[k]);
            }
            st.next = last;
            self->send(self, verify_next_atom::value);
            return;
          }
        }
        if (!repairing) {
          judge_batch(self, first, last, true,
                      core::reflective::repair_request(request, reply.result, "judge_claims",
                                                       problem));
          return;
        }
        ++st.judge_failures;
        judge_lexically(self, first, last);
        st.next = last;
        self->send(self, verify_next_atom::value);
      },
      [=](caf::error&) {
        auto& st = self->state;
        if (st.done || st.in_flight != id)
          return;
        st.in_flight = 0;
        ++st.judge_failures;
        judge_lexically(self, first, last);
        st.next = last;
        self->send(self, verify_next_atom::value);
      });
}

void next_batch(verifier_ptr self) {
  auto& st = self->state;
  if (st.done)
    return;
  if (st.next >= st.claims.size()) {
    finish(self);
    return;
  }
  auto first = st.next;
  auto last = std::min(st.claims.size(), first + std::max<size_t>(1, st.spec.batch));
  if (!st.judge) {
    judge_lexically(self, first, last);
    st.next = last;
    // One batch per message: the deadline and a stop get their turn.
    self->send(self, verify_next_atom::value);
    return;
  }
  std::vector<v::claim> batch(st.claims.begin() + first, st.claims.begin() + last);
  std::vector<std::optional<v::evidence>> ev(st.evidence.begin() + first,
                                             st.evidence.begin() + last);
  judge_batch(self, first, last, false,
              core::reflective::structured_request(st.spec.judge_system, v::judge_prompt(batch, ev),
                                                   v::judge_tool(), "judge",
                                                   v::judge_context(batch, ev)));
}

verifier_full_actor::behavior_type verifier_impl(verifier_ptr self, verifier_spec spec,
                                                 llm_provider_actor judge,
                                                 verification_listener_actor listener) {
  auto& st = self->state;
  st.spec = std::move(spec);
  st.judge = std::move(judge);
  st.listener = std::move(listener);
  // Stages 1 to 4, once.
  size_t total = 0;
  for (auto& s : st.spec.sources) {
    if (s.text.size() > max_document_bytes)
      s.text = std::string{sdk::utf8_prefix(s.text, max_document_bytes)};
    if (total + s.text.size() > max_total_bytes)
      s.text.clear();
    total += s.text.size();
    auto number = s.number;
    st.docs.emplace(number, v::index_document(std::move(s)));
  }
  st.spec.sources.clear();
  st.claims = v::split_claims(st.spec.report, st.spec.max_claims);
  for (const auto& c : st.claims) {
    std::optional<v::evidence> best;
    for (auto n : v::map_claim(c, st.docs).with_text) {
      auto ev = v::best_evidence(c.text, st.docs.at(n));
      if (ev && (!best || ev->coverage > best->coverage))
        best = std::move(ev);
    }
    st.evidence.push_back(std::move(best));
    v::claim_result r;
    r.subject = c;
    st.results.push_back(std::move(r));
  }
  self->delayed_send(self, st.spec.budget, verify_deadline_atom::value);
  self->send(self, verify_next_atom::value);
  return {
    [=](delta_atom, const llm_deltas&) {
      // The judge's stream is not shown.
    },
    [=](verify_next_atom) { next_batch(self); },
    [=](verify_deadline_atom) { finish(self); },
    [=](stop_atom) { finish(self); },
  };
}

} // namespace

verifier_actor spawn_verifier(caf::actor_system& sys, verifier_spec spec, llm_provider_actor judge,
                              verification_listener_actor listener) {
  return sys.spawn(verifier_impl, std::move(spec), std::move(judge), std::move(listener));
}

} // namespace quarry::actors
