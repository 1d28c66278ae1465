#!/usr/bin/env node
// DEVELOPMENT AID, NOT THE ACCEPTANCE TEST: a fake of the `quarry serve` API
// (docs/api.md) in Node, for working on the web page before and apart from
// the real server. It serves app/web/ and answers the research endpoints by
// replaying recorded packet streams (tests/web/fixtures/*.jsonl) over
// Server-Sent Events exactly as docs/api.md says: `id: seq`, `event:
// packet`, replay from Last-Event-ID or ?from=, heartbeats, `event: end`.
// GET /v1/models and POST /v1/chat/completions answer from the same
// recording, so tests/e2e/openai_client_test.mjs can be tried too.
// Nothing here is research: every session replays the same recording.
//
//   node tests/e2e/dev_server.mjs [serve] [--listen 127.0.0.1:0]
//        [--set runtime.data_dir=DIR] (accepted and ignored, as `quarry
//        serve` takes them) [--delay-ms 15] [--token T] [--drop-after N]
//
// Prints `quarry: listening on http://127.0.0.1:PORT/` on stderr like the
// real server, so tests/e2e/page_test.mjs can drive either:
//   QUARRY_EXE=tests/e2e/dev_server.mjs node tests/e2e/page_test.mjs
// A question whose session asks for clarification (clarify true) replays
// clarification.jsonl first, then research.jsonl after POST .../reply.
// --drop-after N closes every event stream after N packets, to exercise the
// page's reconnection.

import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';

const here = dirname(fileURLToPath(import.meta.url));
const web_dir = join(here, '..', '..', 'app', 'web');
const fixtures = join(here, '..', 'web', 'fixtures');

const args = process.argv.slice(2);
let listen = '127.0.0.1:8700';
let delay_ms = 15;
let token = null;
let drop_after = 0;
for (let i = 0; i < args.length; ++i) {
  const a = args[i];
  const value = () => {
    if (i + 1 >= args.length) {
      process.stderr.write(`dev_server: ${a} needs a value\n`);
      process.exit(2);
    }
    return args[++i];
  };
  if (a === 'serve') continue;
  else if (a === '--listen') listen = value();
  else if (a === '--set') value();
  else if (a === '--delay-ms') delay_ms = Number(value());
  else if (a === '--token') token = value();
  else if (a === '--drop-after') drop_after = Number(value());
  else {
    process.stderr.write(`dev_server: unknown argument ${a}\n`);
    process.exit(2);
  }
}

function load(name) {
  return readFileSync(join(fixtures, name), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}
const research_packets = load('research.jsonl');
const clarification_packets = load('clarification.jsonl');

const types = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
};
const assets = new Map();
for (const f of ['index.html', 'style.css', 'app.js', 'api.js', 'packets.js', 'html.js', 'favicon.svg'])
  assets.set('/' + f, f);
assets.set('/', 'index.html');

const sessions = new Map();
let created = 0;

function now() {
  return new Date().toISOString();
}

function new_session(body, parent_id = null) {
  const id = 'q' + randomBytes(8).toString('hex');
  const clarify = body.clarify === true && !(Array.isArray(body.answers) && body.answers.length);
  const s = {
    id,
    question: body.question,
    options: { clarify: body.clarify ?? true, deadline: body.deadline ?? null, max_agents: body.max_agents ?? null },
    state: 'running',
    parent_id,
    created_at: now(),
    updated_at: now(),
    finished_at: null,
    order: ++created,
    packets: [],
    script: (clarify ? clarification_packets : research_packets).slice(),
    next_phase: clarify ? 'clarification' : null,
    listeners: new Set(),
    timer: null,
  };
  sessions.set(id, s);
  run(s);
  return s;
}

function emit(s, obj, placement) {
  const p = { seq: s.packets.length + 1, session: s.id, placement, obj };
  s.packets.push(p);
  s.updated_at = now();
  for (const l of s.listeners)
    l.packet(p);
}

function finish(s, state) {
  s.state = state;
  s.finished_at = state === 'clarification' ? null : now();
  s.updated_at = now();
  clearTimeout(s.timer);
  s.timer = null;
  for (const l of s.listeners)
    l.end(state);
}

function run(s) {
  const step = () => {
    const next = s.script.shift();
    if (!next) {
      finish(s, s.next_phase === 'clarification' ? 'clarification' : 'completed');
      return;
    }
    emit(s, next.obj, next.placement);
    s.timer = setTimeout(step, delay_ms);
  };
  s.timer = setTimeout(step, delay_ms);
}

function json(res, status, body, headers = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function error(res, status, code, message, headers = {}) {
  json(res, status, { error: { code, message } }, headers);
}

function summary(s) {
  return { id: s.id, question: s.question, state: s.state, parent_id: s.parent_id,
           created_at: s.created_at, updated_at: s.updated_at, finished_at: s.finished_at };
}

function report_of(s) {
  let text = '';
  const sources = [];
  const docs = new Map();
  for (const p of s.packets) {
    const o = p.obj;
    if (o.type === 'message_delta') text += o.content;
    for (const k of ['documents', 'cited_docs', 'final_documents'])
      if (Array.isArray(o[k])) for (const d of o[k]) docs.set(d.document_id, d);
    if (o.type === 'citation_info') {
      const d = docs.get(o.document_id) || {};
      sources.push({ number: o.citation_number, document_id: o.document_id, title: d.semantic_identifier || '', url: d.link || '' });
    }
  }
  sources.sort((a, b) => a.number - b.number);
  return { text, sources };
}

// The OpenAI-compatible endpoint: the recorded research, finished at once,
// as one completion or as chunks (progress as reasoning, the report as
// content).
function chat_completion(res, body) {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const last = [...messages].reverse().find((m) => m && m.role === 'user');
  if (!last || typeof last.content !== 'string')
    return error(res, 400, 'bad_request', 'messages: needs a user message');
  const s = new_session({ question: last.content, clarify: false });
  clearTimeout(s.timer);
  for (const p of s.script)
    emit(s, p.obj, p.placement);
  s.script = [];
  finish(s, 'completed');
  const r = report_of(s);
  const content = `${r.text.trim()}\n\n## Sources\n\n${r.sources.map((x) => `${x.number}. ${x.title} <${x.url}>`).join('\n')}\n`;
  const id = `chatcmpl-${s.id}`;
  const created = Math.floor(Date.now() / 1000);
  const model = typeof body.model === 'string' ? body.model : 'quarry-research';
  if (!body.stream) {
    return json(res, 200, { id, object: 'chat.completion', created, model,
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 100, completion_tokens: 200, total_tokens: 300 } });
  }
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store' });
  const chunk = (delta, finish_reason = null) => res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model,
    choices: [{ index: 0, delta, finish_reason }] })}\n\n`);
  chunk({ role: 'assistant' });
  for (const p of s.packets) {
    if (p.obj.type === 'deep_research_plan_delta') chunk({ reasoning_content: p.obj.content });
    if (p.obj.type === 'research_agent_start') chunk({ reasoning_content: `\nAgent: ${p.obj.research_task}\n` });
  }
  for (let i = 0; i < content.length; i += 40)
    chunk({ content: content.slice(i, i + 40) });
  chunk({}, 'stop');
  res.end('data: [DONE]\n\n');
}

async function read_body(req) {
  const chunks = [];
  let size = 0;
  for await (const c of req) {
    size += c.length;
    if (size > 1 << 20) throw Object.assign(new Error('too large'), { status: 413 });
    chunks.push(c);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    const v = JSON.parse(text || '{}');
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error();
    return v;
  } catch {
    throw Object.assign(new Error('malformed JSON'), { status: 400 });
  }
}

function events(req, res, s, url) {
  const last = Number(req.headers['last-event-id'] || 0);
  const from = Math.max(Number(url.searchParams.get('from') || 0), Number.isFinite(last) ? last + 1 : 1, 1);
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
  let sent = 0;
  let closed = false;
  const listener = {
    packet(p) {
      if (closed || p.seq < from) return;
      res.write(`id: ${p.seq}\nevent: packet\ndata: ${JSON.stringify(p)}\n\n`);
      if (drop_after > 0 && ++sent >= drop_after) {
        closed = true;
        s.listeners.delete(listener);
        res.destroy();
      }
    },
    end(state) {
      if (closed) return;
      res.write(`event: end\ndata: ${JSON.stringify({ state })}\n\n`);
      closed = true;
      s.listeners.delete(listener);
      res.end();
    },
  };
  for (const p of s.packets)
    listener.packet(p);
  if (closed) return;
  if (s.state !== 'running') {
    listener.end(s.state);
    return;
  }
  s.listeners.add(listener);
  const beat = setInterval(() => { if (!closed) res.write(': heartbeat\n\n'); }, 15000);
  req.on('close', () => {
    closed = true;
    clearInterval(beat);
    s.listeners.delete(listener);
  });
}

async function handle(req, res) {
  const url = new URL(req.url, 'http://localhost');
  const path = url.pathname;
  if (req.method === 'GET' && assets.has(path)) {
    const file = assets.get(path);
    const body = readFileSync(join(web_dir, file));
    res.writeHead(200, { 'Content-Type': types[file.slice(file.lastIndexOf('.'))], 'Cache-Control': 'no-cache' });
    res.end(body);
    return;
  }
  if (path === '/healthz') return json(res, 200, { status: 'ok', sessions_running: 0 });
  if (!path.startsWith('/v1/')) return error(res, 404, 'not_found', `no such path: ${path}`);
  if (token && req.headers.authorization !== `Bearer ${token}`)
    return error(res, 401, 'unauthorized', 'missing or wrong bearer token', { 'WWW-Authenticate': 'Bearer' });
  if (path === '/v1/models' && req.method === 'GET') {
    return json(res, 200, { object: 'list', data: ['quarry-research', 'quarry-research-fast'].map((id) => (
      { id, object: 'model', created: 0, owned_by: 'quarry' })) });
  }
  if (path === '/v1/chat/completions' && req.method === 'POST')
    return chat_completion(res, await read_body(req));
  if (path === '/v1/research' && req.method === 'POST') {
    const body = await read_body(req);
    if (typeof body.question !== 'string' || !body.question.trim())
      return error(res, 400, 'bad_request', 'question: must be a non-empty string');
    const s = new_session(body);
    return json(res, 202, { id: s.id, state: s.state }, { Location: `/v1/research/${s.id}` });
  }
  if (path === '/v1/research' && req.method === 'GET') {
    const words = (url.searchParams.get('q') || '').toLowerCase().split(/\s+/).filter(Boolean);
    const list = [...sessions.values()].sort((a, b) => b.order - a.order)
      .filter((s) => words.every((w) => s.question.toLowerCase().includes(w)));
    return json(res, 200, { sessions: list.slice(0, Number(url.searchParams.get('limit') || 50)).map(summary), next: null });
  }
  const m = /^\/v1\/research\/(q[0-9a-f]{16})(\/[a-z-]+)?$/.exec(path);
  if (!m) return error(res, 404, 'not_found', `no such path: ${path}`);
  const s = sessions.get(m[1]);
  if (!s) return error(res, 404, 'not_found', `no such session: ${m[1]}`);
  const action = m[2] || '';
  if (action === '' && req.method === 'GET') {
    const r = report_of(s);
    return json(res, 200, { ...summary(s), options: s.options, error: null, last_seq: s.packets.length,
                            usage: { calls: 0, input_tokens: 0, output_tokens: 0, cost: 0 },
                            sources: r.sources, questions: s.state === 'clarification' ? ['(see the clarification packet)'] : null, follow_ups: [] });
  }
  if (action === '/events' && req.method === 'GET') return events(req, res, s, url);
  if (action === '/reply' && req.method === 'POST') {
    await read_body(req);
    if (s.state !== 'clarification') return error(res, 409, 'conflict', 'the session asks nothing');
    s.state = 'running';
    s.next_phase = null;
    s.script = research_packets.slice();
    run(s);
    return json(res, 202, { id: s.id, state: 'running' });
  }
  if (action === '/cancel' && req.method === 'POST') {
    if (s.state !== 'running') return error(res, 409, 'conflict', 'the session is not running');
    clearTimeout(s.timer);
    s.script = [];
    emit(s, { type: 'stop', stop_reason: 'user_cancelled' }, { turn_index: 0, tab_index: 0, sub_turn_index: null });
    finish(s, 'cancelled');
    return json(res, 202, { id: s.id, state: 'cancelled' });
  }
  if (action === '/follow-up' && req.method === 'POST') {
    const body = await read_body(req);
    if (typeof body.question !== 'string' || !body.question.trim())
      return error(res, 400, 'bad_request', 'question: must be a non-empty string');
    const f = new_session(body, s.id);
    return json(res, 202, { id: f.id, state: f.state });
  }
  if (action === '/report' && req.method === 'GET') {
    const r = report_of(s);
    if (!r.text) return error(res, 409, 'conflict', 'no report yet');
    const format = url.searchParams.get('format') || 'md';
    const md = `# ${s.question}\n\n${r.text}\n\n## Sources\n\n${r.sources.map((x) => `${x.number}. ${x.title} <${x.url}>`).join('\n')}\n`;
    if (format === 'json') return json(res, 200, { id: s.id, question: s.question, report: r.text, sources: r.sources, partial: s.state !== 'completed' });
    if (format === 'html') {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      return res.end(`<!DOCTYPE html><meta charset="utf-8"><title>report</title><pre>${md.replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c])}</pre>`);
    }
    res.writeHead(200, { 'Content-Type': 'text/markdown; charset=utf-8' });
    return res.end(md);
  }
  return error(res, 405, 'method_not_allowed', `${req.method} is not allowed here`);
}

const [host, port] = listen.split(/:(?=\d+$)/);
const server = createServer((req, res) => {
  handle(req, res).catch((e) => {
    if (!res.headersSent) error(res, e.status || 500, e.status === 413 ? 'too_large' : e.status ? 'bad_request' : 'internal', e.message);
    else res.destroy();
  });
});
server.listen(Number(port), host, () => {
  process.stderr.write(`quarry: listening on http://${host}:${server.address().port}/\n`);
});
for (const sig of ['SIGINT', 'SIGTERM'])
  process.on(sig, () => {
    for (const s of sessions.values())
      if (s.state === 'running') finish(s, 'interrupted');
    server.close();
    process.exit(sig === 'SIGINT' ? 130 : 143);
  });
