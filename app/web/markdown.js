// A small, safe Markdown renderer for reports written by models.
//
// Everything in the input is hostile: model output, page titles and URLs
// are written into the page only as escaped text. The renderer emits a
// fixed set of tags of its own (p, h1-h6, em, strong, del, code, pre,
// blockquote, ul, ol, li, table, thead, tbody, tr, th, td, hr, br, a) and
// no raw HTML from the input ever passes. Links keep only http:, https: and
// file: URLs; anything else (javascript:, data:, relative paths) renders
// as the link's text without a link.
//
// Citations: `[[n]](url)` (Quarry's report format) and a bare `[n]` or
// `[1, 2]` become citation chips: `<a class="cite" data-cite="n" ...>`.
// The page shows a card for a chip on hover or focus.
//
// Cost: every step is linear in the text it looks at, and nesting is
// bounded (max_depth), so a hostile input of any shape renders in roughly
// linear time; input beyond max_input characters is cut off with a note.
//
// No DOM, no globals: runs in the browser and in Node's test runner.

/// Characters rendered at most; the rest is dropped with a note.
export const max_input = 4 * 1024 * 1024;
/// Nesting of block quotes, lists and inline spans beyond which text stays
/// plain.
export const max_depth = 12;
/// Longest link destination accepted.
const max_url = 4096;
/// Highest citation number recognised (four digits).
const max_cite_digits = 4;

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

/// Returns `url` (trimmed) when it is safe to link: an absolute http:,
/// https: or file: URL without whitespace or control characters, at most
/// max_url long; otherwise null.
export function safe_url(url) {
  if (typeof url !== 'string')
    return null;
  const u = url.trim();
  if (u.length === 0 || u.length > max_url)
    return null;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f-\u009f\u2028\u2029<>"`\\]/.test(u))
    return null;
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]{0,15}):/.exec(u);
  if (!m)
    return null;
  const scheme = m[1].toLowerCase();
  if (scheme !== 'http' && scheme !== 'https' && scheme !== 'file')
    return null;
  if ((scheme === 'http' || scheme === 'https') && !/^https?:\/\/[^/?#]/i.test(u))
    return null;
  return u;
}

/// Whether a link opens a page a browser can show from a web page (file:
/// links are kept but browsers refuse to follow them from http pages).
export function is_web_url(url) {
  return typeof url === 'string' && /^https?:\/\//i.test(url);
}

function link_attrs(url) {
  return `href="${escape_html(url)}" target="_blank" rel="noopener noreferrer nofollow"`;
}

/// One citation chip. `url` is used when safe; `title` becomes the chip's
/// accessible label.
/// `scope` (optional) names whose numbering `n` belongs to (the page uses
/// a lane's key for an agent's intermediate report); it becomes the chip's
/// data-scope.
export function citation_chip(n, url, title, scope) {
  const num = String(n);
  const label = title ? `Source ${num}: ${title}` : `Source ${num}`;
  const safe = safe_url(url || '');
  const href = safe ? link_attrs(safe) : `href="#source-${escape_html(num)}"`;
  const sc = scope ? ` data-scope="${escape_html(scope)}"` : '';
  return `<a class="cite" data-cite="${escape_html(num)}"${sc} data-testid="citation" ${href}`
    + ` aria-label="${escape_html(label)}">${escape_html(num)}</a>`;
}

// -- inline -------------------------------------------------------------------

const named_entities = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0',
                         ndash: '\u2013', mdash: '\u2014', hellip: '\u2026', copy: '\u00a9' };

/// Decodes the character references models write (`&amp;`, `&#39;`,
/// `&#x2019;`, a few names) in plain text. What they decode to is escaped
/// again on output, so `&lt;script&gt;` shows as the text "<script>".
export function decode_entities(text) {
  if (!text.includes('&'))
    return text;
  return text.replace(/&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([a-z]{2,6}));/g, (m, dec, hex, name) => {
    if (name !== undefined)
      return Object.prototype.hasOwnProperty.call(named_entities, name) ? named_entities[name] : m;
    const cp = dec !== undefined ? Number(dec) : parseInt(hex, 16);
    if (cp === 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return '\ufffd';
    return String.fromCodePoint(cp);
  });
}

const punctuation = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';

function is_space(c) {
  return c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === undefined;
}

function is_alnum(c) {
  return c !== undefined && /[\p{L}\p{N}]/u.test(c);
}

// The index of the `]` matching each `[` of `text` (escaped brackets do not
// count), computed once per span with a stack: linear.
function match_brackets(text) {
  const match = new Map();
  const stack = [];
  for (let i = 0; i < text.length; ++i) {
    const c = text[i];
    if (c === '\\') {
      ++i;
    } else if (c === '[') {
      stack.push(i);
    } else if (c === ']' && stack.length > 0) {
      match.set(stack.pop(), i);
    }
  }
  return match;
}

// Scans a link destination starting after `(` at `from`: no whitespace,
// balanced parentheses, at most max_url characters. Returns `{end, dest}`
// (`end`: the index of the closing `)`) or null. An optional title ("..."
// or '...') after whitespace is skipped. `budget.left` bounds the
// characters looked at and is charged for them; once it is spent, nothing
// more is scanned.
function scan_destination(text, from, budget) {
  let depth = 0;
  const limit = Math.min(text.length, from + max_url + 1, from + Math.max(0, budget.left));
  let i = from;
  let stop = -1;
  for (; i < limit; ++i) {
    const c = text[i];
    if (c === '(') {
      ++depth;
    } else if (c === ')') {
      if (depth === 0) {
        stop = i;
        break;
      }
      --depth;
    } else if (c === ' ' || c === '\t' || c === '\n') {
      break;
    } else if (c === '\\') {
      ++i;
    }
  }
  budget.left -= i - from + 1;
  if (stop >= 0)
    return { end: stop, dest: text.slice(from, stop) };
  if (i >= limit || !(text[i] === ' ' || text[i] === '\t' || text[i] === '\n'))
    return null;
  const dest = text.slice(from, i);
  while (text[i] === ' ' || text[i] === '\t' || text[i] === '\n')
    ++i;
  const q = text[i];
  if (q === '"' || q === "'") {
    const close = text.indexOf(q, i + 1);
    if (close < 0 || close - i > 1024)
      return null;
    i = close + 1;
    while (text[i] === ' ' || text[i] === '\t')
      ++i;
  }
  return text[i] === ')' ? { end: i, dest } : null;
}

// A citation list `[1]`, `[1, 2]` (sticky: matched where it stands).
const cite_list = /\[(\d{1,4}(?:[ \t]*[,;][ \t]*\d{1,4}){0,31})\]/y;
const autolink = /<((?:https?|file):\/\/[^\s<>"`\\]{1,4096})>/iy;
// Characters that end a bare URL (safe_url refuses them all).
// eslint-disable-next-line no-control-regex
const url_stop = /[\s\u0000-\u001f\u007f-\u009f\u2028\u2029<>"`\\]/;

class inline_renderer {
  constructor(text, depth, opts, in_link) {
    this.text = text;
    this.depth = depth;
    this.opts = opts;
    this.in_link = in_link;
    this.brackets = null;
    // Delimiter -> the position from which no valid closer exists. Closer
    // validity depends only on neighbouring characters, so once a search
    // from p fails, every search from q >= p fails too.
    this.no_closer = new Map();
    this.out = '';
    this.plain_start = 0;
    // Characters that link and URL scans may look at in this span: scans
    // that start inside an earlier failed scan could otherwise repeat it.
    this.budget = { left: 8 * text.length + 65536 };
    // Backtick run length -> positions of runs of exactly that length.
    this.code_runs = null;
    // Bare URLs are not looked for before this index (after a failed scan).
    this.no_url_before = 0;
  }

  flush(upto) {
    if (upto > this.plain_start)
      this.out += escape_html(decode_entities(this.text.slice(this.plain_start, upto)));
  }

  emit(html, resume) {
    this.out += html;
    this.plain_start = resume;
  }

  nested(text) {
    if (this.depth + 1 >= max_depth)
      return escape_html(text);
    return render_inline(text, this.depth + 1, this.opts, this.in_link);
  }

  // The first valid closing `delim` at or after `from` (not preceded by
  // whitespace; for `_`, not followed by a letter or digit), or -1.
  find_closer(delim, from) {
    const failed = this.no_closer.get(delim);
    if (failed !== undefined && from >= failed)
      return -1;
    const t = this.text;
    const single = delim.length === 1;
    let j = from;
    for (;;) {
      j = t.indexOf(delim, j);
      if (j < 0)
        break;
      const prev = t[j - 1];
      const next = t[j + delim.length];
      let ok = j > from && !is_space(prev);
      if (ok && single && (next === delim || prev === delim))
        ok = false;
      if (ok && delim[0] === '_' && is_alnum(next))
        ok = false;
      if (ok) {
        // The closer is the end of its run: `***x***` closes at the last two.
        if (!single)
          while (t[j + delim.length] === delim[0])
            ++j;
        return j;
      }
      // Skip a whole run of the delimiter character.
      const c = delim[0];
      j += 1;
      while (t[j] === c)
        ++j;
    }
    this.no_closer.set(delim, from);
    return -1;
  }

  try_emphasis(i) {
    const t = this.text;
    const c = t[i];
    let run = 1;
    while (t[i + run] === c)
      ++run;
    const next = t[i + run];
    const prev = t[i - 1];
    const can_open = !is_space(next) && !(c === '_' && is_alnum(prev));
    if (can_open && this.depth + 1 < max_depth) {
      if (c === '~') {
        if (run === 2) {
          const close = this.find_closer('~~', i + 2);
          if (close > i + 2) {
            this.flush(i);
            this.emit(`<del>${this.nested(t.slice(i + 2, close))}</del>`, close + 2);
            return close + 2;
          }
        }
      } else {
        if (run >= 2) {
          const d = c + c;
          const close = this.find_closer(d, i + 2);
          if (close > i + 2) {
            this.flush(i);
            // `***x***`: the extra delimiter opens an emphasis inside.
            this.emit(`<strong>${this.nested(t.slice(i + 2, close))}</strong>`, close + 2);
            return close + 2;
          }
        }
        if (run === 1) {
          const close = this.find_closer(c, i + 1);
          if (close > i + 1) {
            this.flush(i);
            this.emit(`<em>${this.nested(t.slice(i + 1, close))}</em>`, close + 1);
            return close + 1;
          }
        }
      }
    }
    // Not emphasis: the whole run stays text.
    return i + run;
  }

  try_code(i) {
    const t = this.text;
    let run = 1;
    while (t[i + run] === '`')
      ++run;
    if (this.code_runs === null) {
      this.code_runs = new Map();
      for (let k = 0; k < t.length;) {
        if (t[k] !== '`') {
          ++k;
          continue;
        }
        let r = 1;
        while (t[k + r] === '`')
          ++r;
        let list = this.code_runs.get(r);
        if (list === undefined)
          this.code_runs.set(r, list = { at: [], next: 0 });
        list.at.push(k);
        k += r;
      }
    }
    // Runs are visited left to right, so each list's cursor only advances.
    const list = this.code_runs.get(run);
    if (list === undefined)
      return i + run;
    while (list.next < list.at.length && list.at[list.next] <= i)
      ++list.next;
    if (list.next < list.at.length) {
      const j = list.at[list.next];
      let body = t.slice(i + run, j).replace(/\n/g, ' ');
      if (body.length >= 2 && body[0] === ' ' && body[body.length - 1] === ' '
          && body.trim() !== '')
        body = body.slice(1, -1);
      this.flush(i);
      this.emit(`<code>${escape_html(body)}</code>`, j + run);
      return j + run;
    }
    return i + run;
  }

  // `[[n]](url)`, `[n]`, `[1, 2]`, `[text](url)`, `![alt](url)`.
  try_bracket(i) {
    const t = this.text;
    const image = t[i] === '!';
    const open = image ? i + 1 : i;
    if (!image) {
      const cite = this.try_citation(open);
      if (cite >= 0)
        return cite;
    }
    if (this.brackets === null)
      this.brackets = match_brackets(t);
    const close = this.brackets.get(open);
    if (close === undefined)
      return open + 1;
    if (t[close + 1] !== '(')
      return open + 1;
    const link = scan_destination(t, close + 2, this.budget);
    if (link === null)
      return open + 1;
    const label = t.slice(open + 1, close);
    const url = safe_url(link.dest);
    this.flush(i);
    if (url && !this.in_link) {
      const inner = this.depth + 1 < max_depth
        ? render_inline(label, this.depth + 1, this.opts, true)
        : escape_html(label);
      this.emit(`<a ${link_attrs(url)}>${inner || escape_html(url)}</a>`, link.end + 1);
    } else {
      this.emit(this.nested(label), link.end + 1);
    }
    return link.end + 1;
  }

  try_citation(i) {
    const t = this.text;
    // [[n]](url)
    if (t[i + 1] === '[') {
      let d = i + 2;
      while (d < t.length && d - (i + 2) < max_cite_digits && t[d] >= '0' && t[d] <= '9')
        ++d;
      if (d > i + 2 && t[d] === ']' && t[d + 1] === ']' && t[d + 2] === '(') {
        const link = scan_destination(t, d + 3, this.budget);
        if (link !== null) {
          const n = Number(t.slice(i + 2, d));
          this.flush(i);
          this.emit(this.chip(n, link.dest), link.end + 1);
          return link.end + 1;
        }
      }
      return -1;
    }
    // [n] or [1, 2, 3]
    if (!(t[i + 1] >= '0' && t[i + 1] <= '9'))
      return -1;
    cite_list.lastIndex = i;
    const m = cite_list.exec(t);
    if (!m)
      return -1;
    const end = i + m[0].length;
    if (t[end] === '(' || t[end] === ':')
      return -1;
    const nums = m[1].split(/[ \t]*[,;][ \t]*/).map(Number);
    this.flush(i);
    this.emit(nums.map((n) => this.chip(n, null)).join(''), end);
    return end;
  }

  chip(n, url) {
    const info = this.opts.citation ? this.opts.citation(n) : null;
    const link = safe_url(url || '') || (info && safe_url(info.url || '')) || null;
    if (this.in_link)
      return `<sup class="cite-text">[${escape_html(String(n))}]</sup>`;
    return citation_chip(n, link, info && info.title, this.opts.scope);
  }

  try_autolink(i) {
    const t = this.text;
    const c1 = t[i + 1];
    if (c1 !== 'h' && c1 !== 'H' && c1 !== 'f' && c1 !== 'F')
      return -1;
    autolink.lastIndex = i;
    const m = autolink.exec(t);
    if (!m)
      return -1;
    const url = safe_url(m[1]);
    if (!url)
      return -1;
    this.flush(i);
    this.emit(this.in_link ? escape_html(url) : `<a ${link_attrs(url)}>${escape_html(url)}</a>`,
              i + m[0].length);
    return i + m[0].length;
  }

  try_bare_url(i) {
    const t = this.text;
    if (this.in_link || i < this.no_url_before)
      return -1;
    if (!(t.startsWith('http://', i) || t.startsWith('https://', i)) || is_alnum(t[i - 1]))
      return -1;
    let j = i;
    const limit = Math.min(t.length, i + max_url);
    while (j < limit && !url_stop.test(t[j]))
      ++j;
    this.no_url_before = j;
    // Trailing punctuation belongs to the sentence; a closing parenthesis
    // only when the URL has no opening one for it (`.../Foo_(bar)`).
    let open = 0;
    let close = 0;
    for (let k = i; k < j; ++k) {
      if (t[k] === '(')
        ++open;
      else if (t[k] === ')')
        ++close;
    }
    for (;;) {
      const c = t[j - 1];
      if (j > i && /[.,;:!?'*_\]]/.test(c)) {
        --j;
      } else if (j > i && c === ')' && close > open) {
        --close;
        --j;
      } else {
        break;
      }
    }
    const url = safe_url(t.slice(i, j));
    if (!url || j - i <= 8)
      return -1;
    this.flush(i);
    this.emit(`<a ${link_attrs(url)}>${escape_html(url)}</a>`, j);
    return j;
  }

  run() {
    const t = this.text;
    let i = 0;
    while (i < t.length) {
      const c = t[i];
      switch (c) {
        case '\\': {
          const next = t[i + 1];
          if (next === '\n') {
            this.flush(i);
            this.emit('<br>\n', i + 2);
            i += 2;
          } else if (next !== undefined && punctuation.includes(next)) {
            this.flush(i);
            this.emit(escape_html(next), i + 2);
            i += 2;
          } else {
            ++i;
          }
          break;
        }
        case '`':
          i = this.try_code(i);
          break;
        case '*':
        case '_':
          i = this.try_emphasis(i);
          break;
        case '~':
          i = t[i + 1] === '~' ? this.try_emphasis(i) : i + 1;
          break;
        case '!':
          i = t[i + 1] === '[' ? this.try_bracket(i) : i + 1;
          break;
        case '[':
          i = this.try_bracket(i);
          break;
        case '<': {
          const r = this.try_autolink(i);
          i = r >= 0 ? r : i + 1;
          break;
        }
        case 'h': {
          const r = this.try_bare_url(i);
          i = r >= 0 ? r : i + 1;
          break;
        }
        case '\n': {
          // Two trailing spaces make a hard break.
          if (t[i - 1] === ' ' && t[i - 2] === ' ') {
            let s = i;
            while (s > this.plain_start && t[s - 1] === ' ')
              --s;
            this.flush(s);
            this.emit('<br>\n', i + 1);
          }
          ++i;
          break;
        }
        default:
          ++i;
      }
    }
    this.flush(t.length);
    return this.out;
  }
}

function render_inline(text, depth, opts, in_link) {
  return new inline_renderer(text, depth, opts, in_link).run();
}

// -- blocks -------------------------------------------------------------------

function indent_of(line) {
  let n = 0;
  for (const c of line) {
    if (c === ' ')
      n += 1;
    else if (c === '\t')
      n += 4 - (n % 4);
    else
      break;
  }
  return n;
}

// Removes up to `n` columns of leading indentation.
function dedent(line, n) {
  let col = 0;
  let i = 0;
  while (i < line.length && col < n) {
    if (line[i] === ' ')
      col += 1;
    else if (line[i] === '\t')
      col += 4 - (col % 4);
    else
      break;
    ++i;
  }
  return line.slice(i);
}

function is_blank(line) {
  return /^[ \t]*$/.test(line);
}

function fence_of(line) {
  const m = /^( {0,3})(`{3,}|~{3,})([^`]*)$/.exec(line);
  if (!m)
    return null;
  return { indent: m[1].length, marker: m[2], info: m[3].trim() };
}

function heading_of(line) {
  const m = /^ {0,3}(#{1,6})(?=[ \t]|$)/.exec(line);
  if (!m)
    return null;
  let text = line.slice(m[0].length).trim();
  // Closing #s, when separated by a space.
  let end = text.length;
  while (end > 0 && text[end - 1] === '#')
    --end;
  if (end === 0)
    text = '';
  else if (end < text.length && (text[end - 1] === ' ' || text[end - 1] === '\t'))
    text = text.slice(0, end).trimEnd();
  return { level: m[1].length, text };
}

function is_rule(line) {
  const s = line.replace(/[ \t]/g, '');
  if (s.length < 3 || indent_of(line) > 3)
    return false;
  const c = s[0];
  if (c !== '-' && c !== '*' && c !== '_')
    return false;
  for (const x of s)
    if (x !== c)
      return false;
  return true;
}

function list_item_of(line) {
  const m = /^( {0,3})([-*+]|(\d{1,9})[.)])([ \t]+|$)/.exec(line);
  if (!m)
    return null;
  const ordered = m[3] !== undefined;
  const content_indent = m[0].length - m[4].length
    + (m[4].length === 0 || m[4].length > 4 ? 1 : m[4].length);
  return {
    ordered,
    start: ordered ? Number(m[3]) : 1,
    marker: ordered ? m[2].slice(-1) : m[2],
    content_indent,
    rest: m[4].length > 4 ? line.slice(m[0].length - m[4].length + 1)
                          : line.slice(m[0].length),
  };
}

function split_row(line) {
  let s = line.trim();
  if (s.startsWith('|'))
    s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|'))
    s = s.slice(0, -1);
  const cells = [];
  let cur = '';
  let in_code = false;
  for (let i = 0; i < s.length; ++i) {
    const c = s[i];
    if (c === '\\' && s[i + 1] === '|') {
      cur += '|';
      ++i;
    } else if (c === '`') {
      in_code = !in_code;
      cur += c;
    } else if (c === '|' && !in_code) {
      cells.push(cur.trim());
      cur = '';
    } else {
      cur += c;
    }
  }
  cells.push(cur.trim());
  return cells;
}

function table_alignments(line) {
  if (!line.includes('-') || indent_of(line) > 3)
    return null;
  const cells = split_row(line);
  if (cells.length === 0 || cells.length > 64)
    return null;
  const out = [];
  for (const c of cells) {
    if (!/^:?-+:?$/.test(c))
      return null;
    const left = c.startsWith(':');
    const right = c.endsWith(':');
    out.push(left && right ? 'center' : right ? 'right' : left ? 'left' : '');
  }
  return out;
}

// Whether `line` starts a block that interrupts a paragraph.
function interrupts(line) {
  if (fence_of(line) || heading_of(line) || is_rule(line))
    return true;
  if (/^ {0,3}>/.test(line))
    return true;
  const item = list_item_of(line);
  return item !== null && !is_blank(item.rest) && (!item.ordered || item.start === 1);
}

class block_renderer {
  constructor(opts) {
    this.opts = opts;
  }

  inline(text, depth) {
    return render_inline(text, depth, this.opts, false);
  }

  render(lines, depth) {
    let out = '';
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (is_blank(line)) {
        ++i;
        continue;
      }
      if (depth >= max_depth) {
        // Too deep: the rest is one paragraph of plain text.
        out += `<p>${escape_html(lines.slice(i).join('\n').trim())}</p>\n`;
        break;
      }
      const fence = fence_of(line);
      if (fence) {
        i = this.code_block(lines, i, fence, (html) => { out += html; });
        continue;
      }
      const heading = heading_of(line);
      if (heading) {
        const h = heading.level;
        out += `<h${h}>${this.inline(heading.text, depth)}</h${h}>\n`;
        ++i;
        continue;
      }
      if (is_rule(line)) {
        out += '<hr>\n';
        ++i;
        continue;
      }
      if (indent_of(line) >= 4 && depth === 0) {
        // Indented code (top level only; inside lists indentation nests).
        const body = [];
        while (i < lines.length && (indent_of(lines[i]) >= 4 || is_blank(lines[i]))) {
          body.push(dedent(lines[i], 4));
          ++i;
        }
        while (body.length > 0 && is_blank(body[body.length - 1]))
          body.pop();
        out += `<pre><code>${escape_html(body.join('\n'))}</code></pre>\n`;
        continue;
      }
      if (/^ {0,3}>/.test(line)) {
        const inner = [];
        while (i < lines.length && /^ {0,3}>/.test(lines[i])) {
          inner.push(lines[i].replace(/^ {0,3}> ?/, ''));
          ++i;
        }
        out += `<blockquote>\n${this.render(inner, depth + 1)}</blockquote>\n`;
        continue;
      }
      const item = list_item_of(line);
      if (item) {
        i = this.list(lines, i, item, depth, (html) => { out += html; });
        continue;
      }
      if (line.includes('|') && i + 1 < lines.length) {
        const align = table_alignments(lines[i + 1]);
        const head = align ? split_row(line) : null;
        if (align && head.length === align.length) {
          i = this.table(lines, i, head, align, depth, (html) => { out += html; });
          continue;
        }
      }
      // A paragraph: until a blank line or another block.
      const para = [line.replace(/^[ \t]+/, '')];
      ++i;
      while (i < lines.length && !is_blank(lines[i]) && !interrupts(lines[i])) {
        if (lines[i].includes('|') && i + 1 < lines.length && table_alignments(lines[i + 1]))
          break;
        para.push(lines[i].replace(/^[ \t]+/, ''));
        ++i;
      }
      out += `<p>${this.inline(para.join('\n').trimEnd(), depth)}</p>\n`;
    }
    return out;
  }

  code_block(lines, i, fence, emit) {
    const body = [];
    let j = i + 1;
    for (; j < lines.length; ++j) {
      const close = fence_of(lines[j]);
      if (close && close.marker[0] === fence.marker[0]
          && close.marker.length >= fence.marker.length && close.info === '')
        break;
      body.push(dedent(lines[j], fence.indent));
    }
    const lang = /^[\w+#.-]{1,32}/.exec(fence.info);
    const cls = lang ? ` class="language-${escape_html(lang[0])}"` : '';
    emit(`<pre><code${cls}>${escape_html(body.join('\n'))}</code></pre>\n`);
    return j < lines.length ? j + 1 : j;
  }

  list(lines, i, first, depth, emit) {
    const items = [];
    let loose = false;
    let cur = null;
    let j = i;
    let blank_before = false;
    while (j < lines.length) {
      const line = lines[j];
      const item = list_item_of(line);
      if (item && item.ordered === first.ordered && item.marker === first.marker
          && (cur === null || indent_of(line) < cur.content_indent)) {
        if (cur !== null && blank_before)
          loose = true;
        cur = { content_indent: item.content_indent, lines: [item.rest] };
        items.push(cur);
        blank_before = false;
        ++j;
        continue;
      }
      if (is_blank(line)) {
        // The list goes on only if an indented line or another item follows.
        let k = j + 1;
        while (k < lines.length && is_blank(lines[k]))
          ++k;
        if (k >= lines.length)
          break;
        const next_item = list_item_of(lines[k]);
        const continues = indent_of(lines[k]) >= cur.content_indent
          || (next_item && next_item.ordered === first.ordered
              && next_item.marker === first.marker);
        if (!continues)
          break;
        for (; j < k; ++j)
          cur.lines.push('');
        blank_before = true;
        continue;
      }
      if (indent_of(line) >= cur.content_indent) {
        if (blank_before)
          loose = true;
        cur.lines.push(dedent(line, cur.content_indent));
        blank_before = false;
        ++j;
        continue;
      }
      // A lazy continuation line of the item's paragraph.
      if (!blank_before && !interrupts(line)) {
        cur.lines.push(line.trim());
        ++j;
        continue;
      }
      break;
    }
    const tag = first.ordered ? 'ol' : 'ul';
    const start = first.ordered && first.start !== 1 ? ` start="${first.start}"` : '';
    let html = `<${tag}${start}>\n`;
    for (const it of items) {
      const body = this.render(it.lines, depth + 1);
      if (!loose) {
        // Tight: paragraphs lose their <p>.
        html += `<li>${body.replace(/<p>([\s\S]*?)<\/p>\n/g, '$1\n').trimEnd()}</li>\n`;
      } else {
        html += `<li>\n${body}</li>\n`;
      }
    }
    emit(html + `</${tag}>\n`);
    return j;
  }

  table(lines, i, head, align, depth, emit) {
    const cell = (tag, text, k) => {
      const a = align[k] ? ` class="align-${align[k]}"` : '';
      return `<${tag}${a}>${this.inline(text, depth + 1)}</${tag}>`;
    };
    let html = '<div class="table-wrap"><table>\n<thead>\n<tr>';
    head.forEach((h, k) => { html += cell('th', h, k); });
    html += '</tr>\n</thead>\n<tbody>\n';
    let j = i + 2;
    for (; j < lines.length; ++j) {
      const line = lines[j];
      if (is_blank(line) || (!line.includes('|') && interrupts(line)))
        break;
      const cells = split_row(line);
      html += '<tr>';
      for (let k = 0; k < head.length; ++k)
        html += cell('td', cells[k] === undefined ? '' : cells[k], k);
      html += '</tr>\n';
    }
    emit(html + '</tbody>\n</table></div>\n');
    return j;
  }
}

/// Renders `text` (Markdown) as HTML. `opts.citation(n)` may return
/// `{url, title}` for citation number n (used for bare `[n]` chips and for
/// the chips' labels); `opts.scope` is written on every chip as data-scope.
export function render_markdown(text, opts = {}) {
  let src = typeof text === 'string' ? text : String(text ?? '');
  let note = '';
  if (src.length > max_input) {
    src = src.slice(0, max_input);
    note = `<p class="truncated">(The text was cut off after ${max_input} characters.)</p>\n`;
  }
  // NUL is replaced, as CommonMark does.
  src = src.replace(/\r\n?/g, '\n').replace(/\u0000/g, '\ufffd');
  const lines = src.split('\n');
  return new block_renderer(opts).render(lines, 0) + note;
}

/// Renders inline Markdown only (one line of text: titles, tasks).
export function render_inline_markdown(text, opts = {}) {
  const src = String(text ?? '').slice(0, 100000).replace(/\r\n?/g, '\n');
  return render_inline(src, 0, opts, false);
}

/// The HTML of a citation card: `card` is what packets.js's
/// citation_card() returns (`number`, `title`, `url`, `passage`,
/// `source_type`).
export function render_citation_card(card) {
  if (!card)
    return '';
  const url = typeof card.url === 'string' ? card.url : '';
  const safe = safe_url(url);
  const url_html = !url
    ? ''
    : safe && is_web_url(safe)
      ? `<a class="card-url" data-testid="card-url" ${link_attrs(safe)}>${escape_html(url)}</a>`
      : `<span class="card-url" data-testid="card-url">${escape_html(url)}</span>`;
  const kind = card.source_type
    ? `<span class="card-kind">${escape_html(card.source_type)}</span>` : '';
  const label = card.evidence
    ? '<p class="card-label" data-testid="card-evidence">Evidence the verification found in the text that was read:</p>'
    : '';
  const snippet = card.snippet_only
    ? '<p class="card-snippet-only" data-testid="card-snippet-only">Snippet only: the page was never opened; this is the search engine\'s excerpt.</p>'
    : '';
  const passage = card.passage
    ? `${label}<blockquote class="card-passage" data-testid="card-passage">${escape_html(card.passage)}</blockquote>${snippet}`
    : '<p class="card-passage card-empty" data-testid="card-passage">No passage was recorded for this source.</p>';
  const num = card.number === null || card.number === undefined ? ''
    : `<span class="card-num">${escape_html(String(card.number))}</span>`;
  return `<div class="card-head">${num}`
    + `<span class="card-title" data-testid="card-title">${escape_html(card.title || url || 'Untitled source')}</span>${kind}</div>`
    + url_html + passage;
}
