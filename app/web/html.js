// Escaping and the few HTML pieces the page writes itself. Reports are not
// rendered here: the server renders Markdown once, with cmark-gfm, for the
// page, the HTML export and the PDF alike (docs/api.md, `report?format=json`
// and `POST /v1/research/{id}/render`).
//
// Everything passed in is hostile (model output, page titles, URLs): it is
// written only as escaped text, and only http(s) URLs become links.
//
// No DOM, no globals: runs in the browser and in Node's test runner.

/// Longest link destination accepted.
const max_url = 4096;

const html_escapes = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/// Escapes text for HTML element content and quoted attribute values.
export function escape_html(text) {
  return String(text).replace(/[&<>"']/g, (c) => html_escapes[c]);
}

/// Returns `url` (trimmed) when it is safe to link from the page: an
/// absolute http: or https: URL with a host, without whitespace or control
/// characters, at most max_url long; otherwise null. (file: URLs are never
/// linked: a browser does not follow them from a web page, and they would
/// show the server's paths.)
export function safe_url(url) {
  if (typeof url !== 'string')
    return null;
  const u = url.trim();
  if (u.length === 0 || u.length > max_url)
    return null;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f-\u009f\u2028\u2029<>"`\\]/.test(u))
    return null;
  return /^https?:\/\/[^/?#]/i.test(u) ? u : null;
}

/// Whether `url` is an http(s) URL.
export function is_web_url(url) {
  return typeof url === 'string' && /^https?:\/\//i.test(url);
}

/// Where a source is, for people: a web page's host and path (no scheme,
/// no query), a local document's file name (never its folder: the server's
/// paths are its own). `location`, when the server gives one, wins.
export function short_location(url, location = '') {
  if (typeof location === 'string' && location)
    return location;
  if (typeof url !== 'string' || !url)
    return '';
  if (is_web_url(url)) {
    try {
      const u = new URL(url);
      const path = u.pathname === '/' ? '' : u.pathname;
      return `${u.host}${path}`;
    } catch {
      return '';
    }
  }
  // Another scheme (javascript:, data:, ...) is no location.
  if (/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(url) && !/^file:/i.test(url))
    return '';
  // file:///a/b/c.md, /a/b/c.md or c.md: the name alone.
  const path = url.replace(/^file:\/\/[^/]*/i, '').split(/[?#]/)[0];
  const name = path.split('/').filter(Boolean).pop() || '';
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

function link_attrs(url) {
  return `href="${escape_html(url)}" target="_blank" rel="noopener noreferrer nofollow"`;
}

/// The citation card's HTML. `card`: `{number, title, url, location,
/// passage, evidence, snippet_only, source_type, loading}`; the passage is
/// the one the claim cites when known. A web URL is linked; a local
/// document shows its location only.
export function render_citation_card(card) {
  if (!card)
    return '';
  const url = typeof card.url === 'string' ? card.url : '';
  const safe = safe_url(url);
  const where = short_location(url, card.location);
  const url_html = safe
    ? `<a class="card-url" data-testid="card-url" ${link_attrs(safe)}>${escape_html(where || safe)}</a>`
    : where ? `<span class="card-url" data-testid="card-url">${escape_html(where)}</span>` : '';
  const kind = card.source_type
    ? `<span class="card-kind">${escape_html(card.source_type)}</span>` : '';
  const label = card.evidence
    ? '<p class="card-label" data-testid="card-evidence">The passage this claim cites:</p>'
    : '';
  const snippet = card.snippet_only
    ? '<p class="card-snippet-only" data-testid="card-snippet-only">Snippet only: the page was never opened; this is the search engine\'s excerpt.</p>'
    : '';
  const passage = card.passage
    ? `${label}<blockquote class="card-passage" data-testid="card-passage">${escape_html(card.passage)}</blockquote>${snippet}`
    : card.loading
      ? '<p class="card-passage card-empty muted" data-testid="card-passage">Finding the cited passage…</p>'
      : '<p class="card-passage card-empty" data-testid="card-passage">No passage was recorded for this source.</p>';
  const num = card.number === null || card.number === undefined ? ''
    : `<span class="card-num">${escape_html(String(card.number))}</span>`;
  const open = card.openable
    ? '<p class="card-open muted">Click to read the source with this passage marked.</p>' : '';
  return `<div class="card-head">${num}`
    + `<span class="card-title" data-testid="card-title">${escape_html(card.title || where || 'Untitled source')}</span>${kind}</div>`
    + url_html + passage + open;
}

/// UTF-8 byte offsets (as the API gives passages) to a string's UTF-16
/// indexes: returns a function from a byte offset to an index (offsets
/// inside a character round down to its start; past the end, the length).
export function byte_to_index(text) {
  // Byte offset of each code point's start, built once: linear.
  const starts = [];
  const indexes = [];
  let bytes = 0;
  for (let i = 0; i < text.length;) {
    const cp = text.codePointAt(i);
    starts.push(bytes);
    indexes.push(i);
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    i += cp > 0xffff ? 2 : 1;
  }
  return (offset) => {
    if (!(offset > 0))
      return 0;
    if (offset >= bytes)
      return text.length;
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= offset)
        lo = mid;
      else
        hi = mid - 1;
    }
    return indexes[lo];
  };
}

/// A source's text as HTML with its cited passages marked: `passages` are
/// `{begin, end}` UTF-8 byte ranges (sorted or not, possibly overlapping or
/// out of range: clamped and merged). Each mark is `<mark class="passage"
/// id="passage-K" data-testid="source-passage" data-begin="I">`, K from 1,
/// I the index in `text` where it starts.
export function mark_passages(text, passages) {
  const t = String(text ?? '');
  const at = byte_to_index(t);
  const ranges = (Array.isArray(passages) ? passages : [])
    .filter((p) => p && Number.isFinite(p.begin) && Number.isFinite(p.end) && p.end > p.begin)
    .map((p) => [at(p.begin), at(p.end)])
    .filter(([b, e]) => e > b)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const merged = [];
  for (const r of ranges) {
    const last = merged[merged.length - 1];
    if (last && r[0] <= last[1])
      last[1] = Math.max(last[1], r[1]);
    else
      merged.push([...r]);
  }
  let out = '';
  let pos = 0;
  merged.forEach(([b, e], k) => {
    out += escape_html(t.slice(pos, b));
    out += `<mark class="passage" id="passage-${k + 1}" data-testid="source-passage" data-begin="${b}">`
      + `${escape_html(t.slice(b, e))}</mark>`;
    pos = e;
  });
  return out + escape_html(t.slice(pos));
}

/// The words of `text` (lower case, letters and digits), for matching a
/// claim to its passage.
export function words_of(text) {
  return String(text ?? '').toLowerCase().match(/[\p{L}\p{N}]+/gu) || [];
}

/// Of `passages` (`{claims: [...]}`), the index of the one whose claims
/// share most words with `sentence` (ties: the first); 0 when none shares
/// any; -1 without passages.
export function best_passage(passages, sentence) {
  if (!Array.isArray(passages) || passages.length === 0)
    return -1;
  const wanted = new Set(words_of(sentence));
  let best = 0;
  let best_score = 0;
  passages.forEach((p, i) => {
    const claims = Array.isArray(p && p.claims) ? p.claims.join(' ') : '';
    let score = 0;
    for (const w of new Set(words_of(claims)))
      if (wanted.has(w))
        score += 1;
    if (score > best_score) {
      best = i;
      best_score = score;
    }
  });
  return best;
}
