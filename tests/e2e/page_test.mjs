#!/usr/bin/env node
// Browser test of the web page of `quarry serve`, in headless Chromium (the
// Debian package) driven by playwright-core:
//
//   node tests/e2e/page_test.mjs [path/to/quarry]     (or $QUARRY_EXE)
//
// 1. Starts `quarry serve --listen 127.0.0.1:0` with a fresh data folder and
//    the offline defaults (the extractive provider over the example
//    corpus), asks a question with clarification off, waits for the final
//    report and checks the page: the plan, at least one agent lane, the
//    sources, the report with citation chips, and the hover card of a chip
//    (a title and the cited passage). Screenshots go to
//    $QUARRY_TEST_ARTIFACTS (default build/test-artifacts).
// 2. Cancels a second research: on a second server whose model is the fake
//    LLM server (beside `quarry`, or $QUARRY_FAKE_LLM) answering slowly, so
//    the research is still running when Cancel is pressed.
// 3. Searches the history for the first question and opens it again (the
//    session is replayed from the store).
// Exits non-zero with the reason on any failure, and on any script error
// or CSP violation in the page.
//
// With tests/e2e/dev_server.mjs as the binary (a development aid) the same
// steps run against recorded packets; the second research then runs on the
// same server, whose replay is slow enough to cancel.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import {
  artifacts_dir, fail, offline_env, quarry_exe, run_test, start_fake_llm, start_quarry_serve,
  temp_dir,
} from './serve.mjs';

const chromium_path = process.env.CHROMIUM || '/usr/bin/chromium';
const first_question = 'What is the example corpus about?';
const second_question = 'How loud are heat pumps at night? (this research is cancelled)';
const report_timeout = 180000;

function log(text) {
  process.stdout.write(`page_test: ${text}\n`);
}

async function state_of(page) {
  return page.locator('#session-state').getAttribute('data-state').catch(() => null);
}

// Waits for the session badge to show `wanted`; fails with what the page
// shows instead.
async function wait_for_state(page, wanted, timeout) {
  try {
    // The badge shows the stored state at once; every packet is shown once
    // the event stream has ended.
    await page.waitForSelector(`#session[data-stream="ended"] #session-state[data-state="${wanted}"]`, { timeout });
  } catch {
    const state = await state_of(page);
    const errors = await page.locator('#errors').innerText().catch(() => '');
    fail(`the session did not reach "${wanted}" within ${timeout / 1000} s: it shows "${state}"`
         + (errors ? `; errors on the page: ${errors}` : ''));
  }
}

async function ask(page, question) {
  await page.waitForSelector('#ask-form', { state: 'visible' });
  if (await page.locator('#ask-options').isHidden())
    await page.click('#ask-options-toggle');
  await page.uncheck('#opt-clarify');
  await page.fill('#question', question);
  await page.click('#ask-submit');
  try {
    await page.waitForURL(/#\/research\/[A-Za-z0-9_-]+$/, { timeout: 30000 });
  } catch {
    const err = await page.locator('#ask-error').innerText().catch(() => '');
    fail(`asking "${question}" opened no session${err ? `: the page says "${err}"` : ''}`);
  }
  const id = decodeURIComponent(new URL(page.url()).hash.replace('#/research/', ''));
  log(`asked "${question}": session ${id}`);
  return id;
}

async function count(page, selector) {
  return page.locator(selector).count();
}

async function check_report_page(page) {
  const steps = await count(page, '#plan li');
  if (steps < 1)
    fail('the plan is not shown (#plan has no steps)');
  const lanes = await count(page, '[data-testid="agent-lane"]');
  if (lanes < 1)
    fail('no agent lane is shown');
  const lane_task = (await page.locator('[data-testid="lane-task"]').first().innerText()).trim();
  if (!lane_task)
    fail('the first agent lane shows no task');
  const sources = await count(page, '#sources [data-testid="source"]');
  if (sources < 1)
    fail('no source is listed');
  const report = (await page.locator('#report').innerText()).trim();
  if (report.length < 100)
    fail(`the report is not rendered (${report.length} characters of text)`);
  if ((await count(page, '#report h2, #report p')) < 2)
    fail('the report was not rendered as Markdown (no headings or paragraphs)');
  const chips = await count(page, '#report a.cite[data-testid="citation"]');
  if (chips < 1)
    fail('the report has no citation chips');
  if (/\[\[\d+\]\]\(/.test(report))
    fail('raw citation links ([[n]](url)) are left in the rendered report');
  log(`plan ${steps} steps, ${lanes} agent lanes, ${sources} sources, ${chips} citation chips`);
  return { steps, lanes, sources, chips };
}

async function check_card(page) {
  const chip = page.locator('#report a.cite').first();
  await chip.scrollIntoViewIfNeeded();
  await chip.hover();
  try {
    await page.waitForSelector('#citation-card:not([hidden])', { timeout: 5000 });
  } catch {
    fail('hovering a citation chip shows no card');
  }
  const title = (await page.locator('#citation-card [data-testid="card-title"]').innerText()).trim();
  const passage_el = page.locator('#citation-card [data-testid="card-passage"]');
  const passage = (await passage_el.innerText()).trim();
  const empty = await passage_el.evaluate((e) => e.classList.contains('card-empty'));
  if (!title || /^Source \d+$/.test(title))
    fail(`the citation card shows no source title ("${title}")`);
  if (!passage || empty)
    fail('the citation card shows no cited passage');
  log(`citation card: "${title}", passage of ${passage.length} characters`);
}

// An agent's intermediate report has chips of its own numbering; its card
// names one of that agent's sources.
async function check_lane_card(page) {
  const details = page.locator('[data-testid="agent-lane"] [data-testid="lane-report"]').first();
  await details.locator('summary').click();
  const chip = details.locator('a.cite').first();
  await chip.waitFor({ state: 'visible', timeout: 5000 })
    .catch(() => fail('the first agent\'s intermediate report shows no citation chips'));
  await chip.scrollIntoViewIfNeeded();
  await chip.hover();
  await page.waitForSelector('#citation-card:not([hidden])', { timeout: 5000 })
    .catch(() => fail('hovering a chip of an intermediate report shows no card'));
  const title = (await page.locator('#citation-card [data-testid="card-title"]').innerText()).trim();
  const titles = await page.locator('#sources [data-testid="source"] .source-head').allInnerTexts();
  if (!titles.some((t) => t.includes(title)))
    fail(`the card of an intermediate report's chip names "${title}", which is not a listed source`);
  await details.locator('summary').click();
  await page.mouse.move(5, 5);
}

async function check_exports(page, base, id) {
  for (const format of ['md', 'html']) {
    const link = page.locator(`#export-${format}`);
    if (!(await link.isVisible()))
      fail(`the export link for ${format} is not shown after the report`);
    const href = await link.getAttribute('href');
    if (!href.endsWith(`/v1/research/${id}/report?format=${format}`))
      fail(`the ${format} export links to ${href}`);
    const res = await page.request.get(new URL(href, base).href);
    if (res.status() !== 200)
      fail(`GET ${href} answered ${res.status()}`);
  }
}

async function main() {
  const exe = quarry_exe(process.argv.slice(2));
  const dev = exe.endsWith('.mjs');
  const artifacts = artifacts_dir();
  mkdirSync(artifacts, { recursive: true });

  const server = await start_quarry_serve(exe, { env: offline_env });
  log(`server at ${server.base}`);

  const { chromium } = await import('playwright-core')
    .catch(() => fail('playwright-core is not installed: run scripts/e2e-setup'));
  const profile = temp_dir('quarry-e2e-chromium-');
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: chromium_path,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1440, height: 1000 },
    reducedMotion: 'reduce',
  }).catch((e) => fail(`Chromium (${chromium_path}) did not start: ${e.message}`));
  const problems = [];
  let page = null;
  try {
    page = browser.pages()[0] || await browser.newPage();
    page.on('pageerror', (e) => problems.push(`script error in the page: ${e.message}`));
    page.on('console', (m) => {
      // Failed requests are checked where they matter; anything else the
      // page logs as an error (CSP violations included) is a failure.
      if (m.type() === 'error' && !/Failed to load resource/.test(m.text()))
        problems.push(`console error in the page: ${m.text()}`);
    });
    const shot = async (name, options = {}, on = page) => {
      const path = join(artifacts, `page_test-${name}.png`);
      await on.screenshot({ path, ...options });
      log(`screenshot ${path}`);
    };

    // 1. A research, live.
    await page.goto(server.base);
    const first = await ask(page, first_question);
    await wait_for_state(page, 'completed', report_timeout);
    const seen = await check_report_page(page);
    await check_exports(page, server.base, first);
    await shot('report', { fullPage: true });
    await check_card(page);
    await shot('citation-card');
    await page.mouse.move(5, 5);
    await check_lane_card(page);

    // 2. Cancel a second research.
    let cancel_page = page;
    let second_server = server;
    if (!dev) {
      // The model answers after 20 s: the research stays in planning.
      const llm = await start_fake_llm(exe, [{ latency_ms: 20000, respond: { text: '1. A step' } }]);
      second_server = await start_quarry_serve(exe, {
        env: { ...offline_env, OPENAI_API_KEY: 'e2e-test-key', OPENAI_BASE_URL: llm, OPENAI_MODEL: 'fake-model' },
      });
      cancel_page = await browser.newPage();
      cancel_page.on('pageerror', (e) => problems.push(`script error in the page: ${e.message}`));
      await cancel_page.goto(second_server.base);
    } else {
      await page.goto(`${server.base}#/`);
    }
    const second = await ask(cancel_page, second_question);
    try {
      await cancel_page.waitForSelector('#cancel:not([hidden])', { timeout: 30000 });
    } catch {
      fail(`the Cancel button is not shown while the research runs (state "${await state_of(cancel_page)}")`);
    }
    await cancel_page.click('#cancel');
    await wait_for_state(cancel_page, 'cancelled', 60000);
    if (await cancel_page.locator('#cancel').isVisible())
      fail('the Cancel button is still shown after the research was cancelled');
    log(`session ${second} cancelled`);
    await shot('cancelled', {}, cancel_page);
    if (cancel_page !== page)
      await cancel_page.close();

    // 3. History: find the first research by search and open it again.
    await page.goto(`${server.base}#/`);
    await page.waitForSelector('#ask-form', { state: 'visible' });
    if (await page.locator('#history-toggle').isVisible())
      await page.click('#history-toggle');
    await page.fill('#history-search', 'example corpus');
    await page.waitForSelector('#history-list[data-query="example corpus"]', { timeout: 15000 })
      .catch(() => fail('the history shows no results for the search "example corpus"'));
    const item = page.locator(`#history-list [data-testid="history-item"][data-id="${first}"]`);
    try {
      await item.waitFor({ state: 'visible', timeout: 15000 });
    } catch {
      const shown = await page.locator('#history-list').innerText().catch(() => '');
      fail(`searching the history for "example corpus" does not list session ${first}; it lists: ${shown || 'nothing'}`);
    }
    if (second_server === server
        && await page.locator(`#history-list [data-testid="history-item"][data-id="${second}"]`).count() > 0)
      fail('the history search lists the cancelled research, whose question does not match');
    await shot('history');
    await item.click();
    await page.waitForURL(new RegExp(`#/research/${first}$`));
    await wait_for_state(page, 'completed', 60000);
    const replayed = await check_report_page(page);
    if (replayed.chips !== seen.chips || replayed.sources !== seen.sources)
      fail(`the replayed session differs from the live one: ${replayed.chips} chips and ${replayed.sources} sources against ${seen.chips} and ${seen.sources}`);
    log('opened the first session again from the history');

    // Narrow screens: the same report, history behind its button.
    await page.setViewportSize({ width: 420, height: 900 });
    await shot('narrow');
    if (problems.length > 0)
      fail(problems.join('\n'));
  } catch (e) {
    // What the page showed when it failed.
    if (page) {
      const path = join(artifacts, 'page_test-failure.png');
      await page.screenshot({ path, fullPage: true }).then(() => log(`screenshot ${path}`), () => {});
    }
    if (problems.length > 0 && e instanceof Error)
      e.message += `\nalso: ${problems.join('\n')}`;
    throw e;
  } finally {
    await browser.close();
  }
}

run_test('page_test', main);
