// HTML extraction: readability-style main content over a gumbo parse,
// metadata from JSON-LD / Open Graph / meta tags, and a Markdown-like text
// renderer. This file runs the passes of html_internal.hpp in turn and holds
// the entry points; the passes are in the html_*.cpp files beside it.

#include "quarry/extract/html.hpp"

#include "html_internal.hpp"

#include <string>
#include <utility>
#include <vector>

namespace quarry::extract {

namespace detail {

thread_local budget* current_budget = nullptr;

namespace {

// Undoes a scoring attempt: scores are dropped and what it removed is back
// (boilerplate stays set aside).
void reset(node* n) {
  tick();
  n->removed = n->boilerplate;
  n->scored = false;
  n->score = 0;
  for (auto* c : n->children)
    reset(c);
}

extraction run_extraction(std::string_view html, std::string_view url) {
  extraction x;
  dom d{html};
  fill_metadata(d, x, url);
  if (!d.body)
    return x;
  x.comments = render_comments(set_aside_boilerplate(d.body));
  const flags attempts[] = {
    {true, true, true}, {false, true, true}, {false, false, true}, {false, false, false}};
  std::string best;
  for (auto& f : attempts) {
    reset(d.body);
    auto text = render_nodes(select_content(d.body, f));
    if (text.size() > best.size())
      best = std::move(text);
    if (best.size() >= 500)
      break;
  }
  x.text = drop_boilerplate_lines(strip_title_heading(std::move(best), x.title), x.byline);
  return x;
}

} // namespace

} // namespace detail

extraction extract_html(std::string_view html, std::string_view url) {
  return detail::run_extraction(html, url);
}

std::variant<extraction, sdk::error> try_extract_html(std::string_view html, std::string_view url,
                                                      const extract_options& opts) {
  detail::budget b{opts};
  detail::budget_scope scope{&b};
  try {
    b.check();
    return detail::run_extraction(html, url);
  } catch (const detail::stopped& x) {
    return sdk::make_error(x.code, x.code == sdk::errc::timeout ? "reading the page took too long"
                                                                : "reading the page was cancelled");
  }
}

std::string html_to_text(std::string_view html) {
  detail::dom d{html};
  if (!d.body)
    return {};
  return detail::render_nodes({d.body});
}

} // namespace quarry::extract
