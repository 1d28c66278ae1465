// The sources of a session's report over HTTP: GET /v1/research/{id}/sources,
// GET /v1/research/{id}/sources/{n} (JSON or a page) and POST
// /v1/research/{id}/render (docs/api.md).

#include "serve_sources.hpp"

#include "report_export.hpp"
#include "report_render.hpp"
#include "serve_service.hpp"
#include "session_store.hpp"

#include "quarry/core/verification.hpp"
#include "quarry/http/server.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/store/store.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace quarry::app {

namespace {

using nlohmann::json;

// A cited span of a source's text: a byte range on character boundaries
// and the claims that cite it, with their verdicts (empty when computed).
struct cited_span {
  size_t begin = 0;
  size_t end = 0;
  std::vector<std::string> claims;
  std::vector<std::string> verdicts;
};

// What the source routes read of a session: its report as shown, its
// stored text (the claims' numbers and ranges refer to it), claims,
// documents and corpus folder.
struct source_view {
  std::string id;
  report_parts report;
  std::string stored_text;
  std::vector<store::claim_row> claims;
  std::map<std::string, store::document_row> documents;
};

http::response session_missing(const std::string& id) {
  return http::json_error(404, "not_found",
                          "no session '" + sdk::repair_utf8(id.substr(0, 40)) + "'");
}

// The session's report and what its sources need, or the error response:
// 404 for an unknown session, 409 without a report (as GET .../report).
std::variant<source_view, http::response> read_source_view(store::store& db, const std::string& id,
                                                           const std::string& corpus) {
  auto found = db.session(id);
  if (!found)
    return store_failure(found.error());
  if (!*found)
    return session_missing(id);
  const auto& row = **found;
  auto state = effective_state(db, row);
  auto stored = db.final_report(id);
  if (!stored)
    return store_failure(stored.error());
  auto read = stored_report(db, row, state);
  if (!read)
    return store_failure(read.error());
  if (!*stored || !*read)
    return http::json_error(
      409, "conflict", "session " + id + " has no report yet (" + store::to_string(state) + ")");
  source_view v;
  v.id = id;
  v.report = std::move(**read);
  v.report.corpus_root = session_corpus(row.options, corpus);
  v.stored_text = (*stored)->text;
  auto claims = db.claims(id);
  if (!claims)
    return store_failure(claims.error());
  v.claims = std::move(*claims);
  auto documents = db.documents(id);
  if (!documents)
    return store_failure(documents.error());
  for (auto& d : *documents)
    v.documents.emplace(d.document_id, std::move(d));
  return v;
}

size_t code_point_start(const std::string& text, size_t x) {
  x = std::min(x, text.size());
  while (x > 0 && x < text.size() && (static_cast<unsigned char>(text[x]) & 0xC0) == 0x80)
    --x;
  return x;
}

size_t code_point_end(const std::string& text, size_t x) {
  x = std::min(x, text.size());
  while (x < text.size() && (static_cast<unsigned char>(text[x]) & 0xC0) == 0x80)
    ++x;
  return x;
}

// The cited spans of source `s` in `text` (its document's text; those from
// `limit`, a character boundary, on are cut off): the evidence ranges of the
// stored claims whose source it is; without any (a report nobody verified),
// the best evidence (core::verification::best_evidence) in `text` of each
// claim of the report that cites it. On character boundaries, sorted, overlapping ones merged.
std::vector<cited_span> spans_for(const source_view& v, const cited_source& s,
                                  const std::string& text, size_t limit) {
  std::vector<cited_span> spans;
  for (const auto& c : v.claims) {
    if (!c.source || *c.source != s.stored() || !c.evidence_begin || !c.evidence_end)
      continue;
    auto b = *c.evidence_begin;
    auto e = *c.evidence_end;
    if (b < 0 || e <= b || static_cast<size_t>(e) > text.size())
      continue;
    spans.push_back({static_cast<size_t>(b), static_cast<size_t>(e), {c.text}, {c.verdict}});
  }
  if (spans.empty() && !text.empty()) {
    std::optional<core::verification::indexed_document> indexed;
    for (const auto& c : core::verification::split_claims(v.stored_text)) {
      if (std::find(c.citations.begin(), c.citations.end(), s.stored()) == c.citations.end())
        continue;
      if (!indexed) {
        core::verification::source_text doc;
        doc.number = s.stored();
        doc.text = text;
        indexed = core::verification::index_document(std::move(doc));
      }
      if (auto ev = core::verification::best_evidence(c.text, *indexed);
          ev && ev->end > ev->begin && ev->end <= text.size())
        spans.push_back({ev->begin, ev->end, {c.text}, {}});
    }
  }
  for (auto& x : spans) {
    x.begin = code_point_start(text, x.begin);
    x.end = code_point_end(text, x.end);
  }
  spans.erase(std::remove_if(spans.begin(), spans.end(),
                             [limit](const cited_span& x) { return x.begin >= limit; }),
              spans.end());
  std::sort(spans.begin(), spans.end(), [](const cited_span& x, const cited_span& y) {
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  std::vector<cited_span> merged;
  for (auto& x : spans) {
    if (!merged.empty() && x.begin < merged.back().end) {
      auto& last = merged.back();
      last.end = std::max(last.end, x.end);
      for (auto& claim : x.claims)
        if (std::find(last.claims.begin(), last.claims.end(), claim) == last.claims.end())
          last.claims.push_back(std::move(claim));
      for (auto& verdict : x.verdicts)
        last.verdicts.push_back(std::move(verdict));
    } else {
      merged.push_back(std::move(x));
    }
  }
  // `limit` is a character boundary.
  for (auto& x : merged)
    x.end = std::min(x.end, limit);
  return merged;
}

// How strongly a verdict supports its claim: the weakest one is a merged
// passage's.
int verdict_rank(const std::string& v) {
  if (v == "unsupported")
    return 0;
  if (v == "no_evidence")
    return 1;
  if (v == "partly_supported")
    return 2;
  if (v == "supported")
    return 3;
  return 4;
}

// A passage's verdict: its claims' one, the weakest when they differ; null
// when none was judged.
json passage_verdict(const cited_span& x) {
  std::optional<std::string> out;
  for (const auto& v : x.verdicts)
    if (!v.empty() && (!out || verdict_rank(v) < verdict_rank(*out)))
      out = v;
  return out ? json(*out) : json(nullptr);
}

const char* source_kind(const cited_source& s) {
  return is_file_url(s.url) ? "local" : "web";
}

// Where a source is: a web page's host and path; a local document's path
// relative to the corpus folder (its file name when outside it), or its
// absolute path with `full_path`.
std::string source_place(const cited_source& s, const std::string& corpus_root, bool full_path) {
  if (is_file_url(s.url) && full_path)
    return local_path_of(s.url);
  return source_location(s.url, corpus_root);
}

// The text that was read of source `s`, cut at max_source_text_bytes on a
// character boundary; `truncated` says whether it was.
std::string source_text_of(const source_view& v, const cited_source& s, bool& truncated) {
  auto d = v.documents.find(s.document_id);
  if (d == v.documents.end()) {
    truncated = false;
    return {};
  }
  const auto& text = d->second.text;
  truncated = text.size() > max_source_text_bytes;
  if (!truncated)
    return text;
  return text.substr(0, code_point_start(text, max_source_text_bytes));
}

json source_entry_json(const source_view& v, const cited_source& s) {
  auto d = v.documents.find(s.document_id);
  const std::string empty;
  const auto& text = d != v.documents.end() ? d->second.text : empty;
  // As GET .../sources/{n} cuts it.
  auto limit = text.size() <= max_source_text_bytes ? text.size()
                                                    : code_point_start(text, max_source_text_bytes);
  auto n = std::to_string(s.number);
  return {{"number", s.number},
          {"title", s.title},
          {"kind", source_kind(s)},
          {"url", is_web_url(s.url) ? json(s.url) : json(nullptr)},
          {"location", source_place(s, v.report.corpus_root, false)},
          {"href", "/v1/research/" + v.id + "/sources/" + n},
          {"snippet_only", s.snippet_only},
          {"passages", spans_for(v, s, text, limit).size()}};
}

// A source's page: its title and location, a link to the original (web),
// back to the report, its cited passages with their claims, then its text
// with each passage marked (`<mark id="passage-K">`). Everything escaped,
// nothing loaded (source_page_policy).
std::string source_page_html(const source_view& v, const cited_source& s,
                             const std::string& location, const std::string& text, bool truncated,
                             const std::vector<cited_span>& spans) {
  auto n = std::to_string(s.number);
  auto title = escape_html(s.title.empty() ? location : s.title);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta name=\"referrer\" content=\"no-referrer\">\n"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                    "<title>["
                    + n + "] " + title
                    + "</title>\n<style>"
                      "body{max-width:50em;margin:2em auto;padding:0 1em;"
                      "font-family:system-ui,sans-serif;line-height:1.55}"
                      ".location{color:#555;overflow-wrap:anywhere}"
                      ".text{white-space:pre-wrap;overflow-wrap:anywhere;border-top:1px solid #ccc;"
                      "padding-top:1em}"
                      "mark{background:#fff3b0}mark:target{outline:2px solid #c90}"
                      ".cited-by{display:block;margin:.3em 0 .8em 1em;font-size:.9em;color:#444;"
                      "white-space:normal}"
                      ".note{color:#8a4b00}"
                      "</style>\n</head>\n<body>\n<nav><a href=\"/#/research/"
                    + escape_html(v.id) + "\">Back to the report</a></nav>\n<h1>[" + n + "] "
                    + title + "</h1>\n<p class=\"location\">" + escape_html(location);
  if (is_web_url(s.url))
    out += " &middot; <a href=\"" + escape_html(s.url)
           + "\" rel=\"noopener noreferrer\">Open the original page</a>";
  out += "</p>\n";
  if (s.snippet_only)
    out += "<p class=\"note\">Only the search engine's snippet was read: the page was never "
           "opened.</p>\n";
  if (truncated)
    out += "<p class=\"note\">The text is cut at 4 MiB.</p>\n";
  if (text.empty())
    out += "<p class=\"note\">No text of this source is stored.</p>\n";
  auto claims_of = [](const cited_span& x) {
    std::string list;
    for (const auto& c : x.claims)
      list += "<li>" + escape_html(c) + "</li>";
    return list;
  };
  if (!spans.empty()) {
    out += "<h2>Cited passages</h2>\n<ol class=\"passages\">\n";
    for (size_t k = 0; k < spans.size(); ++k) {
      auto id = "passage-" + std::to_string(k + 1);
      auto verdict = passage_verdict(spans[k]);
      out += "<li><a href=\"#" + id + "\">Passage " + std::to_string(k + 1) + "</a>";
      if (verdict.is_string())
        out += " (" + escape_html(verdict.get<std::string>()) + ")";
      out += "<ul>" + claims_of(spans[k]) + "</ul></li>\n";
    }
    out += "</ol>\n";
  }
  out += "<div class=\"text\">";
  size_t at = 0;
  for (size_t k = 0; k < spans.size(); ++k) {
    const auto& x = spans[k];
    out += escape_html(text.substr(at, x.begin - at));
    out += "<mark id=\"passage-" + std::to_string(k + 1) + "\">"
           + escape_html(text.substr(x.begin, x.end - x.begin)) + "</mark>";
    out += "<span class=\"cited-by\">Cited for:<ul>" + claims_of(x) + "</ul></span>";
    at = x.end;
  }
  out += escape_html(text.substr(at));
  return out + "</div>\n</body>\n</html>\n";
}

// `n` of the route, or nothing when it is no source number.
std::optional<int> source_number_of(std::string_view x) {
  if (x.empty() || x.size() > 6 || x.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  auto n = std::stoi(std::string{x});
  if (n < 1)
    return std::nullopt;
  return n;
}

// `?full_path=`: 1 or true, 0 or false (or absent); nothing otherwise.
std::optional<bool> wants_full_path(const http::request& req) {
  auto v = req.query_param("full_path");
  if (!v || *v == "0" || *v == "false")
    return false;
  if (*v == "1" || *v == "true" || v->empty())
    return true;
  return std::nullopt;
}

std::string dumped(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace

void add_source_routes(http::router& r, std::shared_ptr<service> svc) {
  r.add("GET", "/v1/research/{id}/sources",
        [svc](http::request& req, std::shared_ptr<http::responder> res) {
          auto id = std::string{req.param("id")};
          if (!store::is_session_id(id)) {
            res->respond(session_missing(id));
            return;
          }
          svc->read(res, [id, corpus = svc->engine.corpus()](store::store& db) {
            auto read = read_source_view(db, id, corpus);
            if (auto* failed = std::get_if<http::response>(&read))
              return std::move(*failed);
            const auto& v = std::get<source_view>(read);
            json list = json::array();
            for (const auto& s : v.report.sources)
              list.push_back(source_entry_json(v, s));
            return http::response{
              200, "application/json", {}, dumped({{"id", id}, {"sources", std::move(list)}})};
          });
        });
  r.add("GET", "/v1/research/{id}/sources/{n}",
        [svc](http::request& req, std::shared_ptr<http::responder> res) {
          auto id = std::string{req.param("id")};
          auto format = std::string{req.query_param("format").value_or("json")};
          if (format != "json" && format != "html") {
            res->respond(http::json_error(400, "bad_request", "format: json or html"));
            return;
          }
          auto full_path = wants_full_path(req);
          if (!full_path) {
            res->respond(http::json_error(400, "bad_request", "full_path: 1 or 0"));
            return;
          }
          // Without a token anyone who reaches the server reads this; the
          // folders of the machine are shown only to who holds it.
          if (*full_path && svc->ctx.config.values.server.auth_token.empty()) {
            res->respond(http::json_error(403, "forbidden",
                                          "full_path shows local documents' absolute paths, which "
                                          "needs server.auth_token to be set"));
            return;
          }
          if (!store::is_session_id(id)) {
            res->respond(session_missing(id));
            return;
          }
          auto number = source_number_of(req.param("n"));
          if (!number) {
            res->respond(http::json_error(
              404, "not_found",
              "no source '" + sdk::repair_utf8(std::string{req.param("n")}.substr(0, 20))
                + "' in session " + id));
            return;
          }
          svc->read(res, [id, n = *number, html = format == "html", full = *full_path,
                          corpus = svc->engine.corpus()](store::store& db) {
            auto read = read_source_view(db, id, corpus);
            if (auto* failed = std::get_if<http::response>(&read))
              return std::move(*failed);
            const auto& v = std::get<source_view>(read);
            auto s = std::find_if(v.report.sources.begin(), v.report.sources.end(),
                                  [n](const cited_source& x) { return x.number == n; });
            if (s == v.report.sources.end())
              return http::json_error(404, "not_found",
                                      "no source " + std::to_string(n)
                                        + " in the report of session " + id + " (it lists "
                                        + std::to_string(v.report.sources.size()) + ")");
            bool truncated = false;
            auto text = source_text_of(v, *s, truncated);
            auto spans = spans_for(v, *s, text, text.size());
            auto location = source_place(*s, v.report.corpus_root, full);
            if (html)
              return http::response{200,
                                    "text/html; charset=utf-8",
                                    {{"Content-Security-Policy", std::string{source_page_policy}},
                                     {"X-Content-Type-Options", "nosniff"},
                                     {"Referrer-Policy", "no-referrer"}},
                                    source_page_html(v, *s, location, text, truncated, spans)};
            json passages = json::array();
            for (const auto& x : spans)
              passages.push_back({{"begin", x.begin},
                                  {"end", x.end},
                                  {"claims", x.claims},
                                  {"verdict", passage_verdict(x)}});
            json j{{"id", id},
                   {"number", s->number},
                   {"title", s->title},
                   {"kind", source_kind(*s)},
                   {"url", is_web_url(s->url) ? json(s->url) : json(nullptr)},
                   {"location", location},
                   {"snippet_only", s->snippet_only},
                   {"text", std::move(text)},
                   {"text_truncated", truncated},
                   {"passages", std::move(passages)}};
            return http::response{200, "application/json", {}, dumped(j)};
          });
        });
  r.add("POST", "/v1/research/{id}/render",
        [svc](http::request& req, std::shared_ptr<http::responder> res) {
          auto id = std::string{req.param("id")};
          if (!json_declared(req, *res))
            return;
          auto j = json::parse(req.body, nullptr, false);
          if (!j.is_object() || !j.contains("markdown") || !j["markdown"].is_string()) {
            res->respond(
              http::json_error(400, "bad_request", "the body must be {\"markdown\": \"...\"}"));
            return;
          }
          // `numbering`: `report` (the default) numbers citations as the
          // stored report will be; `as_written` keeps the text's own numbers
          // (an agent's intermediate report numbers its documents itself).
          bool as_written = false;
          if (auto n = j.find("numbering"); n != j.end()) {
            if (!n->is_string() || (*n != "report" && *n != "as_written")) {
              res->respond(
                http::json_error(400, "bad_request", "numbering: \"report\" or \"as_written\""));
              return;
            }
            as_written = *n == "as_written";
          }
          auto markdown = j["markdown"].get<std::string>();
          if (markdown.size() > max_render_markdown_bytes) {
            res->respond(http::json_error(413, "too_large", "markdown: at most 2 MiB"));
            return;
          }
          if (!store::is_session_id(id)) {
            res->respond(session_missing(id));
            return;
          }
          svc->read(res, [id, as_written, markdown = std::move(markdown)](store::store& db) {
            auto found = db.session(id);
            if (!found)
              return store_failure(found.error());
            if (!*found)
              return session_missing(id);
            // Numbered as the stored report will be: in the order first
            // cited (a report being written only grows). `numbers` pairs
            // each number written with the one shown, so that the page
            // finds a chip's source among the streamed citations.
            auto out = json::object();
            std::string body = markdown;
            if (!as_written) {
              auto shown = first_cited_numbering(markdown);
              body = renumber_citations(markdown, shown).text;
              auto numbers = json::array();
              for (const auto& [written, number] : shown)
                numbers.push_back({{"written", written}, {"shown", number}});
              out["numbers"] = std::move(numbers);
            }
            out["html"] = report_html_fragment(body, {}, "/v1/research/" + id + "/sources", true);
            return http::response{200, "application/json", {}, dumped(out)};
          });
        });
}

} // namespace quarry::app
