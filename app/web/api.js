// The HTTP API of `quarry serve` (docs/api.md) as the page uses it.
//
// Event streams are read with fetch() rather than EventSource, so that the
// Authorization header can be sent. A dropped stream reconnects by itself
// with `Last-Event-ID` and `?from=`, and packets whose seq was already
// delivered are dropped, so the caller sees every packet exactly once.
//
// No DOM: runs in the browser and in Node (tests/web).

/// An error answered by the server (`{"error": {"code", "message"}}`) or a
/// failure to reach it (`status` 0).
export class api_error extends Error {
  constructor(status, code, message, retry_after = null) {
    super(message);
    this.name = 'api_error';
    this.status = status;
    this.code = code;
    this.retry_after = retry_after;
  }
}

/// Longest line and longest event accepted from an event stream.
export const max_event_bytes = 16 * 1024 * 1024;

/// Parses Server-Sent Events from text chunks (as the HTML standard says:
/// lines end with CRLF, LF or CR; `data` lines join with LF; a blank line
/// dispatches). `on_event({event, data, id})` gets each event;
/// `on_comment(text)` each comment line (heartbeats). push() throws an
/// Error when a line or an event grows past `max_bytes`.
export class sse_parser {
  constructor(on_event, { on_comment = null, max_bytes = max_event_bytes } = {}) {
    this.on_event = on_event;
    this.on_comment = on_comment;
    this.max_bytes = max_bytes;
    this.buffer = '';
    this.skip_lf = false;
    this.reset_event();
    this.last_event_id = '';
  }

  reset_event() {
    this.event = '';
    this.data = [];
    this.data_size = 0;
  }

  /// Feeds decoded text.
  push(text) {
    let start = 0;
    let i = 0;
    if (this.skip_lf && text[0] === '\n') {
      start = i = 1;
    }
    this.skip_lf = false;
    for (; i < text.length; ++i) {
      const c = text[i];
      if (c !== '\n' && c !== '\r')
        continue;
      const line = this.buffer + text.slice(start, i);
      this.buffer = '';
      this.line(line);
      if (c === '\r') {
        if (i + 1 < text.length) {
          if (text[i + 1] === '\n')
            ++i;
        } else {
          this.skip_lf = true;
        }
      }
      start = i + 1;
    }
    if (start < text.length) {
      this.buffer += text.slice(start);
      if (this.buffer.length > this.max_bytes)
        throw new Error(`an event stream line is longer than ${this.max_bytes} bytes`);
    }
  }

  line(line) {
    if (line === '') {
      if (this.data.length > 0) {
        const ev = { event: this.event || 'message', data: this.data.join('\n'),
                     id: this.last_event_id };
        this.reset_event();
        this.on_event(ev);
      } else {
        this.reset_event();
      }
      return;
    }
    if (line[0] === ':') {
      if (this.on_comment)
        this.on_comment(line.slice(1).trimStart());
      return;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value[0] === ' ')
      value = value.slice(1);
    switch (field) {
      case 'event':
        this.event = value;
        break;
      case 'data':
        this.data_size += value.length + 1;
        if (this.data_size > this.max_bytes)
          throw new Error(`an event is longer than ${this.max_bytes} bytes`);
        this.data.push(value);
        break;
      case 'id':
        if (!value.includes('\u0000'))
          this.last_event_id = value;
        break;
      default:
        // `retry` and unknown fields are ignored.
        break;
    }
  }
}

function join_url(base, path) {
  if (!base)
    return path;
  return base.replace(/\/+$/, '') + path;
}

function parse_retry_after(res) {
  const v = res.headers.get('retry-after');
  if (!v)
    return null;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? Math.min(n, 3600) : null;
}

async function error_of(res) {
  let code = 'http_' + res.status;
  let message = `${res.status} ${res.statusText || ''}`.trim();
  try {
    const text = await res.text();
    const body = JSON.parse(text.slice(0, 1 << 20));
    if (body && body.error && typeof body.error === 'object') {
      if (typeof body.error.code === 'string')
        code = body.error.code;
      if (typeof body.error.message === 'string')
        message = body.error.message;
    }
  } catch {
    // Not JSON: keep the status line.
  }
  return new api_error(res.status, code, message, parse_retry_after(res));
}

function valid_id(id) {
  return typeof id === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(id);
}

/// The client. `base`: the server's origin and prefix ('' for the page's
/// own); `get_token()`: the bearer token or null; `on_unauthorized()`:
/// called on every 401; `fetch_impl`: fetch (tests pass their own).
export class quarry_api {
  constructor({ base = '', get_token = () => null, on_unauthorized = () => {},
                fetch_impl = null } = {}) {
    this.base = base;
    this.get_token = get_token;
    this.on_unauthorized = on_unauthorized;
    this.fetch_impl = fetch_impl || ((...args) => globalThis.fetch(...args));
  }

  headers(extra = {}) {
    const h = { ...extra };
    const token = this.get_token();
    if (token)
      h.Authorization = `Bearer ${token}`;
    return h;
  }

  url(path) {
    return join_url(this.base, path);
  }

  /// Fetches `path` with `init`; resolves to a 2xx response, rejects with
  /// api_error (network failure, or the server's error) or an AbortError.
  async send(path, init) {
    let res;
    try {
      res = await this.fetch_impl(this.url(path), init);
    } catch (e) {
      if (e && e.name === 'AbortError')
        throw e;
      throw new api_error(0, 'network', `The server cannot be reached (${e && e.message ? e.message : e}).`);
    }
    if (res.status === 401)
      this.on_unauthorized();
    if (!res.ok)
      throw await error_of(res);
    return res;
  }

  /// Sends a request; resolves to the parsed JSON body (null for 204),
  /// rejects with api_error.
  async request(method, path, body = undefined, signal = undefined) {
    const init = { method, headers: this.headers({ Accept: 'application/json' }), signal };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const res = await this.send(path, init);
    if (res.status === 204)
      return null;
    const text = await res.text();
    if (!text)
      return null;
    try {
      return JSON.parse(text);
    } catch {
      throw new api_error(res.status, 'bad_response', 'The server answered with something that is not JSON.');
    }
  }

  /// POST /v1/research: `{question, clarify, answers, deadline, max_agents,
  /// strategy, mode, depth, verify, uploads}` (only set fields are sent) ->
  /// `{id, state}`.
  start(options) {
    return this.request('POST', '/v1/research', research_body(options));
  }

  /// GET /v1/research -> `{sessions, next}`.
  list({ q = '', limit = 50, before = '', state = '' } = {}, signal = undefined) {
    const params = new URLSearchParams();
    if (q)
      params.set('q', q);
    if (limit)
      params.set('limit', String(limit));
    if (before)
      params.set('before', before);
    if (state)
      params.set('state', state);
    const qs = params.toString();
    return this.request('GET', `/v1/research${qs ? '?' + qs : ''}`, undefined, signal);
  }

  get(id) {
    return this.request('GET', `/v1/research/${encodeURIComponent(id)}`);
  }

  /// GET /v1/info: the server's version, providers and models by role,
  /// tools and research defaults.
  info() {
    return this.request('GET', '/v1/info');
  }

  /// POST /v1/research/{id}/resume (an interrupted session).
  resume(id) {
    return this.request('POST', `/v1/research/${encodeURIComponent(id)}/resume`, {});
  }

  /// DELETE /v1/research/{id}.
  remove(id) {
    return this.request('DELETE', `/v1/research/${encodeURIComponent(id)}`);
  }

  /// GET /v1/research/{id}/report?format=json: `{report, html, sources,
  /// ...}`, the body rendered by the server.
  report(id, signal = undefined) {
    return this.request('GET', `/v1/research/${encodeURIComponent(id)}/report?format=json`,
                        undefined, signal);
  }

  /// POST /v1/research/{id}/render: Markdown of the session's report as it
  /// streams -> `{html}`, rendered as the finished report is.
  /// `numbering`: 'report' (numbered as the stored report will be) or
  /// 'as_written' (an agent's intermediate report keeps its own numbers).
  render(id, markdown, signal = undefined, numbering = 'report') {
    return this.request('POST', `/v1/research/${encodeURIComponent(id)}/render`,
                        { markdown, numbering }, signal);
  }

  /// GET /v1/research/{id}/sources: the report's sources in its numbering.
  sources(id, signal = undefined) {
    return this.request('GET', `/v1/research/${encodeURIComponent(id)}/sources`, undefined, signal);
  }

  /// GET /v1/research/{id}/sources/{n}: the text that was read, with the
  /// cited passages.
  source(id, n, signal = undefined) {
    return this.request('GET', `/v1/research/${encodeURIComponent(id)}/sources/${encodeURIComponent(String(n))}`,
                        undefined, signal);
  }

  /// The URL of a source's page (the text with its passages marked).
  source_url(id, n) {
    return this.url(`/v1/research/${encodeURIComponent(id)}/sources/${encodeURIComponent(String(n))}?format=html`);
  }

  /// POST /v1/uploads?name=NAME with the file's bytes -> `{upload, name,
  /// bytes, type}`. `file`: a Blob with a name (a File).
  async upload(file, signal = undefined) {
    const name = typeof file.name === 'string' && file.name ? file.name : 'upload';
    const init = {
      method: 'POST',
      headers: this.headers({ Accept: 'application/json',
                              'Content-Type': file.type || 'application/octet-stream' }),
      body: file,
      signal,
    };
    const res = await this.send(`/v1/uploads?name=${encodeURIComponent(name)}`, init);
    try {
      return JSON.parse(await res.text());
    } catch {
      throw new api_error(res.status, 'bad_response', 'The server answered with something that is not JSON.');
    }
  }

  reply(id, answers) {
    return this.request('POST', `/v1/research/${encodeURIComponent(id)}/reply`, { answers });
  }

  cancel(id) {
    return this.request('POST', `/v1/research/${encodeURIComponent(id)}/cancel`, {});
  }

  follow_up(id, options) {
    return this.request('POST', `/v1/research/${encodeURIComponent(id)}/follow-up`,
                        research_body(options));
  }

  /// The URL of a session's report (`md`, `html` or `json`).
  report_url(id, format) {
    return this.url(`/v1/research/${encodeURIComponent(id)}/report?format=${encodeURIComponent(format)}`);
  }

  /// Fetches a report with the token; resolves to a Blob.
  async report_blob(id, format) {
    let res;
    try {
      res = await this.fetch_impl(this.report_url(id, format), { headers: this.headers() });
    } catch (e) {
      throw new api_error(0, 'network', `The server cannot be reached (${e && e.message ? e.message : e}).`);
    }
    if (res.status === 401)
      this.on_unauthorized();
    if (!res.ok)
      throw await error_of(res);
    return res.blob();
  }

  /// Follows a session's events; see event_stream.
  events(id, handlers) {
    return new event_stream(this, id, handlers);
  }
}

/// Whether `text` is a duration the server reads (core/duration.hpp): one
/// or more `<number><unit>` parts with the units ms, s, m, h (`90s`,
/// `1h30m`, `1.5s`), or a bare number of seconds.
export function valid_duration(text) {
  const t = String(text ?? '').trim();
  if (t.length === 0 || t.length > 32)
    return false;
  return /^\d{1,9}(?:\.\d{1,3})?$/.test(t)
    || /^(?:\d{1,9}(?:\.\d{1,3})?[ \t]*(?:ms|s|m|h)[ \t]*){1,4}$/.test(t);
}

/// The body of POST /v1/research and follow-up from the page's options:
/// empty values are left out, so the server's defaults apply.
export function research_body(options) {
  const body = { question: String(options.question ?? '') };
  if (typeof options.clarify === 'boolean')
    body.clarify = options.clarify;
  if (Array.isArray(options.answers) && options.answers.length > 0)
    body.answers = options.answers.map(String);
  if (options.deadline)
    body.deadline = String(options.deadline).trim();
  if (options.max_agents !== undefined && options.max_agents !== null && options.max_agents !== '') {
    const n = Number(options.max_agents);
    if (Number.isInteger(n))
      body.max_agents = n;
  }
  for (const key of ['strategy', 'mode', 'depth'])
    if (options[key])
      body[key] = String(options[key]);
  if (typeof options.verify === 'boolean')
    body.verify = options.verify;
  if (Array.isArray(options.uploads) && options.uploads.length > 0)
    body.uploads = options.uploads.map(String);
  return body;
}

const default_delays = [250, 500, 1000, 2000, 4000, 8000];
/// Three missed heartbeats (the server sends one every 15 s).
const default_idle_ms = 45000;

/// A session's event stream that reconnects until the server sends `end`
/// or close() is called. Handlers (all optional):
/// - on_packet(packet): each packet once, in seq order;
/// - on_end(end): the `end` event's data (`{state}`); the stream is over;
/// - on_status(text): 'connecting', 'live', 'reconnecting';
/// - on_error(api_error): a failure that ends the stream (401, 404, a
///   malformed stream); the stream is over;
/// - from: the first seq wanted (default 1).
/// Options: `delays` (reconnect back-off in ms), `idle_ms` (a connection
/// silent this long, heartbeats included, is dropped and made again).
export class event_stream {
  constructor(api, id, handlers = {}) {
    this.api = api;
    this.id = id;
    this.h = handlers;
    this.last_seq = Math.max(0, (handlers.from || 1) - 1);
    this.closed = false;
    this.controller = null;
    this.attempt = 0;
    this.delays = handlers.delays || default_delays;
    this.idle_ms = handlers.idle_ms || default_idle_ms;
    this.connections = 0;
    this.wake = null;
    this.done = valid_id(id) ? this.run() : Promise.resolve(this.fail(
      new api_error(404, 'not_found', `Not a session id: ${String(id).slice(0, 80)}`)));
  }

  /// Stops reading; no handler is called afterwards.
  close() {
    this.closed = true;
    if (this.controller)
      this.controller.abort();
    if (this.wake)
      this.wake();
  }

  status(s) {
    if (!this.closed && this.h.on_status)
      this.h.on_status(s);
  }

  fail(err) {
    if (this.closed)
      return;
    this.closed = true;
    if (this.h.on_error)
      this.h.on_error(err);
  }

  async wait(ms) {
    await new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
    this.wake = null;
  }

  async run() {
    while (!this.closed) {
      let retry_after = null;
      try {
        const outcome = await this.connect();
        if (outcome === 'end' || this.closed)
          return;
      } catch (e) {
        if (this.closed)
          return;
        if (e instanceof api_error && e.status !== 0 && e.status !== 429 && e.status < 500) {
          this.fail(e);
          return;
        }
        if (e instanceof api_error)
          retry_after = e.retry_after;
        if (e && e.fatal) {
          this.fail(new api_error(0, 'bad_stream', e.message));
          return;
        }
      }
      this.status('reconnecting');
      const delay = retry_after !== null ? retry_after * 1000
        : this.delays[Math.min(this.attempt, this.delays.length - 1)];
      this.attempt += 1;
      await this.wait(delay);
    }
  }

  // One connection: resolves 'end' after the end event, 'dropped' when the
  // body ends without it; throws api_error for an error status.
  async connect() {
    const controller = new AbortController();
    this.controller = controller;
    // A connection on which nothing arrives, not even the server's
    // heartbeat comments, is taken as dead (a proxy may keep half of it).
    let idle = null;
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(() => controller.abort(), this.idle_ms);
    };
    arm();
    try {
      return await this.read_stream(controller, arm);
    } finally {
      clearTimeout(idle);
    }
  }

  async read_stream(controller, arm) {
    const from = this.last_seq + 1;
    const headers = this.api.headers({ Accept: 'text/event-stream' });
    if (this.last_seq > 0)
      headers['Last-Event-ID'] = String(this.last_seq);
    const path = `/v1/research/${encodeURIComponent(this.id)}/events`
      + (from > 1 ? `?from=${from}` : '');
    if (this.connections === 0)
      this.status('connecting');
    this.connections += 1;
    let res;
    try {
      res = await this.api.fetch_impl(this.api.url(path),
                                      { headers, signal: controller.signal, cache: 'no-store' });
    } catch (e) {
      throw new api_error(0, 'network', String(e && e.message ? e.message : e));
    }
    if (res.status === 401)
      this.api.on_unauthorized();
    if (!res.ok)
      throw await error_of(res);
    if (!res.body)
      throw new api_error(0, 'network', 'The event stream has no body.');
    this.status('live');
    let ended = false;
    const parser = new sse_parser((ev) => {
      if (this.closed || ended)
        return;
      if (ev.event === 'end') {
        ended = true;
        let end = { state: 'unknown' };
        try {
          end = JSON.parse(ev.data);
        } catch {
          // An end without a body still ends the stream.
        }
        this.closed = true;
        if (this.h.on_end)
          this.h.on_end(end);
        return;
      }
      if (ev.event !== 'packet' && ev.event !== 'message')
        return;
      let packet;
      try {
        packet = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (!packet || typeof packet !== 'object' || !Number.isSafeInteger(packet.seq))
        return;
      if (packet.seq <= this.last_seq)
        return; // a repeat after a reconnect
      this.last_seq = packet.seq;
      this.attempt = 0;
      if (this.h.on_packet)
        this.h.on_packet(packet);
    });
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done)
          break;
        arm();
        try {
          parser.push(decoder.decode(value, { stream: true }));
        } catch (e) {
          e.fatal = true;
          throw e;
        }
        if (ended || this.closed)
          break;
      }
    } catch (e) {
      if (e && e.fatal)
        throw e;
      if (this.closed)
        return 'end';
      throw new api_error(0, 'network', String(e && e.message ? e.message : e));
    } finally {
      try {
        await reader.cancel();
      } catch {
        // Already closed.
      }
    }
    if (ended)
      return 'end';
    return 'dropped';
  }
}
