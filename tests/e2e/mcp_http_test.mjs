#!/usr/bin/env node
// The official MCP TypeScript SDK (`@modelcontextprotocol/sdk`) as a client
// of `quarry serve`'s MCP endpoint over Streamable HTTP (docs/mcp.md):
//
//   node tests/e2e/mcp_http_test.mjs [path/to/quarry]   (or $QUARRY_EXE)
//
// Starts `quarry serve --listen 127.0.0.1:0` with a fresh data folder and the
// offline defaults, then through the SDK's Client and
// StreamableHTTPClientTransport at http://127.0.0.1:PORT/mcp:
// - initialize (a session id), tools/list, an offline deep_research with
//   progress notifications and a cited report, get_report, resources/list
//   and resources/read, read_url refusing a loopback URL;
// - raw requests: bad JSON is 400 with -32700, a request without the
//   session header 400, an unknown session 404, GET 405, a foreign Origin
//   403, DELETE ends the session (404 afterwards);
// - with server.auth_token set: the client without the token is refused,
//   with it (Authorization: Bearer) it works;
// - with a model that never answers (tests/support/fake_llm_server): a
//   deep_research cancelled through an AbortSignal, and one whose client
//   closes its connection, are both stored as cancelled.
// Exits non-zero with the reason on any failure; 77 (a skip for ctest) when
// the SDK is not installed, unless QUARRY_REQUIRE_E2E=1 makes that a failure.

import { fail, offline_env, quarry_exe, run_test, start_fake_llm, start_quarry_serve } from './serve.mjs';

function log(text) {
  process.stdout.write(`mcp_http_test: ${text}\n`);
}

async function sdk() {
  try {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    return { Client, StreamableHTTPClientTransport };
  } catch {
    const text = 'the @modelcontextprotocol/sdk package is not installed: run scripts/e2e-setup';
    if (process.env.QUARRY_REQUIRE_E2E === '1')
      fail(`${text} (QUARRY_REQUIRE_E2E=1)`);
    process.stderr.write(`mcp_http_test: skipped: ${text}\n`);
    process.exit(77);
  }
}

async function connect(lib, base, headers = {}) {
  const transport = new lib.StreamableHTTPClientTransport(new URL(`${base}mcp`), { requestInit: { headers } });
  const client = new lib.Client({ name: 'quarry-e2e-http', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

async function state_of(base, id, headers = {}) {
  const r = await fetch(`${base}v1/research/${id}`, { headers });
  return (await r.json()).state;
}

async function wait_until(what, f, timeout_ms = 60000) {
  const until = Date.now() + timeout_ms;
  while (Date.now() < until) {
    if (await f())
      return;
    await new Promise((r) => setTimeout(r, 200));
  }
  fail(`${what} did not happen within ${timeout_ms / 1000} s`);
}

const init_body = JSON.stringify({
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

async function post(base, body, headers = {}) {
  return fetch(`${base}mcp`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body,
  });
}

async function offline(lib, exe) {
  const server = await start_quarry_serve(exe, { env: offline_env });
  const base = server.base;
  const { client, transport } = await connect(lib, base);
  if (!transport.sessionId)
    fail('no MCP-Session-Id after initialize');
  if (client.getServerVersion()?.name !== 'quarry')
    fail('serverInfo.name is not quarry');
  const { tools } = await client.listTools();
  if (tools.length !== 5)
    fail(`tools/list: ${tools.map((t) => t.name)}`);
  const progress = [];
  const r = await client.callTool(
    { name: 'deep_research', arguments: { question: 'How do heat pumps defrost their outdoor coil?' } },
    undefined, { onprogress: (p) => progress.push(p), timeout: 300000, resetTimeoutOnProgress: true });
  if (r.isError)
    fail(`deep_research failed: ${JSON.stringify(r.content)}; stderr:\n${server.proc.out.stderr}`);
  const sc = r.structuredContent;
  if (sc.state !== 'completed' || sc.sources.length < 1 || !sc.sources.every((s) => s.passage && s.url))
    fail(`deep_research: ${JSON.stringify(sc).slice(0, 500)}`);
  if (!progress.some((p) => (p.message || '').includes('Sources found')))
    fail(`no progress with the sources found: ${JSON.stringify(progress.map((p) => p.message))}`);
  if (await state_of(base, sc.session_id) !== 'completed')
    fail('the session is not stored as completed');
  log(`deep_research: session ${sc.session_id}, ${sc.sources.length} sources, ${progress.length} progress notifications`);
  const again = await client.callTool({ name: 'get_report', arguments: { session_id: sc.session_id } });
  if (again.structuredContent?.report !== sc.report)
    fail('get_report does not return the same report');
  const { resources } = await client.listResources();
  const uri = `quarry://sessions/${sc.session_id}/report`;
  if (!resources.some((x) => x.uri === uri))
    fail('resources/list lacks the report');
  const read = await client.readResource({ uri });
  if (!/^## Sources/m.test(read.contents[0]?.text || ''))
    fail('resources/read: no Sources');
  const ru = await client.callTool({ name: 'read_url', arguments: { url: 'http://127.0.0.1:9/admin' } });
  if (!ru.isError)
    fail('read_url read a loopback address');

  // Raw requests.
  const session = transport.sessionId;
  const bad = await post(base, '{not json', { 'MCP-Session-Id': session });
  if (bad.status !== 400 || (await bad.json()).error?.code !== -32700)
    fail(`bad JSON: ${bad.status}`);
  const ping = JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'ping' });
  const no_session = await post(base, ping);
  if (no_session.status !== 400)
    fail(`a request without MCP-Session-Id: ${no_session.status}`);
  const unknown = await post(base, ping, { 'MCP-Session-Id': 'f'.repeat(32) });
  if (unknown.status !== 404)
    fail(`an unknown session: ${unknown.status}`);
  const version = await post(base, ping, { 'MCP-Session-Id': session, 'MCP-Protocol-Version': '1999-01-01' });
  if (version.status !== 400)
    fail(`an unknown MCP-Protocol-Version: ${version.status}`);
  const ok = await post(base, ping, { 'MCP-Session-Id': session });
  if (ok.status !== 200 || JSON.stringify((await ok.json()).result) !== '{}')
    fail(`ping: ${ok.status}`);
  const get = await fetch(`${base}mcp`, { headers: { Accept: 'text/event-stream', 'MCP-Session-Id': session } });
  if (get.status !== 405)
    fail(`GET /mcp: ${get.status}`);
  const foreign = await post(base, init_body, { Origin: 'http://evil.example' });
  if (foreign.status !== 403)
    fail(`a foreign Origin: ${foreign.status}`);
  await transport.terminateSession();
  const gone = await post(base, ping, { 'MCP-Session-Id': session });
  if (gone.status !== 404)
    fail(`a request after DELETE: ${gone.status}`);
  await client.close();
  log('raw requests: 400, 404, 405, 403 as the transport says');
}

async function token(lib, exe) {
  const server = await start_quarry_serve(exe, { env: offline_env, extra_args: ['--set', 'server.auth_token=e2e-mcp-token'] });
  let refused = null;
  try {
    await connect(lib, server.base);
  } catch (e) {
    refused = e;
  }
  if (!refused)
    fail('the client without the token was let in');
  const { client } = await connect(lib, server.base, { Authorization: 'Bearer e2e-mcp-token' });
  if ((await client.listTools()).tools.length !== 5)
    fail('tools/list with the token');
  await client.close();
  log(`token: refused without it (${String(refused.message).slice(0, 80)}), works with it`);
}

async function cancellation(lib, exe) {
  const llm = await start_fake_llm(exe, [{ respond: { text: 'never' }, stall_after_bytes: 0 }]);
  const server = await start_quarry_serve(exe, {
    env: { ...offline_env, OPENAI_API_KEY: 'e2e-test-key', OPENAI_BASE_URL: llm, OPENAI_MODEL: 'fake-model' },
  });
  const started = (progress) => {
    const m = progress.map((p) => /^Session (q[0-9a-f]{16})/.exec(p.message || '')).find(Boolean);
    return m ? m[1] : null;
  };
  const { client } = await connect(lib, server.base);
  const progress = [];
  const abort = new AbortController();
  const outcome = client.callTool({ name: 'deep_research', arguments: { question: 'How loud are heat pumps at night?' } },
                                  undefined, { onprogress: (p) => progress.push(p), signal: abort.signal, timeout: 300000 })
    .then(() => 'answered', (e) => e);
  await wait_until('the first progress', () => started(progress) !== null);
  const first = started(progress);
  abort.abort('the user changed their mind');
  if (await outcome === 'answered')
    fail('the cancelled call was answered');
  await wait_until(`session ${first} stored as cancelled`, async () => await state_of(server.base, first) === 'cancelled');
  log(`cancelled: session ${first}`);

  // The client goes away while a research runs: its stream closes.
  const other = await connect(lib, server.base);
  const progress2 = [];
  other.client.callTool({ name: 'deep_research', arguments: { question: 'How loud are heat pumps at night?' } },
                        undefined, { onprogress: (p) => progress2.push(p), timeout: 300000 }).catch(() => {});
  await wait_until('the first progress', () => started(progress2) !== null);
  const second = started(progress2);
  await other.transport.close();
  await wait_until(`session ${second} stored as cancelled`, async () => await state_of(server.base, second) === 'cancelled');
  await client.close();
  log(`client gone: session ${second} cancelled`);
}

async function main() {
  const exe = quarry_exe(process.argv.slice(2));
  const lib = await sdk();
  await offline(lib, exe);
  await token(lib, exe);
  await cancellation(lib, exe);
}

run_test('mcp_http_test', main);
