// The web page of `quarry serve`: static files compiled into the binary
// (app/web/), looked up by request path. No file system is involved, so no
// request path can reach one.

#pragma once

#include <cstddef>
#include <string_view>

namespace quarry::web {

/// One embedded file.
struct asset {
  /// The URL path it is served at, e.g. `/app.js`.
  std::string_view path;
  /// The Content-Type header value, e.g. `text/javascript; charset=utf-8`.
  std::string_view content_type;
  /// The file's bytes.
  std::string_view data;
  /// The ETag header value, quoted: `"` + the first 32 hex digits of the
  /// file's SHA-256 (computed at build time) + `"`.
  std::string_view etag;
};

/// The file served at `path`, or null. `/` is `index.html`; a query string
/// (`?...`) is ignored. Lookup is by exact name in the embedded table: any
/// other path (`/../x`, `/%2e%2e/x`, `//app.js`, `/app.js/`, names in other
/// case) finds nothing.
const asset* find_asset(std::string_view path);

/// Every embedded file, for listings and tests; `count` receives their
/// number.
const asset* all_assets(size_t& count);

} // namespace quarry::web
