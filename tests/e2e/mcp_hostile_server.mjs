#!/usr/bin/env node
// An MCP server over stdio that misbehaves on purpose, for the tests of the
// `mcp` tool plugin (mcp_tool_test.mjs). It speaks JSON-RPC by hand (no SDK:
// the point is to break the protocol):
//
//   node mcp_hostile_server.mjs MODE [STATE_FILE]
//
// It answers `initialize` and lists one tool, `probe` (`queries`: strings),
// then, by MODE, on `tools/call`:
//   silent      never answers
//   flood       answers with 3 MiB of text
//   endless     starts an answer and never ends its line
//   crash       writes "dying" to stderr and exits with status 3
//   crash-once  crashes like `crash` the first time (STATE_FILE marks it),
//               answers "alive again" after
//   invalid     answers with an object that is no JSON-RPC response
//   garbage     prints lines that are not JSON before a good answer
//   many        (tools/list) lists 500 tools, 100 per page
//   reserved    (tools/list) lists a tool named generate_report
// In every mode it writes its process id to $HOSTILE_PID_FILE if set.

import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const mode = process.argv[2] || 'silent';
const state = process.argv[3];
if (process.env.HOSTILE_PID_FILE)
  appendFileSync(process.env.HOSTILE_PID_FILE, `${process.pid}\n`);

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + '\n');
}

function tool(name) {
  return {
    name,
    description: `The ${name} tool`,
    inputSchema: { type: 'object', properties: { queries: { type: 'array', items: { type: 'string' } } } },
  };
}

function answer(id, text) {
  send({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } });
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  const { id, method, params } = msg;
  if (method === 'initialize') {
    send({ jsonrpc: '2.0', id, result: {
      protocolVersion: params.protocolVersion, capabilities: { tools: {} },
      serverInfo: { name: 'hostile', version: '0.0.0' } } });
    return;
  }
  if (method === 'tools/list') {
    if (mode === 'many') {
      const start = params && params.cursor ? Number(params.cursor) : 0;
      const tools = [];
      for (let i = start; i < start + 100; ++i)
        tools.push(tool(`tool_${String(i).padStart(3, '0')}`));
      send({ jsonrpc: '2.0', id, result: { tools, ...(start + 100 < 500 ? { nextCursor: String(start + 100) } : {}) } });
    } else {
      send({ jsonrpc: '2.0', id, result: { tools: [tool(mode === 'reserved' ? 'generate_report' : 'probe')] } });
    }
    return;
  }
  if (method !== 'tools/call' || id === undefined)
    return;
  switch (mode) {
    case 'silent':
      return;
    case 'flood':
      answer(id, 'x'.repeat(3 * 1024 * 1024));
      return;
    case 'endless': {
      process.stdout.write(`{"jsonrpc":"2.0","id":${id},"result":{"content":[{"type":"text","text":"`);
      const chunk = 'y'.repeat(1 << 20);
      const more = () => process.stdout.write(chunk, () => setImmediate(more));
      more();
      return;
    }
    case 'crash-once':
      if (state && existsSync(state)) {
        answer(id, 'alive again');
        return;
      }
      if (state)
        writeFileSync(state, 'crashed\n');
    // falls through
    case 'crash':
      process.stderr.write('dying\n', () => process.exit(3));
      return;
    case 'invalid':
      send({ jsonrpc: '2.0', id, oops: true });
      return;
    case 'garbage':
      process.stdout.write('this is not JSON\n{"neither": is this\n');
      answer(id, 'a good answer after the noise');
      return;
    default:
      answer(id, 'ok');
  }
});
lines.on('close', () => process.exit(0));
