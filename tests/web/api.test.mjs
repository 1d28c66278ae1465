// app/web/api.js: the page's API client, its Server-Sent Events parser and
// the event stream that reconnects without gaps or repeats, against real
// HTTP servers on 127.0.0.1.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';

import { api_error, quarry_api, research_body, sse_parser, valid_duration } from '../../app/web/api.js';
import { fold, phase } from '../../app/web/packets.js';

const research = readFileSync(new URL('fixtures/research.jsonl', import.meta.url), 'utf8')
  .split('\n').filter(Boolean).map((l) => JSON.parse(l));

function parse_all(chunks, opts) {
  const events = [];
  const comments = [];
  const p = new sse_parser((e) => events.push(e), { on_comment: (c) => comments.push(c), ...opts });
  for (const c of chunks)
    p.push(c);
  return { events, comments, parser: p };
}

test('sse: events, ids, multi-line data, comments', () => {
  const { events, comments } = parse_all([
    'id: 1\nevent: packet\ndata: {"a":1}\n\n',
    ': heartbeat\n\n',
    'data: line one\ndata: line two\n\n',
    'event: end\ndata: {"state":"completed"}\n\n',
  ]);
  assert.deepEqual(events, [
    { event: 'packet', data: '{"a":1}', id: '1' },
    { event: 'message', data: 'line one\nline two', id: '1' },
    { event: 'end', data: '{"state":"completed"}', id: '1' },
  ]);
  assert.deepEqual(comments, ['heartbeat']);
});

test('sse: any split of the bytes and any line ending give the same events', () => {
  const text = 'id: 7\r\nevent: packet\r\ndata: {"x":"a:b"}\r\n\r\nid: 8\revent: packet\rdata:no space\r\rid: 9\nevent: packet\ndata: {"y":2}\n\n';
  const whole = parse_all([text]).events;
  assert.equal(whole.length, 3);
  assert.deepEqual(whole.map((e) => e.data), ['{"x":"a:b"}', 'no space', '{"y":2}']);
  assert.deepEqual(whole.map((e) => e.id), ['7', '8', '9']);
  for (let cut = 1; cut < text.length; ++cut)
    assert.deepEqual(parse_all([text.slice(0, cut), text.slice(cut)]).events, whole, `cut at ${cut}`);
  assert.deepEqual(parse_all([...text]).events, whole);
});

test('sse: an event without data is not dispatched; unknown fields are ignored', () => {
  const { events } = parse_all(['event: packet\n\nretry: 10\nfoo: bar\ndata\n\n']);
  assert.deepEqual(events, [{ event: 'message', data: '', id: '' }]);
});

test('sse: lines and events are bounded', () => {
  assert.throws(() => parse_all(['data: ' + 'x'.repeat(2000)], { max_bytes: 1000 }), /longer than 1000 bytes/);
  assert.throws(() => parse_all(['data: xxxxxxxxxx\n'.repeat(200)], { max_bytes: 1000 }), /longer than 1000 bytes/);
});

test('api: the request body carries only the options that are set', () => {
  assert.deepEqual(research_body({ question: 'q' }), { question: 'q' });
  assert.deepEqual(research_body({ question: 'q', clarify: false, deadline: ' 10m ', max_agents: '3', answers: [] }),
                   { question: 'q', clarify: false, deadline: '10m', max_agents: 3 });
  assert.deepEqual(research_body({ question: 'q', max_agents: 'many', answers: ['a'] }),
                   { question: 'q', answers: ['a'] });
  assert.deepEqual(research_body({ question: 'q', strategy: 'reflective', mode: 'deep_research', depth: 'light',
                                   verify: false, uploads: ['u1', 'u2'] }),
                   { question: 'q', strategy: 'reflective', mode: 'deep_research', depth: 'light', verify: false,
                     uploads: ['u1', 'u2'] });
  assert.deepEqual(research_body({ question: 'q', mode: '', depth: undefined, verify: 'yes', uploads: [] }),
                   { question: 'q' });
});

test('api: deadlines are durations the server reads', () => {
  for (const ok of ['10', '0.25', '90s', '10m', '1h', '1h30m', '500ms', '1.5s', ' 2 m ', '1h 30m'])
    assert.ok(valid_duration(ok), ok);
  for (const bad of ['', ' ', 'm', '10x', '-5s', '1d', '10 minutes', '1e3s', '1..5s', '1h30m10s5ms1s', 'x'.repeat(40), null])
    assert.ok(!valid_duration(bad), String(bad));
});

// A server that answers with `handler(req, res, body)`; resolves to its
// base URL and a close function.
async function serve(handler) {
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req)
      chunks.push(c);
    handler(req, res, Buffer.concat(chunks).toString('utf8'));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}

function sse_packet(p) {
  return `id: ${p.seq}\nevent: packet\ndata: ${JSON.stringify(p)}\n\n`;
}

test('api: requests, JSON errors, the token and 401', { timeout: 30000 }, async () => {
  const seen = [];
  const srv = await serve((req, res, body) => {
    seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, type: req.headers['content-type'], body });
    if (req.url === '/v1/research' && req.method === 'POST') {
      res.writeHead(202, { 'Content-Type': 'application/json' });
      res.end('{"id":"q0123456789abcdef","state":"running"}');
    } else if (req.url.startsWith('/v1/research?')) {
      res.writeHead(401, { 'Content-Type': 'application/json', 'WWW-Authenticate': 'Bearer' });
      res.end('{"error":{"code":"unauthorized","message":"missing or wrong bearer token"}}');
    } else if (req.url.endsWith('/cancel')) {
      res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '3' });
      res.end('{"error":{"code":"busy","message":"too many sessions"}}');
    } else if (req.url.endsWith('/reply')) {
      res.writeHead(502, { 'Content-Type': 'text/html' });
      res.end('<html>bad gateway</html>');
    } else {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end('{"error":{"code":"not_found","message":"no such session"}}');
    }
  });
  try {
    let unauthorized = 0;
    let token = 'secret-token';
    const api = new quarry_api({ base: srv.base, get_token: () => token, on_unauthorized: () => ++unauthorized });
    const started = await api.start({ question: 'q', clarify: false });
    assert.deepEqual(started, { id: 'q0123456789abcdef', state: 'running' });
    assert.equal(seen[0].auth, 'Bearer secret-token');
    assert.equal(seen[0].type, 'application/json');
    assert.deepEqual(JSON.parse(seen[0].body), { question: 'q', clarify: false });
    await assert.rejects(api.list({ q: 'heat pumps' }), (e) => e instanceof api_error && e.status === 401
      && e.code === 'unauthorized' && e.message === 'missing or wrong bearer token');
    assert.equal(unauthorized, 1);
    assert.equal(seen[1].url, '/v1/research?q=heat+pumps&limit=50');
    await assert.rejects(api.cancel('q0123456789abcdef'), (e) => e.status === 429 && e.code === 'busy' && e.retry_after === 3);
    await assert.rejects(api.reply('q0123456789abcdef', ['a']), (e) => e.status === 502 && e.code === 'http_502');
    await assert.rejects(api.get('q0123456789abcdef'), (e) => e.status === 404 && e.message === 'no such session');
    // Without a token no Authorization header is sent.
    token = null;
    await api.start({ question: 'q' });
    assert.equal(seen[seen.length - 1].auth, undefined);
    assert.equal(api.report_url('q0123456789abcdef', 'md'), `${srv.base}/v1/research/q0123456789abcdef/report?format=md`);
  } finally {
    await srv.close();
  }
  // An unreachable server is an api_error with status 0.
  const api = new quarry_api({ base: srv.base });
  await assert.rejects(api.get('q0123456789abcdef'), (e) => e instanceof api_error && e.status === 0 && e.code === 'network');
});

test('api: a dropped event stream resumes after the last packet, with no gap and no repeat', { timeout: 30000 }, async () => {
  const id = 'q00000000000000aa';
  const packets = research.map((p) => ({ ...p, session: id }));
  const connections = [];
  const srv = await serve((req, res) => {
    const url = new URL(req.url, 'http://x');
    const last = req.headers['last-event-id'];
    const from = Number(url.searchParams.get('from') || 1);
    connections.push({ path: url.pathname, from, last, auth: req.headers.authorization });
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    const n = connections.length;
    if (n === 1) {
      // 100 packets, half of the next one, then the connection drops.
      res.write(': heartbeat\n\n');
      res.write(packets.slice(0, 100).map(sse_packet).join(''));
      res.write(sse_packet(packets[100]).slice(0, 30), () => setTimeout(() => res.destroy(), 50));
    } else if (n === 2) {
      // A server replaying from a little earlier than asked: the repeats
      // must be dropped. Then the stream ends without `end`.
      res.end(packets.slice(Math.max(0, from - 1 - 5), 600).map(sse_packet).join(''));
    } else {
      res.write(packets.slice(from - 1).map(sse_packet).join(''));
      res.end('event: end\ndata: {"state":"completed"}\n\n');
    }
  });
  try {
    const api = new quarry_api({ base: srv.base, get_token: () => 'tok' });
    const got = [];
    const statuses = [];
    let end = null;
    const stream = api.events(id, {
      on_packet: (p) => got.push(p),
      on_end: (e) => { end = e; },
      on_status: (s) => statuses.push(s),
      on_error: (e) => assert.fail(`unexpected error: ${e.message}`),
      delays: [1, 1, 1],
    });
    await stream.done;
    assert.deepEqual(end, { state: 'completed' });
    assert.deepEqual(got.map((p) => p.seq), packets.map((p) => p.seq));
    assert.equal(connections.length, 3);
    assert.deepEqual(connections.map((c) => [c.path, c.from, c.last]), [
      [`/v1/research/${id}/events`, 1, undefined],
      [`/v1/research/${id}/events`, 101, '100'],
      [`/v1/research/${id}/events`, 601, '600'],
    ]);
    assert.ok(connections.every((c) => c.auth === 'Bearer tok'));
    assert.deepEqual(statuses, ['connecting', 'live', 'reconnecting', 'live', 'reconnecting', 'live']);
    // The packets fold to the same state as the recording.
    const s = fold(got);
    assert.equal(phase(s), 'completed');
    assert.equal(s.report, fold(research).report);
  } finally {
    await srv.close();
  }
});

test('api: an event stream starts at `from` and stops for good on 401, 404 and close()', { timeout: 30000 }, async () => {
  let status = 200;
  const froms = [];
  const srv = await serve((req, res) => {
    froms.push(new URL(req.url, 'http://x').searchParams.get('from'));
    if (status !== 200) {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(`{"error":{"code":"c${status}","message":"m${status}"}}`);
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.write(sse_packet({ seq: 5, session: 's', placement: { turn_index: 0, tab_index: 0 }, obj: { type: 'notice', text: 'x' } }));
    // Stays open.
  });
  try {
    let unauthorized = 0;
    const api = new quarry_api({ base: srv.base, on_unauthorized: () => ++unauthorized });
    for (const code of [401, 404]) {
      status = code;
      let error = null;
      const stream = api.events('q00000000000000bb', { on_error: (e) => { error = e; }, delays: [1] });
      await stream.done;
      assert.equal(error.status, code);
      assert.equal(error.message, `m${code}`);
    }
    assert.equal(unauthorized, 1);
    status = 200;
    const got = [];
    const stream = api.events('q00000000000000bb', { from: 5, on_packet: (p) => got.push(p.seq) });
    while (got.length === 0)
      await new Promise((resolve) => setTimeout(resolve, 5));
    stream.close();
    await stream.done;
    assert.deepEqual(got, [5]);
    assert.equal(froms[froms.length - 1], '5');
    // A malformed id never reaches the server.
    const before = froms.length;
    let bad = null;
    await api.events('../../etc', { on_error: (e) => { bad = e; } }).done;
    assert.equal(bad.status, 404);
    assert.equal(froms.length, before);
  } finally {
    await srv.close();
  }
});

test('api: a server error or 429 is retried after Retry-After', { timeout: 30000 }, async () => {
  let n = 0;
  const srv = await serve((req, res) => {
    ++n;
    if (n === 1) {
      res.writeHead(503, { 'Content-Type': 'application/json', 'Retry-After': '0' });
      res.end('{"error":{"code":"unavailable","message":"stopping"}}');
    } else if (n === 2) {
      res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '0' });
      res.end('{"error":{"code":"busy","message":"busy"}}');
    } else {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.end('event: end\ndata: {"state":"failed"}\n\n');
    }
  });
  try {
    let end = null;
    await new quarry_api({ base: srv.base }).events('q00000000000000cc', { on_end: (e) => { end = e; } }).done;
    assert.deepEqual(end, { state: 'failed' });
    assert.equal(n, 3);
  } finally {
    await srv.close();
  }
});

test('api: a connection on which nothing arrives is dropped and made again', { timeout: 30000 }, async () => {
  const id = 'q00000000000000dd';
  const packets = research.slice(0, 20).map((p) => ({ ...p, session: id }));
  let n = 0;
  const srv = await serve((req, res) => {
    ++n;
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    if (n === 1) {
      // Ten packets, then silence: no heartbeat, no end, the socket open.
      res.write(packets.slice(0, 10).map(sse_packet).join(''));
      return;
    }
    const from = Number(new URL(req.url, 'http://x').searchParams.get('from'));
    res.write(packets.slice(from - 1).map(sse_packet).join(''));
    res.end('event: end\ndata: {"state":"completed"}\n\n');
  });
  try {
    const got = [];
    let end = null;
    await new quarry_api({ base: srv.base }).events(id, {
      on_packet: (p) => got.push(p.seq),
      on_end: (e) => { end = e; },
      idle_ms: 500,
      delays: [1],
    }).done;
    // At least the one reconnection (a slow machine may need more).
    assert.ok(n >= 2, `${n} connections`);
    assert.deepEqual(got, packets.map((p) => p.seq));
    assert.deepEqual(end, { state: 'completed' });
  } finally {
    await srv.close();
  }
});
