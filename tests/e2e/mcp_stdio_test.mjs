#!/usr/bin/env node
// The official MCP TypeScript SDK (`@modelcontextprotocol/sdk`) as a client
// of `quarry mcp` over stdio (docs/mcp.md):
//
//   node tests/e2e/mcp_stdio_test.mjs [path/to/quarry]   (or $QUARRY_EXE)
//
// The SDK's StdioClientTransport spawns `quarry mcp` with a fresh HOME (so
// the offline defaults: the extractive provider over the example corpus),
// then through the SDK's Client:
// - initialize (the SDK checks the protocol version), the server's name and
//   capabilities; tools/list: five tools with input and output schemas;
// - deep_research end to end with progress notifications (the SDK's
//   onprogress) and a report whose numbered sources carry a passage (the SDK
//   validates structuredContent against the tool's output schema);
// - get_report, list_sessions, resources/list and resources/read of the
//   stored report; quick_search; read_url refusing a loopback URL (a tool
//   error, isError);
// - garbage written to the server's stdin: JSON-RPC errors on its stdout,
//   and the client goes on (ping, tools/list);
// - with a model that never answers (tests/support/fake_llm_server): a
//   deep_research cancelled through an AbortSignal (the SDK sends
//   notifications/cancelled) is stored as cancelled; another one whose
//   client closes the connection is stored as cancelled too, and the server
//   exits on its own when its stdin closes.
// Exits non-zero with the reason on any failure; 77 (a skip for ctest) when
// the SDK is not installed, unless QUARRY_REQUIRE_E2E=1 makes that a failure.

import { spawnSync } from 'node:child_process';
import { fail, quarry_exe, run_test, start_fake_llm, temp_dir } from './serve.mjs';

function log(text) {
  process.stdout.write(`mcp_stdio_test: ${text}\n`);
}

// The SDK's client and stdio transport, or a skip (77) when the package is
// not installed, unless QUARRY_REQUIRE_E2E=1.
async function sdk() {
  try {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    return { Client, StdioClientTransport };
  } catch {
    const text = 'the @modelcontextprotocol/sdk package is not installed: run scripts/e2e-setup';
    if (process.env.QUARRY_REQUIRE_E2E === '1')
      fail(`${text} (QUARRY_REQUIRE_E2E=1)`);
    process.stderr.write(`mcp_stdio_test: skipped: ${text}\n`);
    process.exit(77);
  }
}

// The environment of `quarry mcp`: only what it needs, HOME fresh (the
// transport adds USER, SHELL and TERM; no provider or search key is passed
// on, whatever the caller's environment holds).
function server_env(home, extra = {}) {
  const env = { HOME: home, PATH: process.env.PATH || '/usr/bin:/bin' };
  for (const [k, v] of Object.entries(extra))
    if (v !== undefined)
      env[k] = v;
  return env;
}

async function connect(lib, exe, env) {
  const transport = new lib.StdioClientTransport({ command: exe, args: ['mcp'], env, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr = (stderr + d).slice(-100000); });
  const client = new lib.Client({ name: 'quarry-e2e', version: '1.0.0' });
  client.onerror = () => {}; // responses to the garbage below have no request
  try {
    await client.connect(transport);
  } catch (e) {
    fail(`connect failed: ${e.message}; stderr:\n${stderr}`);
  }
  return { client, transport, stderr: () => stderr };
}

function stored_state(exe, home, id) {
  const r = spawnSync(exe, ['sessions', 'list', '--json'], { env: server_env(home), encoding: 'utf8' });
  if (r.status !== 0)
    fail(`quarry sessions list failed: ${r.stderr}`);
  const row = JSON.parse(r.stdout).find((s) => s.id === id);
  return row ? row.state : 'missing';
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

async function offline(lib, exe) {
  const home = temp_dir('quarry-mcp-home-');
  const { client, transport, stderr } = await connect(lib, exe, server_env(home));
  const info = client.getServerVersion();
  if (info?.name !== 'quarry')
    fail(`serverInfo.name is ${JSON.stringify(info)}`);
  const caps = client.getServerCapabilities();
  if (!caps?.tools || !caps?.resources)
    fail(`capabilities lack tools or resources: ${JSON.stringify(caps)}`);

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  const want = ['deep_research', 'get_report', 'list_sessions', 'quick_search', 'read_url'];
  if (JSON.stringify(names) !== JSON.stringify(want))
    fail(`tools/list: ${JSON.stringify(names)}`);
  for (const t of tools)
    if (t.inputSchema?.type !== 'object' || t.outputSchema?.type !== 'object')
      fail(`${t.name} lacks an input or output schema`);
  log(`tools: ${names.join(', ')}`);

  // deep_research, offline, with progress.
  const progress = [];
  const r = await client.callTool(
    { name: 'deep_research', arguments: { question: "Why does a heat pump's efficiency drop in cold weather?" } },
    undefined, { onprogress: (p) => progress.push(p), timeout: 300000, resetTimeoutOnProgress: true });
  if (r.isError)
    fail(`deep_research failed: ${JSON.stringify(r.content)}; stderr:\n${stderr()}`);
  const sc = r.structuredContent;
  if (sc.state !== 'completed')
    fail(`deep_research state: ${sc.state}`);
  if (!/\[\[?\d+\]/.test(sc.report))
    fail('the report cites nothing');
  if (sc.sources.length < 1)
    fail('the report has no sources');
  for (const s of sc.sources)
    if (!(s.number >= 1) || !s.url || !s.passage)
      fail(`a source lacks its number, URL or passage: ${JSON.stringify(s)}`);
  const text = r.content.find((c) => c.type === 'text')?.text || '';
  if (!/^## Sources/m.test(text))
    fail('the text content has no Sources section');
  const messages = progress.map((p) => p.message || '');
  for (let i = 1; i < progress.length; ++i)
    if (!(progress[i].progress > progress[i - 1].progress))
      fail('progress does not grow');
  for (const want_message of [`Session ${sc.session_id}`, 'Agent 1', 'Sources found'])
    if (!messages.some((m) => m.includes(want_message)))
      fail(`no progress message with "${want_message}": ${JSON.stringify(messages)}`);
  log(`deep_research: session ${sc.session_id}, ${sc.sources.length} sources, ${progress.length} progress notifications`);

  // The store.
  const again = await client.callTool({ name: 'get_report', arguments: { session_id: sc.session_id } });
  if (again.isError || again.structuredContent.report !== sc.report)
    fail('get_report does not return the same report');
  const listed = await client.callTool({ name: 'list_sessions', arguments: {} });
  if (listed.structuredContent.sessions[0]?.id !== sc.session_id)
    fail(`list_sessions: ${JSON.stringify(listed.structuredContent)}`);
  const { resources } = await client.listResources();
  const uri = `quarry://sessions/${sc.session_id}/report`;
  if (!resources.some((x) => x.uri === uri))
    fail(`resources/list lacks ${uri}: ${JSON.stringify(resources)}`);
  const read = await client.readResource({ uri });
  if (!/^## Sources/m.test(read.contents[0]?.text || ''))
    fail('resources/read: the report has no Sources');
  const templates = await client.listResourceTemplates();
  if (!templates.resourceTemplates.some((t) => t.uriTemplate === 'quarry://sessions/{id}/report'))
    fail('resources/templates/list lacks the report template');
  let missing = null;
  try {
    await client.readResource({ uri: 'quarry://sessions/q0000000000000000/report' });
  } catch (e) {
    missing = e;
  }
  if (missing?.code !== -32002)
    fail(`reading an unknown report: ${missing ? missing.code : 'no error'}`);
  log('get_report, list_sessions and resources: ok');

  // quick_search and read_url.
  const qs = await client.callTool({ name: 'quick_search', arguments: { queries: ['heat pump defrost'] } });
  if (qs.isError || qs.structuredContent.results.length < 1)
    fail(`quick_search: ${JSON.stringify(qs).slice(0, 500)}`);
  const ru = await client.callTool({ name: 'read_url', arguments: { url: 'http://127.0.0.1:9/admin' } });
  if (!ru.isError)
    fail(`read_url read a loopback address: ${JSON.stringify(ru).slice(0, 500)}`);
  const bad = await client.callTool({ name: 'deep_research', arguments: { question: '' } });
  if (!bad.isError)
    fail('deep_research accepted an empty question');
  log(`quick_search: ${qs.structuredContent.results.length} results; read_url refused: ${ru.content[0].text.slice(0, 120)}`);

  // Garbage on the server's stdin: JSON-RPC errors on its stdout, and the
  // connection goes on.
  const child = transport._process;
  if (!child)
    fail('the transport has no child process');
  let raw = '';
  child.stdout.on('data', (d) => { raw += d; });
  child.stdin.write('this is not JSON\n{"jsonrpc":"2.0","id":"g1","method":"no/such"}\n[1,2]\n'
                    + '{"jsonrpc":"2.0","id":"g2","method":"tools/call","params":{"name":"nope"}}\n');
  await wait_until('errors for the garbage', () => ['-32700', '-32601', '-32600', '-32602']
    .every((code) => raw.includes(`"code":${code}`)), 30000);
  await client.ping();
  if ((await client.listTools()).tools.length !== 5)
    fail('tools/list after the garbage');
  log('garbage on stdin: JSON-RPC errors, the server stays up');
  await client.close();
}

async function cancellation(lib, exe) {
  const home = temp_dir('quarry-mcp-home-');
  // Every model call waits forever: a research runs until it is stopped.
  const llm = await start_fake_llm(exe, [{ respond: { text: 'never' }, stall_after_bytes: 0 }]);
  const env = server_env(home, { OPENAI_API_KEY: 'e2e-test-key', OPENAI_BASE_URL: llm, OPENAI_MODEL: 'fake-model' });
  const { client, transport, stderr } = await connect(lib, exe, env);
  const started = (progress) => {
    const m = progress.map((p) => /^Session (q[0-9a-f]{16})/.exec(p.message || '')).find(Boolean);
    return m ? m[1] : null;
  };

  // Cancelled through the SDK: it sends notifications/cancelled.
  const progress = [];
  const abort = new AbortController();
  const call = client.callTool({ name: 'deep_research', arguments: { question: 'How loud are heat pumps at night?' } },
                               undefined, { onprogress: (p) => progress.push(p), signal: abort.signal, timeout: 300000 });
  const outcome = call.then(() => 'answered', (e) => e);
  await wait_until('the first progress', () => started(progress) !== null);
  const first = started(progress);
  abort.abort('the user changed their mind');
  const e = await outcome;
  if (e === 'answered')
    fail('the cancelled call was answered');
  await wait_until(`session ${first} stored as cancelled`, () => stored_state(exe, home, first) === 'cancelled');
  await client.ping();
  log(`cancelled: session ${first}`);

  // The client goes away while a research runs.
  const progress2 = [];
  client.callTool({ name: 'deep_research', arguments: { question: 'How loud are heat pumps at night?' } },
                  undefined, { onprogress: (p) => progress2.push(p), timeout: 300000 }).catch(() => {});
  await wait_until('the first progress', () => started(progress2) !== null);
  const second = started(progress2);
  const child = transport._process;
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  // The transport closes stdin and waits 2 s before it sends SIGTERM: the
  // server must be gone by then, on its own.
  await client.close();
  const how = await exited;
  if (how.code !== 0)
    fail(`quarry mcp ended with ${how.signal || how.code} when its stdin closed; stderr:\n${stderr()}`);
  const state = stored_state(exe, home, second);
  if (state !== 'cancelled')
    fail(`session ${second} is ${state} after its client went away`);
  log(`client gone: session ${second} cancelled, the server exited 0`);
}

async function main() {
  const exe = quarry_exe(process.argv.slice(2));
  const lib = await sdk();
  await offline(lib, exe);
  await cancellation(lib, exe);
}

run_test('mcp_stdio_test', main);
