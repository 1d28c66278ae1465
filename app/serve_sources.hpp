// The sources of a session's report over HTTP (docs/api.md): the list in
// the numbering the report shows, each source's text that was read with
// its cited passages (JSON or a page), and the rendering of a report's
// Markdown for the web page.

#pragma once

#include "quarry/http/router.hpp"

#include <memory>
#include <string_view>

namespace quarry::app {

struct service;

/// The Content-Security-Policy of the HTML pages the server makes from a
/// report (GET /v1/research/{id}/report?format=html, a source's page): no
/// script, nothing loaded, only their own inline `<style>`; links work.
inline constexpr std::string_view source_page_policy
  = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'self'";

/// The longest text GET /v1/research/{id}/sources/{n} returns, in bytes (a
/// longer one is cut on a character boundary: `text_truncated`).
inline constexpr size_t max_source_text_bytes = 4 * 1024 * 1024;

/// The longest Markdown POST /v1/research/{id}/render takes, in bytes.
inline constexpr size_t max_render_markdown_bytes = 2 * 1024 * 1024;

/// Adds GET /v1/research/{id}/sources, GET /v1/research/{id}/sources/{n}
/// (`?format=html`, `?full_path=1`) and POST /v1/research/{id}/render.
void add_source_routes(http::router& r, std::shared_ptr<service> svc);

} // namespace quarry::app
