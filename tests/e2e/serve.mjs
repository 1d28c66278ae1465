// Helpers of the end-to-end tests: start `quarry serve` (or the fake LLM
// server) as a child process, wait for its address, stop it.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const source_dir = resolve(here, '..', '..');

/// A failure the test reports as its reason, without a stack trace.
export class test_failure extends Error {}

export function fail(message) {
  throw new test_failure(message);
}

/// The `quarry` binary: the first argument, else $QUARRY_EXE, else
/// build/bin/quarry of this checkout. A path ending in .mjs is run with
/// node (tests/e2e/dev_server.mjs stands in for the server that way).
export function quarry_exe(argv) {
  const exe = argv.find((a) => !a.startsWith('--')) || process.env.QUARRY_EXE
    || join(source_dir, 'build', 'bin', 'quarry');
  if (!existsSync(exe))
    fail(`no quarry binary at ${exe} (pass its path as the first argument or in QUARRY_EXE)`);
  return resolve(exe);
}

/// Where screenshots go: $QUARRY_TEST_ARTIFACTS, else the build folder.
export function artifacts_dir() {
  return process.env.QUARRY_TEST_ARTIFACTS || join(source_dir, 'build', 'test-artifacts');
}

/// A fresh temporary folder, removed by cleanup().
export function temp_dir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const cleanups = [];

/// Runs the registered clean-ups (children stopped, folders removed).
export async function cleanup() {
  while (cleanups.length > 0) {
    const f = cleanups.pop();
    try {
      await f();
    } catch {
      // Best effort.
    }
  }
}

function start_child(exe, args, env) {
  const node = exe.endsWith('.mjs');
  const child_env = { ...process.env };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined)
      delete child_env[k];
    else
      child_env[k] = v;
  }
  const child = spawn(node ? process.execPath : exe, node ? [exe, ...args] : args, {
    env: child_env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (d) => { out.stdout = (out.stdout + d).slice(-200000); });
  child.stderr.on('data', (d) => { out.stderr = (out.stderr + d).slice(-200000); });
  const exited = new Promise((resolve_exit) => child.on('exit', (code, signal) => resolve_exit({ code, signal })));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10000);
      await exited;
      clearTimeout(t);
    }
  });
  return { child, out, exited };
}

// Resolves with the first match of `pattern` in the stream named `which`,
// or fails when the child exits first or after `timeout_ms`.
function wait_for_output(proc, which, pattern, timeout_ms, what) {
  return new Promise((resolve_match, reject) => {
    let done = false;
    const check = () => {
      if (done)
        return;
      const m = pattern.exec(proc.out[which]);
      if (m) {
        done = true;
        clearTimeout(timer);
        resolve_match(m);
      }
    };
    const timer = setTimeout(() => {
      done = true;
      reject(new test_failure(`${what} did not start within ${timeout_ms / 1000} s; its stderr:\n${proc.out.stderr}`));
    }, timeout_ms);
    proc.child[which].on('data', check);
    proc.exited.then(({ code, signal }) => {
      if (done)
        return;
      done = true;
      clearTimeout(timer);
      reject(new test_failure(`${what} exited (${signal || code}) before it was ready; its stderr:\n${proc.out.stderr}`));
    });
    check();
  });
}

/// The environment that makes `quarry` use its offline defaults (the
/// extractive provider over the example corpus), whatever the caller's
/// environment holds.
export const offline_env = {
  OPENAI_API_KEY: undefined, OPENAI_BASE_URL: undefined, OPENAI_MODEL: undefined,
  ANTHROPIC_API_KEY: undefined, ANTHROPIC_BASE_URL: undefined, ANTHROPIC_MODEL: undefined,
  BRAVE_API_KEY: undefined, TAVILY_API_KEY: undefined, QUARRY_CONFIG: undefined,
  EXA_API_KEY: undefined, SERPER_API_KEY: undefined, SEARXNG_URL: undefined,
  OLLAMA_HOST: undefined, OLLAMA_MODEL: undefined,
};

/// Starts `quarry serve --listen 127.0.0.1:0` with a fresh data folder (or
/// `data`, one an earlier server used) and resolves to `{base, proc, data}`
/// once it prints `quarry: listening on URL`. `env` values that are
/// undefined are removed from the child's environment.
export async function start_quarry_serve(exe, { env = {}, extra_args = [], data = null } = {}) {
  data = data || temp_dir('quarry-e2e-data-');
  const args = ['serve', '--listen', '127.0.0.1:0', '--set', `runtime.data_dir=${data}`, ...extra_args];
  const proc = start_child(exe, args, env);
  const m = await wait_for_output(proc, 'stderr', /quarry: listening on (http:\/\/127\.0\.0\.1:\d+\/)/, 60000,
                                  'quarry serve');
  return { base: m[1], proc, data };
}

/// Starts build/bin/fake_llm_server (beside `quarry`) with a script;
/// resolves to its OpenAI base URL.
export async function start_fake_llm(quarry, script) {
  const exe = process.env.QUARRY_FAKE_LLM || join(dirname(quarry), 'fake_llm_server');
  if (!existsSync(exe))
    fail(`no fake_llm_server at ${exe} (build it, or set QUARRY_FAKE_LLM)`);
  const dir = temp_dir('quarry-e2e-llm-');
  const file = join(dir, 'script.json');
  writeFileSync(file, JSON.stringify(script));
  const proc = start_child(exe, ['--script', file], {});
  const m = await wait_for_output(proc, 'stdout', /^(\d+)\n/, 30000, 'fake_llm_server');
  return `http://127.0.0.1:${m[1]}/v1`;
}

/// Runs `main`, reports `name: ok` or the failure, cleans up and exits
/// with 0 or 1.
export async function run_test(name, main) {
  let status = 0;
  try {
    await main();
    process.stdout.write(`${name}: ok\n`);
  } catch (e) {
    status = 1;
    // Failures the test names, and errors a server answered (the openai
    // client's carry a status), are reported by their message alone.
    const message = e instanceof test_failure || (e && typeof e.status === 'number')
      ? e.message : (e && e.stack) || String(e);
    process.stderr.write(`${name}: FAILED: ${message}\n`);
  }
  await cleanup();
  process.exit(status);
}
