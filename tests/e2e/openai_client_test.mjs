#!/usr/bin/env node
// The official `openai` npm package as a client of `quarry serve`'s
// OpenAI-compatible endpoints (docs/api.md):
//
//   node tests/e2e/openai_client_test.mjs [path/to/quarry]   (or $QUARRY_EXE)
//
// Starts `quarry serve --listen 127.0.0.1:0` with a fresh data folder and the
// offline defaults, then through the client (baseURL http://127.0.0.1:PORT/v1):
// - models.list() lists quarry-research and quarry-research-fast;
// - chat.completions.create() without streaming returns the whole report,
//   with a Sources section and [n] citations, finish_reason "stop", usage;
// - with streaming, the content deltas concatenate to the report (the
//   session's report, fetched by the completion's id), reasoning deltas
//   (progress) are present, the last chunk says "stop", and the usage chunk
//   asked for with stream_options.include_usage comes;
// - an unknown model is refused with the client's NotFoundError
//   (model_not_found).
// Exits non-zero with the reason on any failure; 77 (a skip for ctest) when
// the openai package is not installed, unless QUARRY_REQUIRE_E2E=1 makes
// that a failure too.

import { fail, offline_env, quarry_exe, run_test, start_quarry_serve } from './serve.mjs';

const question = 'What is the example corpus about?';

function log(text) {
  process.stdout.write(`openai_client_test: ${text}\n`);
}

function check_report_text(text, what) {
  if (typeof text !== 'string' || text.length < 200)
    fail(`${what}: the content is not a report (${JSON.stringify(String(text).slice(0, 200))})`);
  if (!/^#{1,3} Sources\s*$/m.test(text) && !/^\*\*Sources\*\*/m.test(text))
    fail(`${what}: the content has no Sources section`);
  const cites = text.match(/\[\[?\d+\]/g) || [];
  if (cites.length < 1)
    fail(`${what}: the content has no [n] citations`);
  return cites.length;
}

function session_of(completion_id) {
  const m = /^chatcmpl-(q[0-9a-f]{16})$/.exec(completion_id || '');
  if (!m)
    fail(`the completion id ${JSON.stringify(completion_id)} does not name a session (chatcmpl-q...)`);
  return m[1];
}

// The client, or a skip (77) when it is not installed, unless
// QUARRY_REQUIRE_E2E=1.
async function openai_client() {
  try {
    return (await import('openai')).default;
  } catch {
    const text = 'the openai package is not installed: run scripts/e2e-setup';
    if (process.env.QUARRY_REQUIRE_E2E === '1')
      fail(`${text} (QUARRY_REQUIRE_E2E=1)`);
    process.stderr.write(`openai_client_test: skipped: ${text}\n`);
    process.exit(77);
  }
}

async function main() {
  const exe = quarry_exe(process.argv.slice(2));
  const OpenAI = await openai_client();
  const server = await start_quarry_serve(exe, { env: offline_env });
  log(`server at ${server.base}`);
  const client = new OpenAI({ baseURL: `${server.base}v1`, apiKey: 'unused-on-loopback', maxRetries: 0, timeout: 300000 });

  // Models.
  const models = [];
  for await (const m of client.models.list())
    models.push(m.id);
  for (const id of ['quarry-research', 'quarry-research-fast'])
    if (!models.includes(id))
      fail(`models.list() does not list ${id}: ${JSON.stringify(models)}`);
  log(`models: ${models.join(', ')}`);

  // Not streaming.
  const completion = await client.chat.completions.create({
    model: 'quarry-research-fast',
    messages: [{ role: 'user', content: question }],
  });
  const choice = completion.choices && completion.choices[0];
  if (!choice)
    fail('the completion has no choices');
  if (choice.finish_reason !== 'stop')
    fail(`finish_reason is ${JSON.stringify(choice.finish_reason)}, not "stop"`);
  if (choice.message.role !== 'assistant')
    fail(`the message's role is ${JSON.stringify(choice.message.role)}`);
  const n = check_report_text(choice.message.content, 'non-streaming');
  if (!completion.usage || !(completion.usage.total_tokens > 0))
    fail(`the completion has no usage: ${JSON.stringify(completion.usage)}`);
  session_of(completion.id);
  log(`non-streaming: ${choice.message.content.length} characters, ${n} citations`);

  // Streaming.
  const stream = await client.chat.completions.create({
    model: 'quarry-research-fast',
    messages: [{ role: 'user', content: question }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let content = '';
  let reasoning = '';
  let reasoning_chunks = 0;
  let chunks = 0;
  let finish = null;
  let id = null;
  let usage = null;
  for await (const chunk of stream) {
    ++chunks;
    id = id || chunk.id;
    if (chunk.object !== 'chat.completion.chunk')
      fail(`a chunk's object is ${JSON.stringify(chunk.object)}`);
    if (chunk.usage)
      usage = chunk.usage;
    const c = chunk.choices && chunk.choices[0];
    if (!c)
      continue;
    if (typeof c.delta.content === 'string')
      content += c.delta.content;
    if (typeof c.delta.reasoning_content === 'string' && c.delta.reasoning_content) {
      reasoning += c.delta.reasoning_content;
      ++reasoning_chunks;
    }
    if (c.finish_reason)
      finish = c.finish_reason;
  }
  if (finish !== 'stop')
    fail(`the stream ended with finish_reason ${JSON.stringify(finish)}, not "stop"`);
  if (reasoning_chunks < 1)
    fail('the stream carried no reasoning deltas (progress)');
  if (!usage || !(usage.total_tokens > 0))
    fail(`the stream had no usage chunk: ${JSON.stringify(usage)}`);
  const m = check_report_text(content, 'streaming');
  // The content deltas concatenate to the session's report.
  const session = session_of(id);
  const res = await fetch(`${server.base}v1/research/${session}/report?format=json`);
  if (res.status !== 200)
    fail(`GET /v1/research/${session}/report?format=json answered ${res.status}`);
  const report = await res.json();
  if (typeof report.report !== 'string' || !report.report.trim())
    fail('the session of the streamed completion has no report');
  if (!content.includes(report.report.trim()))
    fail('the streamed content does not contain the session\'s report: the deltas do not concatenate to it');
  log(`streaming: ${chunks} chunks, ${content.length} characters, ${m} citations, ${reasoning_chunks} reasoning deltas`);

  // An unknown model: the client's NotFoundError, with OpenAI's error code.
  let refused = null;
  try {
    await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: question }] });
  } catch (e) {
    refused = e;
  }
  if (!refused || refused.status !== 404 || refused.code !== 'model_not_found')
    fail(`an unknown model was not refused with 404 model_not_found: ${refused ? `${refused.status} ${refused.code}` : 'it was answered'}`);
  log('unknown model: 404 model_not_found');
}

run_test('openai_client_test', main);
