#!/usr/bin/env node
// The `mcp` tool plugin against real MCP servers (docs/mcp.md, "MCP servers
// as tools"):
//
//   node tests/e2e/mcp_tool_test.mjs [path/to/quarry]   (or $QUARRY_EXE)
//
// - @modelcontextprotocol/server-filesystem over stdio as a source of
//   internal documents: a research (the model scripted by
//   tests/support/fake_llm_server) lists, reads and cites a file, and the
//   report's sources name it;
// - the same research through the built-in SearXNG search and through an
//   MCP search server (mcp_search_server.mjs, built with the official SDK)
//   that asks the same SearXNG endpoint: packets, citations and report are
//   identical;
// - @modelcontextprotocol/server-everything over stdio and over Streamable
//   HTTP: `quarry tool run` of its echo and structured-content tools,
//   `quarry config check` listing its tools, and a server environment that
//   holds none of Quarry's secrets;
// - a hostile server (mcp_hostile_server.mjs): never answering, flooding,
//   an endless line, crashing (and restarted), invalid JSON-RPC, noise on
//   stdout, 500 tools, a tool named like one of Quarry's; a missing program;
//   a name that collides with a configured tool; no server process outlives
//   Quarry.
// Exits non-zero with the reason on any failure; 77 (a skip for ctest) when
// the npm packages are not installed, unless QUARRY_REQUIRE_E2E=1.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as net_server } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fail, offline_env, quarry_exe, run_test, start_fake_llm, temp_dir } from './serve.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const modules = join(here, 'node_modules', '@modelcontextprotocol');
const filesystem_server = join(modules, 'server-filesystem', 'dist', 'index.js');
const everything_server = join(modules, 'server-everything', 'dist', 'index.js');
const hostile_server = join(here, 'mcp_hostile_server.mjs');
const search_server = join(here, 'mcp_search_server.mjs');
const node = process.execPath;

function log(text) {
  process.stdout.write(`mcp_tool_test: ${text}\n`);
}

function check(cond, what, detail = '') {
  if (!cond)
    fail(`${what}${detail ? `\n${detail}` : ''}`);
}

// Runs quarry to its end without blocking this process's servers.
function quarry(exe, home, args, env = {}) {
  return new Promise((resolve_run) => {
    const child_env = { ...process.env, ...env, HOME: home };
    for (const [k, v] of Object.entries({ ...offline_env, ...env }))
      if (v === undefined)
        delete child_env[k];
    const child = spawn(exe, args, { env: child_env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 180000);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve_run({ status, signal, stdout, stderr });
    });
  });
}

function yaml_list(xs) {
  return `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function free_port() {
  return new Promise((resolve_port) => {
    const s = net_server();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve_port(port));
    });
  });
}

// A SearXNG-style endpoint and the pages its results point to.
async function start_web() {
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const base = `http://127.0.0.1:${server.address().port}`;
    if (url.pathname === '/search') {
      const results = [
        { url: `${base}/defrost`, title: 'How heat pumps defrost',
          content: 'Heat pumps defrost their outdoor coil by reversing the refrigerant flow.' },
        { url: `${base}/cold`, title: 'Heat pumps in cold weather',
          content: 'Heat pump efficiency falls as the outdoor air gets colder.',
          publishedDate: '2025-01-15' },
      ];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ query: url.searchParams.get('q'), results }));
      return;
    }
    const pages = {
      '/defrost': ['How heat pumps defrost', 'Heat pumps defrost their outdoor coil by reversing the refrigerant flow for a few minutes. Frost forms on the coil when the air is near freezing and humid. A defrost cycle melts it, and the indoor unit may pause its fan meanwhile.'],
      '/cold': ['Heat pumps in cold weather', 'Heat pump efficiency falls as the outdoor air gets colder, because the compressor must lift heat across a larger temperature difference. Cold climate models keep a coefficient of performance above 2 at minus 15 degrees.'],
    };
    const page = pages[url.pathname];
    if (!page) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<html><head><title>${page[0]}</title></head><body><article><h1>${page[0]}</h1><p>${page[1]}</p></article></body></html>`);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { base: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

// The packets of a `--json` research, without what differs from run to run
// (session ids, times), in their order per placement.
function packets_of(stdout) {
  const by_place = new Map();
  for (const line of stdout.split('\n')) {
    if (!line.trim())
      continue;
    const p = JSON.parse(line);
    const obj = JSON.stringify(p.obj, (k, v) => (['created_at', 'elapsed_ms', 'duration_ms', 'pre_answer_processing_seconds'].includes(k) ? undefined : v));
    const place = JSON.stringify(p.placement || p.ind || null);
    if (!by_place.has(place))
      by_place.set(place, []);
    by_place.get(place).push(obj);
  }
  return [...by_place.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

async function filesystem_research(exe) {
  const home = temp_dir('quarry-mcp-fs-');
  const docs = join(home, 'docs');
  mkdirSync(docs);
  writeFileSync(join(docs, 'heat-pumps.md'), '# Heat pumps\n\nA heat pump moves heat from the outside air into a house. Its coefficient of performance is often 3 to 4 over a heating season.\n');
  writeFileSync(join(docs, 'boilers.md'), '# Gas boilers\n\nA condensing gas boiler reaches an efficiency of about 90 percent.\n');
  const file = join(docs, 'heat-pumps.md');
  const llm = await start_fake_llm(exe, [
    { match: { system_contains: 'You are the planner' }, respond: { text: '1. Heat pump efficiency' } },
    { match: { system_contains: 'You are the orchestrator', times: 1 },
      respond: { tool_calls: [{ name: 'research_agent', arguments: { task: 'Heat pump efficiency' } }] } },
    { match: { system_contains: 'You are the orchestrator' },
      respond: { tool_calls: [{ name: 'generate_report', arguments: {} }] } },
    { match: { system_contains: 'careful, precise research agent', message_contains: 'over a heating season' },
      respond: { tool_calls: [{ name: 'generate_report', arguments: {} }] } },
    { match: { system_contains: 'careful, precise research agent', message_contains: 'heat-pumps.md' },
      respond: { tool_calls: [{ name: 'read_text_file', arguments: { path: file } }] } },
    { match: { system_contains: 'careful, precise research agent' },
      respond: { tool_calls: [{ name: 'search_files', arguments: { path: docs, pattern: '*.md' } }] } },
    { match: { system_contains: 'finished its research' },
      respond: { text: 'A heat pump has a coefficient of performance of 3 to 4 over a heating season [1].' } },
    { match: { system_contains: 'You write the final answer' },
      respond: { text: 'A heat pump has a coefficient of performance of 3 to 4 over a heating season [1].' } },
  ]);
  const cfg = join(home, 'quarry.yaml');
  writeFileSync(cfg, `tools:
  files:
    plugin: mcp
    command: ${yaml_list([node, filesystem_server, docs])}
    include: [search_files, read_text_file]
    kind: {read_text_file: page_reader}
`);
  const out = join(home, 'report.md');
  const r = await quarry(exe, home, ['--config', cfg, 'research', 'How efficient is a heat pump?', '--json',
    '--no-clarify', '--out', out], { OPENAI_API_KEY: 'k', OPENAI_BASE_URL: llm });
  check(r.status === 0, `the research over server-filesystem failed (${r.status})`, r.stderr);
  const report = readFileSync(out, 'utf8');
  check(report.includes('[1]'), 'the report cites nothing', report);
  check(report.includes(file), 'the report\'s sources do not name the file the server read', report);
  check(report.includes('Heat pumps'), 'the cited file has not its heading as its title', report);
  let read = null;
  for (const line of r.stdout.split('\n'))
    if (line.trim()) {
      const p = JSON.parse(line);
      if (p.obj.type === 'open_url_documents')
        read = p.obj;
    }
  check(read !== null, 'no open_url_documents packet for the file read', r.stdout.slice(-3000));
  check(JSON.stringify(read).includes(file), 'the page-reader packet does not name the file', JSON.stringify(read));
  log('a research read and cited a file of server-filesystem');
}

async function same_as_builtin(exe) {
  const web = await start_web();
  try {
    const run = async (search) => {
      const home = temp_dir('quarry-mcp-same-');
      const cfg = join(home, 'quarry.yaml');
      writeFileSync(cfg, `tools:
${search}
  open_url:
    plugin: open_url
    allow: ["127.0.0.1"]
research:
  max_parallel_agents: 1
`);
      const out = join(home, 'report.md');
      const r = await quarry(exe, home, ['--config', cfg, 'research', 'Why do heat pumps defrost in cold weather?',
        '--json', '--no-clarify', '--out', out]);
      check(r.status === 0, `a research failed (${r.status})`, r.stderr);
      return { packets: packets_of(r.stdout), report: readFileSync(out, 'utf8'), stderr: r.stderr };
    };
    const builtin = await run(`  web_search:
    plugin: searxng
    base_url: ${web.base}`);
    const mcp = await run(`  web_search:
    plugin: mcp
    command: ${yaml_list([node, search_server, web.base])}
    kind: web_search`);
    check(builtin.report.includes(`${web.base}/defrost`), 'the built-in research did not cite the pages', builtin.report);
    const strip = (text) => text.replace(/q[0-9a-f]{16}/g, 'SESSION').replace(/\d{4}-\d\d-\d\dT[\d:.]+Z?/g, 'TIME');
    check(strip(mcp.report) === strip(builtin.report), 'the report through the MCP search differs from the built-in one',
          `built-in:\n${builtin.report}\nmcp:\n${mcp.report}`);
    const a = JSON.stringify(builtin.packets);
    const b = JSON.stringify(mcp.packets);
    if (a !== b) {
      const x = strip(a);
      const y = strip(b);
      let i = 0;
      while (i < x.length && x[i] === y[i])
        ++i;
      fail(`the packets through the MCP search differ from the built-in ones at ${i}:\n${x.slice(Math.max(0, i - 300), i + 300)}\n---\n${y.slice(Math.max(0, i - 300), i + 300)}`);
    }
    log('a research through an MCP search server matches the built-in search packet for packet');
  } finally {
    web.close();
  }
}

async function everything(exe) {
  const home = temp_dir('quarry-mcp-everything-');
  const cfg = join(home, 'quarry.yaml');
  writeFileSync(cfg, `tools:
  everything:
    plugin: mcp
    command: ${yaml_list([node, everything_server, 'stdio'])}
    env: {QUARRY_MCP_TEST: given}
`);
  let r = await quarry(exe, home, ['--config', cfg, 'config', 'check']);
  check(r.status === 0 && /tools\.everything \(mcp\): reachable, list the server's tools: \d+ tools: echo/.test(r.stdout + r.stderr),
        'config check does not list server-everything\'s tools', r.stdout + r.stderr);
  r = await quarry(exe, home, ['--config', cfg, 'tool', 'run', 'everything/echo', '{"message": "hello from quarry"}']);
  check(r.status === 0 && r.stdout.includes('Echo: hello from quarry'), 'echo over stdio failed', r.stdout + r.stderr);
  r = await quarry(exe, home, ['--config', cfg, 'tool', 'run', 'get-env', '{}'], { OPENAI_API_KEY: 'sk-must-not-leak' });
  check(r.status === 0 && r.stdout.includes('QUARRY_MCP_TEST') && !r.stdout.includes('sk-must-not-leak')
        && !r.stdout.includes('OPENAI_API_KEY'), 'the server\'s environment is not the one configured', r.stdout + r.stderr);
  r = await quarry(exe, home, ['--config', cfg, 'tool', 'run', 'get-structured-content', '{"location": "New York"}', '--json']);
  check(r.status === 0 && JSON.parse(r.stdout).llm_text.includes('temperature'), 'structured content failed', r.stdout + r.stderr);
  r = await quarry(exe, home, ['--config', cfg, 'tool', 'run', 'get-tiny-image', '{}']);
  check(r.status === 0 && r.stdout.includes('[an image (image/png) was left out]') && !r.stdout.includes('iVBOR'),
        'an image reached the model', r.stdout.slice(0, 2000) + r.stderr);
  // Resource links as search results, an embedded resource as a page read.
  const kinds_cfg = join(home, 'kinds.yaml');
  writeFileSync(kinds_cfg, `tools:
  everything:
    plugin: mcp
    command: ${yaml_list([node, everything_server, 'stdio'])}
    include: [get-resource-links, get-resource-reference]
    kind: {get-resource-links: search, get-resource-reference: page_reader}
`);
  r = await quarry(exe, home, ['--config', kinds_cfg, 'tool', 'run', 'get-resource-links', '{"count": 4}', '--json']);
  let got = r.status === 0 ? JSON.parse(r.stdout) : null;
  check(got && got.documents.length === 4 && got.documents[1].url.startsWith('demo://resource/')
        && JSON.parse(got.llm_text).results[3].document === 4,
        'resource links did not become numbered search results', r.stdout + r.stderr);
  r = await quarry(exe, home, ['--config', kinds_cfg, 'tool', 'run', 'get-resource-reference', '{"resourceType": "Text", "resourceId": 2}', '--json']);
  got = r.status === 0 ? JSON.parse(r.stdout) : null;
  check(got && got.documents.length === 1 && got.documents[0].content.length > 0
        && got.documents[0].url.startsWith('demo://resource/'),
        'an embedded resource did not become a read document', r.stdout + r.stderr);
  // Streamable HTTP.
  const port = await free_port();
  const proc = spawn(node, [everything_server, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    let said = '';
    await new Promise((resolve_ready, reject) => {
      const t = setTimeout(() => reject(new Error(`server-everything streamableHttp did not start: ${said}`)), 30000);
      const on = (d) => {
        said += d;
        if (/listening|running/i.test(said)) {
          clearTimeout(t);
          resolve_ready();
        }
      };
      proc.stdout.on('data', on);
      proc.stderr.on('data', on);
    });
    const http_cfg = join(home, 'http.yaml');
    writeFileSync(http_cfg, `tools:
  everything:
    plugin: mcp
    url: http://127.0.0.1:${port}/mcp
    include: [echo, get-sum]
`);
    r = await quarry(exe, home, ['--config', http_cfg, 'tool', 'run', 'everything/echo', '{"message": "over http"}']);
    check(r.status === 0 && r.stdout.includes('Echo: over http'), 'echo over Streamable HTTP failed', r.stdout + r.stderr);
    r = await quarry(exe, home, ['--config', http_cfg, 'tool', 'run', 'get-sum', '{"a": 2, "b": 40}']);
    check(r.status === 0 && r.stdout.includes('42'), 'get-sum over Streamable HTTP failed', r.stdout + r.stderr);
  } finally {
    proc.kill('SIGKILL');
  }
  log('server-everything works over stdio and Streamable HTTP');
}

async function hostile(exe) {
  const home = temp_dir('quarry-mcp-hostile-');
  const pids = join(home, 'pids');
  const cfg_for = (mode, extra = '', limits = '{max_retries: 0}') => {
    const name = 'hostile';
    const cfg = join(home, `${name}-${mode}.yaml`);
    writeFileSync(cfg, `tools:
  ${name}:
    plugin: mcp
    command: ${yaml_list([node, hostile_server, mode, join(home, `${mode}.state`)])}
    env: {HOSTILE_PID_FILE: ${JSON.stringify(pids)}}
    timeout: 2
    limits: ${limits}
${extra}`);
    return cfg;
  };
  const run = (mode, extra = '') => quarry(exe, home, ['--config', cfg_for(mode, extra), 'tool', 'run', 'probe', '{"queries": ["x"]}']);
  let t0 = Date.now();
  let r = await run('silent');
  check(r.status === 1 && r.stderr.includes('did not answer tools/call within 2 s'), 'a silent server is not a timed-out tool error', r.stderr);
  check(Date.now() - t0 < 30000, 'the silent server held quarry too long');
  r = await run('flood');
  check(r.status === 0 && r.stdout.includes('[... cut: the answer had 3145728 bytes'), 'a flood is not cut', r.stdout.slice(-500) + r.stderr);
  check(r.stdout.length < 200000, 'the flood reached the model uncut');
  r = await run('endless', '    max_message_bytes: 65536\n');
  check(r.status === 1 && r.stderr.includes('larger than 65536 bytes'), 'an endless line is not refused', r.stderr);
  r = await run('crash');
  check(r.status === 1 && r.stderr.includes('exited with status 3') && r.stderr.includes('dying'),
        'a crash is not a tool error naming the exit and the server\'s last words', r.stderr);
  r = await quarry(exe, home, ['--config', cfg_for('crash-once', '', '{max_retries: 2, retry_base: 1s}'),
    'tool', 'run', 'probe', '{"queries": ["x"]}']);
  check(r.status === 0 && r.stdout.includes('alive again'), 'a crashed server is not started again', r.stdout + r.stderr);
  r = await run('invalid');
  check(r.status === 1 && r.stderr.includes('invalid JSON-RPC response'), 'invalid JSON-RPC is not a tool error', r.stderr);
  r = await run('garbage');
  check(r.status === 0 && r.stdout.includes('a good answer after the noise'), 'noise on stdout broke the connection', r.stdout + r.stderr);
  r = await quarry(exe, home, ['--config', cfg_for('many'), 'config', 'check']);
  check(r.status === 0 && /reachable, list the server's tools: 32 tools: tool_000/.test(r.stdout + r.stderr)
        && (r.stdout + r.stderr).includes('left out: tool_032'), '500 tools are not capped at 32', r.stdout + r.stderr);
  r = await quarry(exe, home, ['--config', cfg_for('reserved'), 'config', 'check']);
  check(r.status === 2 && r.stderr.includes('`generate_report`, a name of Quarry\'s own research tools'),
        'a tool named like Quarry\'s own is not refused', r.stdout + r.stderr);
  const collide = join(home, 'collide.yaml');
  writeFileSync(collide, `tools:
  web_search:
    plugin: searxng
    base_url: http://127.0.0.1:9
  hostile:
    plugin: mcp
    command: ${yaml_list([node, hostile_server, 'silent'])}
    rename: {probe: web_search}
`);
  r = await quarry(exe, home, ['--config', collide, 'config', 'check']);
  check(r.status === 2 && /provides the tool `web_search`, like tools\.(web_search|hostile) .*rename/.test(r.stderr),
        'a name collision with a configured tool is not refused', r.stdout + r.stderr);
  const missing = join(home, 'missing.yaml');
  writeFileSync(missing, `tools:
  gone:
    plugin: mcp
    command: [no-such-mcp-server-program]
`);
  r = await quarry(exe, home, ['--config', missing, 'tool', 'run', 'gone', '{}']);
  check(r.status !== 0 && r.stderr.includes("no program 'no-such-mcp-server-program' in PATH"), 'a missing program is not named', r.stderr);
  // No server outlives the quarry that started it.
  const started = readFileSync(pids, 'utf8').split('\n').filter(Boolean).map(Number);
  check(started.length >= 10, `only ${started.length} servers were started`);
  await new Promise((r2) => setTimeout(r2, 500));
  const left = started.filter(alive);
  check(left.length === 0, `server processes outlived quarry: ${left.join(', ')}`);
  log('hostile servers are contained');
}

run_test('mcp_tool_test', async () => {
  const exe = quarry_exe(process.argv.slice(2));
  for (const f of [filesystem_server, everything_server])
    if (!existsSync(f)) {
      const text = `${f} is not installed: run scripts/e2e-setup`;
      if (process.env.QUARRY_REQUIRE_E2E === '1')
        fail(`${text} (QUARRY_REQUIRE_E2E=1)`);
      process.stderr.write(`mcp_tool_test: skipped: ${text}\n`);
      process.exit(77);
    }
  await hostile(exe);
  await everything(exe);
  await filesystem_research(exe);
  await same_as_builtin(exe);
});
