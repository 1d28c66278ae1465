#!/usr/bin/env node
// Browser test of the web page of `quarry serve`, in headless Chromium (the
// Debian package) driven by playwright-core, against the real server:
//
//   node tests/e2e/page_test.mjs [--scenario NAME] [path/to/quarry]
//        (or $QUARRY_EXE; NAME is offline, model, token, reflective, resume,
//        uploads or all, the default)
//
// offline  `quarry serve` with the offline defaults (the extractive provider
//          over the example corpus): a question is asked and researched
//          live; the plan, the agent lanes with their actions and
//          intermediate reports, the sources, the report with citation chips
//          and their hover cards (title, URL, passage); both export links
//          are fetched; a follow-up is asked from the report; the history is
//          searched and the first session opened again (replayed from the
//          store); a narrow window.
// model    `quarry serve` whose model is the fake LLM server (beside `quarry`,
//          or $QUARRY_FAKE_LLM) with a script: the model asks clarifying
//          questions, they are shown again after a reload and answered in
//          the page, and the same session goes on to its report; then a
//          research whose second agent's model call never answers
//          (`stall_after_bytes: 0`) shows its sources and the first agent's
//          lane while it runs, and is cancelled: its findings so far are
//          its report, partial, with the waiting agent shown as stopped.
// token    `quarry serve` with `server.auth_token` set: the page asks for the
//          token, a wrong one is refused, the right one is kept; a research
//          runs and its export downloads with the token.
// reflective  the reflective strategy chosen in the options: the plan is a
//          live checklist, and the stored report is cited.
// resume   a server killed mid-research; a new one on the same data folder
//          shows the session interrupted, and Resume in the page completes it.
// uploads  files attached in the page: a false PDF refused, a Markdown file
//          uploaded, searched by the research, cited and opened as a source.
//
// Screenshots go to $QUARRY_TEST_ARTIFACTS (default build/test-artifacts),
// named page_test-<scenario>-<step>.png; a failed step leaves
// page_test-<scenario>-failure.png. Exits 0 when every check passed, 1 with
// the reason on any failure, on any script error or CSP violation in the
// page, and 77 (a skip, for ctest) when Chromium or the npm packages are
// missing, unless QUARRY_REQUIRE_E2E=1 is set: then that is a failure too.
//
// With tests/e2e/dev_server.mjs as the binary (a development aid) the same
// steps run against recorded packets, all on that one server; checks that
// need the real research are left out.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import {
  artifacts_dir, fail, offline_env, quarry_exe, run_test, start_fake_llm, start_quarry_serve,
  temp_dir,
} from './serve.mjs';

const chromium_path = process.env.CHROMIUM || '/usr/bin/chromium';
const chromium_args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                       '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const report_timeout = 120000;
const scenarios = ['offline', 'model', 'token', 'reflective', 'resume', 'uploads'];

function log(text) {
  process.stdout.write(`page_test: ${text}\n`);
}

function parse_args(argv) {
  const rest = [];
  let scenario = 'all';
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--scenario' && i + 1 < argv.length)
      scenario = argv[++i];
    else if (a.startsWith('--scenario='))
      scenario = a.slice('--scenario='.length);
    else
      rest.push(a);
  }
  if (scenario !== 'all' && !scenarios.includes(scenario)) {
    process.stderr.write(`page_test: unknown scenario "${scenario}" (${scenarios.join(', ')} or all)\n`);
    process.exit(2);
  }
  return { scenario, rest };
}

// Chromium and playwright-core, or the reason they cannot be used. Without
// them the test is skipped (exit 77), unless QUARRY_REQUIRE_E2E=1 makes
// that a failure.
async function prerequisites() {
  const missing = [];
  if (!existsSync(chromium_path))
    missing.push(`Chromium (${chromium_path})`);
  let playwright = null;
  try {
    playwright = await import('playwright-core');
  } catch {
    missing.push('the npm package playwright-core');
  }
  if (missing.length === 0)
    return playwright;
  const text = `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} missing: run scripts/e2e-setup`;
  if (process.env.QUARRY_REQUIRE_E2E === '1') {
    process.stderr.write(`page_test: FAILED: ${text} (QUARRY_REQUIRE_E2E=1)\n`);
    process.exit(1);
  }
  process.stdout.write(`page_test: skipped: ${text}\n`);
  process.exit(77);
}

// -- the page -------------------------------------------------------------------

async function state_of(page) {
  return page.locator('#session-state').getAttribute('data-state').catch(() => null);
}

// Waits for the session badge to show `wanted` once the event stream has
// ended (every packet is shown); fails with what the page shows instead.
async function wait_for_state(page, wanted, timeout) {
  try {
    await page.waitForSelector(`#session[data-stream="ended"] #session-state[data-state="${wanted}"]`, { timeout });
  } catch {
    const state = await state_of(page);
    const errors = await page.locator('#errors').innerText().catch(() => '');
    fail(`the session did not reach "${wanted}" within ${timeout / 1000} s: it shows "${state}"`
         + (errors ? `; errors on the page: ${errors}` : ''));
  }
}

function session_id_of(page) {
  return decodeURIComponent(new URL(page.url()).hash.replace('#/research/', ''));
}

async function ask(page, question, { clarify = false } = {}) {
  await page.waitForSelector('#ask-form', { state: 'visible' });
  if (await page.locator('#ask-options').isHidden())
    await page.click('#ask-options-toggle');
  if (clarify)
    await page.check('#opt-clarify');
  else
    await page.uncheck('#opt-clarify');
  await page.fill('#question', question);
  const before = page.url();
  await page.click('#ask-submit');
  try {
    await page.waitForURL((url) => url.href !== before && /#\/research\/[A-Za-z0-9_-]+$/.test(url.href),
                          { timeout: 30000 });
  } catch {
    const err = await page.locator('#ask-error').innerText().catch(() => '');
    fail(`asking "${question}" opened no session${err ? `: the page says "${err}"` : ''}`);
  }
  const id = session_id_of(page);
  log(`asked "${question}": session ${id}`);
  if ((await page.locator('#session-question').innerText()).trim() !== question)
    fail(`the session's heading does not show the question "${question}"`);
  return id;
}

async function count(page, selector) {
  return page.locator(selector).count();
}

// `cancelled`: agents that had not reported may show as stopped.
async function check_report_page(page, { min_report = 100, cancelled = false } = {}) {
  const steps = await count(page, '#plan li');
  if (steps < 1)
    fail('the plan is not shown (#plan has no steps)');
  const lanes = await count(page, '[data-testid="agent-lane"]');
  if (lanes < 1)
    fail('no agent lane is shown');
  // (Folded under the answer once done: read as text, not as shown.)
  const lane_task = ((await page.locator('[data-testid="lane-task"]').first().textContent()) || '').trim();
  if (!lane_task)
    fail('the first agent lane shows no task');
  const actions = await page.locator('[data-testid="lane-action"]').allTextContents();
  if (actions.some((a) => !a.trim()))
    fail(`an agent lane shows no action (${JSON.stringify(actions)})`);
  const done = await count(page, '[data-testid="agent-lane"][data-status="done"]')
    + (cancelled ? await count(page, '[data-testid="agent-lane"][data-status="stopped"]') : 0);
  if (done !== lanes)
    fail(`${lanes - done} of ${lanes} agent lanes are not ${cancelled ? 'done or stopped' : 'done'} after the report`);
  const sources = await count(page, '#sources [data-testid="source"]');
  if (sources < 1)
    fail('no source is listed');
  const shown_count = (await page.locator('#sources-count').innerText()).trim();
  if (shown_count !== String(sources))
    fail(`the sources count says "${shown_count}" but ${sources} sources are listed`);
  // The finished report is the server's rendering (the one the exports use).
  await page.waitForSelector('#report[data-rendered="final"]', { timeout: 15000 })
    .catch(async () => fail(`the report is not the server's rendering (data-rendered="${await page.locator('#report').getAttribute('data-rendered')}")`));
  const report = (await page.locator('#report').innerText()).trim();
  if (report.length < min_report)
    fail(`the report is not rendered (${report.length} characters of text)`);
  if ((await count(page, '#report h2, #report p')) < 1)
    fail('the report was not rendered as Markdown (no headings or paragraphs)');
  const chips = await count(page, '#report a.cite[data-testid="citation"]');
  // Also a cancelled research's report (its agents' findings so far) cites
  // its sources.
  if (chips < 1)
    fail('the report has no citation chips');
  if (/\[\[\d+\]\]\(/.test(report))
    fail('raw citation links ([[n]](url)) are left in the rendered report');
  if ((await count(page, '#references li')) < 1)
    fail('the report has no references list');
  // One numbering: the references, the numbered sources and the chips agree,
  // from 1 without gaps.
  const refs = await page.locator('#references li').evaluateAll((els) => els.map((e) => Number(e.value)));
  const numbered = await page.locator('#sources [data-testid="source"][data-number]').evaluateAll(
    (els) => els.map((e) => Number(e.dataset.number)));
  const chip_numbers = [...new Set(await page.locator('#report a.cite').evaluateAll(
    (els) => els.map((e) => Number(e.dataset.cite))))].sort((a, b) => a - b);
  if (JSON.stringify(refs) !== JSON.stringify(refs.map((_, i) => i + 1)))
    fail(`the references are not numbered 1 to ${refs.length} without gaps: ${JSON.stringify(refs)}`);
  if (JSON.stringify(numbered) !== JSON.stringify(refs))
    fail(`the sources panel numbers ${JSON.stringify(numbered)}, the references ${JSON.stringify(refs)}`);
  if (chip_numbers.some((n) => !refs.includes(n)))
    fail(`chips cite ${JSON.stringify(chip_numbers)}, not all in the references ${JSON.stringify(refs)}`);
  await check_no_file_urls(page);
  // Finished: the answer leads, the process is folded under it.
  if (await page.locator('#process').evaluate((e) => e.open))
    fail('"How this was researched" is open after the research finished');
  log(`plan ${steps} steps, ${lanes} agent lanes, ${sources} sources, ${chips} citation chips, ${refs.length} references`);
  return { steps, lanes, sources, chips, refs: refs.length };
}

// No file:// URL anywhere in the page (links, attributes or text).
async function check_no_file_urls(page) {
  const html = await page.evaluate(() => document.documentElement.outerHTML);
  const m = /file:\/\/[^"'<\s]{0,80}/i.exec(html);
  if (m)
    fail(`the page holds a file:// URL: ${m[0]}`);
}

// The report's top is within the first screen of a finished session, at
// the window's width and height.
async function check_answer_first(page, label) {
  await page.evaluate(() => window.scrollTo(0, 0));
  const size = page.viewportSize();
  const box = await page.locator('#report').boundingBox();
  if (!box)
    fail(`${label}: the report is not shown`);
  // Its first lines are on screen, not just its edge.
  if (box.y + 60 > size.height)
    fail(`${label}: the report starts ${Math.round(box.y)} px down, below the first screen (${size.height} px)`);
  log(`${label}: the report starts ${Math.round(box.y)} px down of ${size.height}`);
}

// Every source of the report opens in the page through the API: the text
// that was read, with the cited passage marked and scrolled into view.
async function check_sources_open(page, base, id) {
  const numbers = await page.locator('#references li').evaluateAll((els) => els.map((e) => Number(e.value)));
  let marked = 0;
  for (const n of numbers) {
    const link = page.locator(`#references li[value="${n}"] a.ref-open`);
    const href = await link.getAttribute('href');
    if (!href || !href.includes(`/v1/research/${id}/sources/${n}`))
      fail(`reference ${n} links to ${href}, not the API's source ${n}`);
    await link.scrollIntoViewIfNeeded();
    await link.click();
    await page.waitForSelector(`#source-view[open][data-n="${n}"][data-state="loaded"]`, { timeout: 15000 })
      .catch(async () => fail(`source ${n} does not open in the page: ${await page.locator('#source-view-text').innerText().catch(() => '')}`));
    const text = (await page.locator('#source-view-text').innerText()).trim();
    if (text.length < 20)
      fail(`source ${n} shows ${text.length} characters of text`);
    const marks = page.locator('#source-view [data-testid="source-passage"]');
    const snippet_only = /snippet/i.test(await page.locator('#source-view-note').innerText());
    if ((await marks.count()) > 0) {
      marked += 1;
      const current = page.locator('#source-view mark.current');
      if ((await current.count()) !== 1)
        fail(`source ${n}: no cited passage is picked out`);
      const box = await current.boundingBox();
      const view = await page.locator('#source-view-text').boundingBox();
      if (!box || !view || box.y + box.height < view.y || box.y > view.y + view.height)
        fail(`source ${n}: the cited passage is not scrolled into view`);
    } else if (!snippet_only) {
      fail(`source ${n} marks no cited passage`);
    }
    // Its own page (the link the dialog offers) shows the same marks.
    const res = await page.request.get(new URL(href, base).href);
    const body = await res.text();
    if (res.status() !== 200 || !/text\/html/.test(res.headers()['content-type'] || '') || /file:\/\//i.test(body))
      fail(`GET ${href} answered ${res.status()} ${res.headers()['content-type']}${/file:\/\//i.test(body) ? ' with a file:// URL' : ''}`);
    if ((await marks.count()) > 0 && !body.includes('<mark'))
      fail(`GET ${href} marks no passage`);
    await page.keyboard.press('Escape');
    await page.waitForSelector('#source-view:not([open])', { state: 'attached', timeout: 5000 })
      .catch(() => fail('Escape does not close the source view'));
  }
  if (marked === 0)
    fail('no source of the report shows a marked passage');
  log(`all ${numbers.length} sources open in the page; ${marked} with marked passages`);
}

async function card_text(page, testid) {
  return (await page.locator(`#citation-card [data-testid="${testid}"]`).innerText().catch(() => '')).trim();
}

// A chip's card: the source's title and location, and the passage the
// claim cites (one the API marks in that source, not its first lines).
async function check_card(page) {
  const chip = page.locator('#report a.cite').first();
  await chip.scrollIntoViewIfNeeded();
  await chip.hover();
  try {
    await page.waitForSelector('#citation-card:not([hidden])', { timeout: 5000 });
  } catch {
    fail('hovering a citation chip shows no card');
  }
  await page.waitForSelector('#citation-card [data-testid="card-passage"]:not(.card-empty)', { timeout: 10000 })
    .catch(() => fail('the citation card shows no cited passage'));
  const title = await card_text(page, 'card-title');
  const url = await card_text(page, 'card-url');
  const passage = await card_text(page, 'card-passage');
  if (!title || /^Source \d+$/.test(title))
    fail(`the citation card shows no source title ("${title}")`);
  if (!url)
    fail('the citation card shows no location');
  const locations = await page.locator('#sources [data-testid="source"] .where').allInnerTexts();
  if (!locations.some((u) => u.trim() === url))
    fail(`the citation card's location "${url}" is not that of a listed source (${JSON.stringify(locations)})`);
  const n = Number(await chip.getAttribute('data-cite'));
  const id = session_id_of(page);
  const res = await page.request.get(new URL(`v1/research/${id}/sources/${n}`, page.url()).href);
  if (res.status() !== 200)
    fail(`GET /v1/research/${id}/sources/${n} answered ${res.status()}`);
  const src = await res.json();
  const bytes = Buffer.from(src.text || '', 'utf8');
  const flat = (x) => x.replace(/\s+/g, ' ').trim();
  const marked = (src.passages || []).map((p) => flat(bytes.subarray(p.begin, p.end).toString('utf8')));
  if (!marked.includes(flat(passage)))
    fail(`the card's passage "${passage.slice(0, 80)}" is not a passage the API gives for source ${n}`);
  // The card is inside the window.
  const box = await page.locator('#citation-card').boundingBox();
  const size = page.viewportSize();
  if (!box || box.x < 0 || box.y < 0 || box.x + box.width > size.width || box.y + box.height > size.height)
    fail(`the citation card is not inside the window (${JSON.stringify(box)})`);
  log(`citation card: "${title}", ${url}, cited passage of ${passage.length} characters`);
}

async function hide_card(page) {
  await page.mouse.move(5, 5);
  await page.waitForSelector('#citation-card', { state: 'hidden', timeout: 5000 })
    .catch(() => fail('the citation card stays after the pointer left its chip'));
}

// An agent's intermediate report has chips of its own numbering; its card
// names one of that agent's sources.
async function check_lane_card(page) {
  if (!(await page.locator('#process').evaluate((e) => e.open)))
    await page.click('#process > summary');
  const details = page.locator('[data-testid="agent-lane"] [data-testid="lane-report"]:not([hidden])').first();
  if ((await details.count()) === 0)
    fail('no agent lane offers its intermediate report');
  await details.locator('summary').click();
  const chip = details.locator('a.cite').first();
  await chip.waitFor({ state: 'visible', timeout: 5000 })
    .catch(() => fail('the first agent\'s intermediate report shows no citation chips'));
  await chip.scrollIntoViewIfNeeded();
  await chip.hover();
  await page.waitForSelector('#citation-card:not([hidden])', { timeout: 5000 })
    .catch(() => fail('hovering a chip of an intermediate report shows no card'));
  const title = await card_text(page, 'card-title');
  const titles = await page.locator('#sources [data-testid="source"] .source-head').allInnerTexts();
  if (!titles.some((t) => t.includes(title)))
    fail(`the card of an intermediate report's chip names "${title}", which is not a listed source`);
  await details.locator('summary').click();
  await hide_card(page);
  await page.click('#process > summary');
}

// Every export link is shown and answers with the report; the PDF and the
// DOCX (made by the server with Chromium and pandoc) download from the page.
async function check_exports(page, base, id) {
  const types = {
    md: 'text/markdown',
    html: 'text/html',
    pdf: 'application/pdf',
    docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  };
  const magic = { pdf: '%PDF-', docx: 'PK\x03\x04' };
  const report_words = (await page.locator('#report p').first().innerText()).trim().split(/\s+/).slice(0, 3);
  const heading = ((await page.locator('#report h2').first().textContent()) || '').trim();
  for (const format of ['md', 'html', 'pdf', 'docx']) {
    const link = page.locator(`#export-${format}`);
    if (!(await link.isVisible()))
      fail(`the export link for ${format} is not shown after the report`);
    const href = await link.getAttribute('href');
    if (!href.endsWith(`/v1/research/${id}/report?format=${format}`))
      fail(`the ${format} export links to ${href}`);
    const res = await page.request.get(new URL(href, base).href);
    if (res.status() !== 200)
      fail(`GET ${href} answered ${res.status()}`);
    const type = res.headers()['content-type'] || '';
    if (!type.startsWith(types[format]))
      fail(`GET ${href} answered with the type "${type}", not ${types[format]}`);
    if (magic[format]) {
      const [download] = await Promise.all([
        page.waitForEvent('download', { timeout: 60000 }),
        link.click(),
      ]).catch(() => fail(`the ${format} export downloads nothing`));
      const bytes = readFileSync(await download.path());
      if (download.suggestedFilename() !== `quarry-${id}.${format}`
          || bytes.subarray(0, magic[format].length).toString('latin1') !== magic[format])
        fail(`the ${format} export downloaded "${download.suggestedFilename()}" with ${bytes.length} bytes that are no ${format}`);
      // Read back as a person's tools would (poppler's pdftotext, pandoc;
      // scripts/setup --exports installs both): the report's first heading
      // and its citations are in the document.
      const text = read_back(format, await download.path());
      if (heading && !text.replace(/\s+/g, ' ').includes(heading))
        fail(`the ${format} export read back does not hold the heading "${heading}"`);
      if (!/\[1\]/.test(text))
        fail(`the ${format} export read back has no citation [1]`);
      continue;
    }
    const body = await res.text();
    if (!report_words.every((w) => body.includes(w.replace(/[*_`]/g, ''))))
      fail(`the ${format} export does not hold the report's first words (${report_words.join(' ')})`);
  }
  log('every export link answers with the report; the PDF and the DOCX download');
}

// The text of a downloaded PDF (pdftotext) or DOCX (pandoc to plain text).
function read_back(format, file) {
  const [command, args] = format === 'pdf'
    ? ['pdftotext', ['-layout', file, '-']]
    : ['pandoc', ['--from', 'docx', '--to', 'plain', '--wrap', 'none', file]];
  try {
    return execFileSync(command, args, { encoding: 'utf8', timeout: 30000, maxBuffer: 16 << 20 });
  } catch (e) {
    return fail(`the ${format} export could not be read back with ${command}: ${e.message}`);
  }
}

// The history: search for `query`, find session `id`, open it.
async function open_from_history(page, base, query, id, { absent = null } = {}) {
  await page.goto(`${base}#/`);
  await page.waitForSelector('#ask-form', { state: 'visible' });
  if (await page.locator('#history-toggle').isVisible())
    await page.click('#history-toggle');
  await page.fill('#history-search', query);
  await page.waitForSelector(`#history-list[data-query="${query}"]`, { timeout: 15000 })
    .catch(() => fail(`the history shows no results for the search "${query}"`));
  const item = page.locator(`#history-list [data-testid="history-item"][data-id="${id}"]`);
  try {
    await item.waitFor({ state: 'visible', timeout: 15000 });
  } catch {
    const shown = await page.locator('#history-list').innerText().catch(() => '');
    fail(`searching the history for "${query}" does not list session ${id}; it lists: ${shown || 'nothing'}`);
  }
  if (absent && await count(page, `#history-list [data-testid="history-item"][data-id="${absent}"]`) > 0)
    fail(`the history search "${query}" lists session ${absent}, whose question does not match`);
  return item;
}

// -- the browser ------------------------------------------------------------------

// A fresh Chromium profile and a page whose script errors and console
// errors (CSP violations included) are collected in `problems`.
async function open_browser(playwright, problems) {
  const profile = temp_dir('quarry-e2e-chromium-');
  const browser = await playwright.chromium.launchPersistentContext(profile, {
    executablePath: chromium_path,
    headless: true,
    args: chromium_args,
    viewport: { width: 1280, height: 800 },
    reducedMotion: 'reduce',
    acceptDownloads: true,
  }).catch((e) => fail(`Chromium (${chromium_path}) did not start: ${e.message}`));
  const watch = (page) => {
    page.on('pageerror', (e) => problems.push(`script error in the page: ${e.message}`));
    page.on('console', (m) => {
      // Failed requests are checked where they matter (a 401 is expected
      // before the token is given); anything else the page logs as an
      // error is a failure.
      if (m.type() === 'error' && !/Failed to load resource/.test(m.text()))
        problems.push(`console error in the page: ${m.text()}`);
    });
    return page;
  };
  browser.on('page', watch);
  const page = watch(browser.pages()[0] || await browser.newPage());
  return { browser, page };
}

// -- scenarios -----------------------------------------------------------------------

// A research with the offline defaults, watched live; follow-up; history.
async function offline_scenario(t) {
  const { exe, page, shot } = t;
  const server = await start_quarry_serve(exe, { env: offline_env });
  log(`offline server at ${server.base}`);
  const first_question = 'What is the example corpus about?';
  await page.goto(server.base);
  // What the server researches with is shown before asking.
  await page.waitForSelector('#server-info:not([hidden])', { timeout: 15000 })
    .catch(() => fail('the page does not show what the server researches with'));
  const with_what = (await page.locator('#server-summary').innerText()).trim();
  if (!/no model/.test(with_what))
    fail(`the offline server's settings do not say "no model": "${with_what}"`);
  await page.click('#server-summary');
  const settings = await page.locator('#server-settings').innerText();
  if (!/Tools/.test(settings) || !/Default strategy/.test(settings))
    fail(`the server's settings do not list its tools and defaults: "${settings}"`);
  const first = await ask(page, first_question);
  await wait_for_state(page, 'completed', report_timeout);
  const seen = await check_report_page(page);
  await check_answer_first(page, 'a finished session at 1280 px');
  const stats = await page.locator('#stats').innerText();
  if (!/no model/.test(stats) || /Tokens/.test(stats))
    fail(`the offline session's numbers do not say "no model" instead of tokens: "${stats}"`);
  await check_sources_open(page, server.base, first);
  await check_exports(page, server.base, first);
  if (await page.locator('#cancel').isVisible())
    fail('the Cancel button is shown after the research completed');
  await shot('report', { fullPage: true });
  await check_card(page);
  await shot('citation-card');
  await hide_card(page);
  await check_lane_card(page);

  // A follow-up, asked under the report.
  const follow_question = 'Which of these sources talk about noise?';
  const follow_form = page.locator('#follow-up-form');
  if (!(await follow_form.isVisible()))
    fail('the follow-up form is not shown under a completed report');
  await page.fill('#follow-up-question', follow_question);
  await page.click('#follow-up-submit');
  await page.waitForURL((url) => /#\/research\/[A-Za-z0-9_-]+$/.test(url.href) && !url.href.endsWith(first),
                        { timeout: 30000 })
    .catch(async () => fail(`the follow-up opened no session: ${await page.locator('#follow-up-error').innerText()}`));
  const child = session_id_of(page);
  await wait_for_state(page, 'completed', report_timeout);
  if ((await page.locator('#session-question').innerText()).trim() !== follow_question)
    fail('the follow-up session does not show its question');
  const parent_link = page.locator('#session-parent-link');
  if (!(await parent_link.isVisible()) || (await parent_link.getAttribute('href')) !== `#/research/${first}`)
    fail(`the follow-up session ${child} does not link to the session it follows (${first})`);
  await check_report_page(page);
  log(`follow-up ${child} of ${first} completed`);

  // History: find the first research by search and open it again.
  const item = await open_from_history(page, server.base, 'example corpus', first, { absent: child });
  await shot('history');
  await item.click();
  await page.waitForURL(new RegExp(`#/research/${first}$`));
  await wait_for_state(page, 'completed', 60000);
  const replayed = await check_report_page(page);
  if (replayed.chips !== seen.chips || replayed.sources !== seen.sources || replayed.lanes !== seen.lanes)
    fail(`the replayed session differs from the live one: ${replayed.chips} chips, ${replayed.sources} sources and `
         + `${replayed.lanes} lanes against ${seen.chips}, ${seen.sources} and ${seen.lanes}`);
  if (!(await page.locator('#session-state').innerText()).includes('Completed'))
    fail('the replayed session is not shown as completed');
  // The follow-up is listed under its parent's question in the full list.
  await page.fill('#history-search', '');
  await page.waitForSelector(`#history-list [data-testid="history-item"][data-id="${child}"]`, { timeout: 15000 })
    .catch(() => fail('the history without a search does not list the follow-up'));
  log('opened the first session again from the history');

  // Narrow screens (a phone, 390 px): the answer first too; the history
  // behind its button.
  await page.setViewportSize({ width: 390, height: 844 });
  await check_answer_first(page, 'a finished session at 390 px');
  if (!(await page.locator('#history-toggle').isVisible()))
    fail('the history button is not shown on a narrow screen');
  await shot('narrow');
  await check_sources_open(page, server.base, first);
  await shot('narrow-source');
  await page.click('#history-toggle');
  await page.waitForSelector('body.history-open #history-list [data-testid="history-item"]', { timeout: 5000 })
    .catch(() => fail('the history button does not show the history on a narrow screen'));
  await shot('narrow-history');
  await page.keyboard.press('Escape');
  await page.setViewportSize({ width: 1280, height: 800 });

  // Delete from the history: a second click confirms; the session is gone.
  const child_item = await open_from_history(page, server.base, 'noise', child);
  const del = page.locator(`#history-list li:has([data-id="${child}"]) [data-action="delete"]`);
  await del.click();
  if (!/for good/.test(await del.innerText()))
    fail('deleting from the history does not ask to confirm');
  await del.click();
  await child_item.waitFor({ state: 'detached', timeout: 15000 })
    .catch(() => fail('the deleted session stays in the history'));
  const gone = await page.request.get(`${server.base}v1/research/${child}`);
  if (gone.status() !== 404)
    fail(`GET of the deleted session answered ${gone.status()}, not 404`);
  log(`deleted ${child} from the history`);
}

const clarify_marker = 'clarification step';
const plan_marker = 'You are the planner';
const orchestrator_marker = 'You are the orchestrator';
const agent_marker = 'careful, precise research agent';
const agent_report_marker = 'finished its research';
const final_marker = 'You write the final answer';

function rule(marker, respond, extra = {}) {
  return { match: { system_contains: marker, ...extra }, respond };
}

function tool_calls(calls) {
  return { tool_calls: calls.map(([name, args]) => ({ name, arguments: args })) };
}

// The model's script: clarifying questions for the first question; two
// agents for each research, each searching once, then reporting; for the
// research that is cancelled, the second agent's first call never answers.
function model_script(clarified, cancelled) {
  return [
    rule(clarify_marker, { text: '1. Which climate zone is the house in?\n2. Is it a new build?' },
         { message_contains: clarified, times: 1 }),
    { ...rule(agent_marker, { text: 'never' }, { message_contains: '(held)' }), stall_after_bytes: 0 },
    rule(plan_marker, { text: '1. Efficiency in the cold\n2. Defrost cycles' }),
    rule(orchestrator_marker, tool_calls([
      ['research_agent', { task: 'Noise levels of heat pumps at night.' }],
      ['research_agent', { task: 'Night-time noise limits (held).' }],
    ]), { message_contains: cancelled, times: 1 }),
    rule(orchestrator_marker, tool_calls([
      ['research_agent', { task: 'Why efficiency falls in the cold.' }],
      ['research_agent', { task: 'How defrost cycles work.' }],
    ]), { times: 1 }),
    rule(orchestrator_marker, tool_calls([['generate_report', {}]])),
    { match: { system_contains: agent_marker, message_contains: '"document"' },
      respond: tool_calls([['generate_report', {}]]) },
    rule(agent_marker, tool_calls([['internal_search', { queries: ['heat pump defrost cold'] }]])),
    rule(agent_report_marker, { text: 'Heat pump efficiency falls as the outdoor air gets colder [1]. '
                                      + 'Defrost cycles remove frost from the outdoor coil [2].' }),
    rule(final_marker, { text: '## Heat pumps in the cold\n\nCold air lowers the efficiency of a heat pump [1]. '
                               + 'Defrosting clears the outdoor coil [2].' }),
  ];
}

// Clarifying questions answered in the page; a research cancelled while
// its second agent waits for the model.
async function model_scenario(t) {
  const { exe, dev, page, shot } = t;
  const clarified = 'How well do heat pumps work in cold climates?';
  const cancelled = 'How loud are heat pumps at night?';
  const answer = 'A cold Nordic climate, and an old house.';
  let server;
  let llm = null;
  if (dev) {
    server = await start_quarry_serve(exe, { env: offline_env, extra_args: ['--delay-ms', '40'] });
  } else {
    llm = await start_fake_llm(exe, model_script(clarified, cancelled));
    server = await start_quarry_serve(exe, {
      env: { ...offline_env, OPENAI_API_KEY: 'e2e-test-key', OPENAI_BASE_URL: llm, OPENAI_MODEL: 'fake-model' },
    });
  }
  log(`server at ${server.base}${llm ? ` (model: the fake LLM server at ${llm})` : ''}`);

  // 1. Clarifying questions, answered in the page.
  await page.goto(server.base);
  const first = await ask(page, clarified, { clarify: true });
  await wait_for_state(page, 'clarification', 60000);
  const panel = page.locator('#clarification');
  if (!(await panel.isVisible()))
    fail('the clarifying questions are not shown');
  const questions = (await page.locator('#clarify-questions').innerText()).trim();
  if (!dev && !questions.includes('Which climate zone is the house in?'))
    fail(`the clarifying questions shown are not the model's: "${questions}"`);
  if (await page.locator('#cancel').isVisible())
    fail('the Cancel button is shown while the session waits for answers');
  await shot('clarification');
  // The questions wait in the store: a reload replays them.
  await page.reload();
  await wait_for_state(page, 'clarification', 30000);
  if (!(await panel.isVisible()))
    fail('the clarifying questions are not shown again after a reload');
  await page.fill('#clarify-answer', answer);
  await page.click('#clarify-send');
  await wait_for_state(page, 'completed', report_timeout);
  if (await panel.isVisible())
    fail('the clarifying questions are still shown after the research completed');
  if (session_id_of(page) !== first)
    fail('answering the questions left the session');
  const seen = await check_report_page(page, { min_report: 40 });
  if (!dev && (seen.lanes !== 2 || seen.steps !== 2))
    fail(`the scripted research had 2 plan steps and 2 agents; the page shows ${seen.steps} and ${seen.lanes}`);
  await check_card(page);
  await hide_card(page);
  await check_lane_card(page);
  await shot('answered', { fullPage: true });
  if (llm) {
    const requests = await (await fetch(llm.replace(/\/v1$/, '/_fake/requests'))).json();
    if (!requests.some((r) => JSON.stringify(r.body || '').includes(answer)))
      fail('the answer given in the page did not reach the model');
  }
  log(`session ${first}: questions answered, report written`);

  // 2. A research that is cancelled while it runs.
  await page.goto(`${server.base}#/`);
  const second = await ask(page, cancelled);
  await page.waitForSelector('#cancel:not([hidden])', { timeout: 30000 })
    .catch(async () => fail(`the Cancel button is not shown while the research runs (state "${await state_of(page)}")`));
  if (!dev) {
    // Sources arrive while the research runs: the first agent has finished,
    // the second waits for the model.
    await page.waitForSelector('[data-testid="agent-lane"][data-status="done"]', { timeout: 60000 })
      .catch(() => fail('the first agent of the running research is not shown as done'));
    await page.waitForSelector('#sources [data-testid="source"]', { timeout: 30000 })
      .catch(() => fail('no source is listed while the research runs'));
    const queries = await page.locator('[data-testid="agent-lane"][data-status="done"] .lane-queries').innerText();
    if (!queries.includes('heat pump defrost cold'))
      fail(`the finished agent's lane does not show its search ("${queries}")`);
    const waiting = page.locator('[data-testid="agent-lane"]:not([data-status="done"])');
    if ((await waiting.count()) !== 1)
      fail(`one agent should still be working; ${await waiting.count()} are`);
    const action = (await waiting.locator('[data-testid="lane-action"]').innerText()).trim();
    if (!action)
      fail('the working agent\'s lane shows no action');
    const state = await state_of(page);
    if (state !== 'researching')
      fail(`the running research shows "${state}", not researching`);
    log(`while it runs: ${await count(page, '#sources [data-testid="source"]')} sources, the working agent shows "${action}"`);
    await shot('running');
  }
  await page.click('#cancel');
  await wait_for_state(page, 'cancelled', 60000);
  if (await page.locator('#cancel').isVisible())
    fail('the Cancel button is still shown after the research was cancelled');
  const notices = await page.locator('#notices').innerText();
  if (!/cancelled/i.test(notices))
    fail(`the page does not say the research was cancelled (notices: "${notices}")`);
  if (!dev && await count(page, '[data-testid="agent-lane"][data-status="stopped"]') !== 1)
    fail('the agent whose model never answered is not shown as stopped after the cancel');
  if (!dev) {
    // The findings so far became the report: shown, exported, partial.
    await check_report_page(page, { min_report: 40, cancelled: true });
    await check_exports(page, server.base, second);
    const json = await (await page.request.get(`${server.base}v1/research/${second}/report?format=json`)).json();
    if (json.partial !== true)
      fail(`the report of the cancelled research is not marked partial: ${JSON.stringify(json).slice(0, 200)}`);
  }
  log(`session ${second} cancelled`);
  await shot('cancelled', { fullPage: true });
}

// The access token: asked for, a wrong one refused, the right one kept.
async function token_scenario(t) {
  const { exe, dev, page, shot } = t;
  const token = 'e2e-secret-token';
  const server = await start_quarry_serve(exe, {
    env: offline_env,
    extra_args: dev ? ['--token', token] : ['--set', `server.auth_token=${token}`],
  });
  log(`server with a token at ${server.base}`);
  await page.goto(server.base);
  await page.waitForSelector('#auth-panel:not([hidden])', { timeout: 15000 })
    .catch(() => fail('the page does not ask for the access token of a server that needs one'));
  await shot('asks-token');
  await page.fill('#auth-token', 'wrong-token');
  await page.click('#auth-save');
  await page.waitForSelector('#auth-panel:not([hidden]) #auth-error:not([hidden])', { timeout: 15000 })
    .catch(() => fail('the page does not say that a wrong token was refused'));
  await shot('wrong-token');
  await page.fill('#auth-token', token);
  await page.click('#auth-save');
  await page.waitForSelector('#auth-panel', { state: 'hidden', timeout: 15000 })
    .catch(() => fail('the page still asks for the token after the right one'));
  if (!(await page.locator('#history-error').isHidden()))
    fail(`the history shows an error with the right token: ${await page.locator('#history-error').innerText()}`);
  const id = await ask(page, 'What is the example corpus about?');
  await wait_for_state(page, 'completed', report_timeout);
  await check_report_page(page);
  if (await page.locator('#auth-panel').isVisible())
    fail('the page asked for the token again during the research');
  // A plain link cannot carry the token: the page fetches the export.
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: 15000 }),
    page.click('#export-md'),
  ]).catch(() => fail('the Markdown export downloads nothing when the server needs a token'));
  const file = await download.path();
  const text = readFileSync(file, 'utf8');
  if (text.length < 100 || download.suggestedFilename() !== `quarry-${id}.md`)
    fail(`the export downloaded "${download.suggestedFilename()}" with ${text.length} characters`);
  // Without the token the API refuses; the page keeps it across a reload.
  const refused = await page.request.get(`${server.base}v1/research`);
  if (refused.status() !== 401)
    fail(`GET /v1/research without the token answered ${refused.status()}, not 401`);
  await page.reload();
  await page.waitForSelector(`#history-list [data-testid="history-item"][data-id="${id}"]`, { timeout: 15000 })
    .catch(() => fail('after a reload the page does not use the kept token for the history'));
  if (await page.locator('#auth-panel').isVisible())
    fail('the page asks for the token again after a reload');
  await shot('with-token');
  log(`session ${id} researched and exported with the token`);
}

// The reflective strategy, offline: the plan is a checklist whose steps are
// ticked off while the research runs, and the report is cited.
async function reflective_scenario(t) {
  const { exe, page, shot } = t;
  const server = await start_quarry_serve(exe, { env: offline_env });
  await page.goto(server.base);
  await page.waitForSelector('#ask-form', { state: 'visible' });
  if (await page.locator('#ask-options').isHidden())
    await page.click('#ask-options-toggle');
  await page.selectOption('#opt-strategy', 'reflective');
  await page.selectOption('#opt-depth', 'medium');
  await ask(page, 'Why does a heat pump lose efficiency in cold weather?');
  // While it runs: at some point a step is in progress and others wait.
  const statuses = new Set();
  const until = Date.now() + report_timeout;
  while (Date.now() < until) {
    for (const s of await page.locator('[data-testid="plan-step"]').evaluateAll(
      (els) => els.map((e) => e.getAttribute('data-status'))))
      statuses.add(s);
    if ((await state_of(page)) === 'completed')
      break;
    await page.waitForTimeout(50);
  }
  await wait_for_state(page, 'completed', report_timeout);
  const steps = await page.locator('[data-testid="plan-step"]').evaluateAll(
    (els) => els.map((e) => e.getAttribute('data-status')));
  if (steps.length < 3)
    fail(`a medium-depth plan shows ${steps.length} steps, not 3 or more`);
  if (steps.some((s) => s !== 'completed' && s !== 'skipped'))
    fail(`after the report, plan steps are still ${JSON.stringify(steps)}`);
  // An offline research can end between two looks (50 ms): the steps the
  // page shows once it has ended count as shown too.
  for (const s of steps)
    statuses.add(s);
  if (!statuses.has('completed'))
    fail('no step was ever shown as completed');
  // The stored report replaces the streamed one once it is loaded.
  await page.waitForSelector('#report[data-rendered="final"]', { timeout: 15000 })
    .catch(async () => fail(`the reflective report is not the stored one (data-rendered="${await page.locator('#report').getAttribute('data-rendered')}")`));
  if ((await count(page, '#report a.cite[data-testid="citation"]')) < 1)
    fail('the reflective report has no citation chips');
  log(`reflective: ${steps.length} steps, statuses seen ${JSON.stringify([...statuses])}`);
  await shot('reflective', { fullPage: true });
}

// A research whose server is killed while an agent waits for the model:
// a new server on the same data folder lists it as interrupted, and Resume
// in the page completes it.
async function resume_scenario(t) {
  const { exe, dev, page, shot } = t;
  if (dev)
    return log('resume: needs the real server (skipped with the development server)');
  const question = 'How loud are heat pumps at night?';
  const held = await start_fake_llm(exe, model_script('unused', question));
  const first = await start_quarry_serve(exe, {
    env: { ...offline_env, OPENAI_API_KEY: 'e2e-test-key', OPENAI_BASE_URL: held, OPENAI_MODEL: 'fake-model' },
  });
  await page.goto(first.base);
  const id = await ask(page, question);
  await page.waitForSelector('[data-testid="agent-lane"][data-status="done"]', { timeout: 60000 })
    .catch(() => fail('the first agent of the research to resume did not finish'));
  // Killed as a crash would: no chance to mark the session interrupted.
  first.proc.child.kill('SIGKILL');
  await first.proc.exited;
  const answering = await start_fake_llm(exe, model_script('unused', question).filter((r) => !('stall_after_bytes' in r)));
  const second = await start_quarry_serve(exe, {
    data: first.data,
    env: { ...offline_env, OPENAI_API_KEY: 'e2e-test-key', OPENAI_BASE_URL: answering, OPENAI_MODEL: 'fake-model' },
  });
  await page.goto(`${second.base}#/research/${id}`);
  await page.waitForSelector('#session-state[data-state="interrupted"]', { timeout: 30000 })
    .catch(async () => fail(`the killed research is not shown as interrupted ("${await state_of(page)}")`));
  const item = await open_from_history(page, second.base, 'heat pumps at night', id);
  if (!(await item.evaluate((e) => e.closest('li').querySelector('[data-action="resume"]') !== null)))
    fail('the history offers no Resume for the interrupted research');
  await item.click();
  await page.waitForSelector('#resume:not([hidden])', { timeout: 15000 })
    .catch(() => fail('the interrupted research offers no Resume button'));
  await shot('interrupted');
  await page.click('#resume');
  await wait_for_state(page, 'completed', report_timeout);
  await check_report_page(page, { min_report: 40 });
  const errors = (await page.locator('#errors').innerText()).trim();
  if (errors)
    fail(`the resumed research shows errors: "${errors}"`);
  const stats = await page.locator('#stats').innerText();
  if (!/fake-model/.test(stats) || !/Tokens/.test(stats))
    fail(`the session's numbers do not name its model and tokens: "${stats}"`);
  log(`session ${id}: interrupted by a kill, resumed from the page, completed`);
  await shot('resumed', { fullPage: true });
}

// Files attached in the page are uploaded, checked, searched by that
// research and cited like other documents.
async function uploads_scenario(t) {
  const { exe, dev, page, shot } = t;
  if (dev)
    return log('uploads: needs the real server (skipped with the development server)');
  const server = await start_quarry_serve(exe, { env: offline_env });
  await page.goto(server.base);
  await page.waitForSelector('#ask-form', { state: 'visible' });
  const fact = 'The Brightwater ground loop at Tallinn Harbour was drilled to a depth of 212 metres in 2019.';
  const note = `# Brightwater ground loop\n\n${fact} It heats the harbour office through the winter.\n`;
  await page.setInputFiles('#attach-input', [
    { name: 'brightwater-notes.md', mimeType: 'text/markdown', buffer: Buffer.from(note) },
    { name: 'not-a-pdf.pdf', mimeType: 'application/pdf', buffer: Buffer.from('plain text, not a PDF') },
  ]);
  await page.waitForSelector('[data-testid="upload"][data-state="ready"]', { timeout: 15000 })
    .catch(async () => fail(`the Markdown file was not uploaded: ${await page.locator('#uploads').innerText()}`));
  await page.waitForSelector('[data-testid="upload"][data-state="failed"]', { timeout: 15000 })
    .catch(() => fail('a .pdf that is not a PDF was not refused'));
  const refused = (await page.locator('[data-testid="upload"][data-state="failed"]').innerText()).trim();
  log(`a false PDF is refused: "${refused}"`);
  // A failed file stops the question until it is removed.
  await page.fill('#question', 'How deep was the Brightwater ground loop drilled?');
  await page.uncheck('#opt-clarify').catch(async () => {
    await page.click('#ask-options-toggle');
    await page.uncheck('#opt-clarify');
  });
  await page.click('#ask-submit');
  await page.waitForSelector('#ask-error:not([hidden])', { timeout: 5000 })
    .catch(() => fail('a question with a refused file attached was sent'));
  await page.click('[data-testid="upload"][data-state="failed"] button[data-remove]');
  await shot('attached');
  const before = page.url();
  await page.click('#ask-submit');
  await page.waitForURL((url) => url.href !== before && /#\/research\//.test(url.href), { timeout: 30000 })
    .catch(async () => fail(`the question with a file opened no session: ${await page.locator('#ask-error').innerText()}`));
  const id = session_id_of(page);
  await wait_for_state(page, 'completed', report_timeout);
  await check_report_page(page, { min_report: 40 });
  const files = (await page.locator('#session-files').innerText()).trim();
  if (!files.includes('brightwater-notes.md'))
    fail(`the session does not name its file ("${files}")`);
  const refs = await page.locator('#references li').allInnerTexts();
  const k = refs.findIndex((r) => r.includes('brightwater-notes.md') || r.includes('Brightwater ground loop'));
  if (k < 0)
    fail(`the report does not cite the attached file: ${JSON.stringify(refs)}`);
  const n = await page.locator('#references li').nth(k).evaluate((e) => e.value);
  await page.click(`#references li[value="${n}"] a.ref-open`);
  await page.waitForSelector('#source-view[open][data-state="loaded"]', { timeout: 15000 });
  const text = await page.locator('#source-view-text').innerText();
  if (!text.includes('212 metres'))
    fail(`the attached file's text is not what the source shows: "${text.slice(0, 200)}"`);
  if (/\/uploads\/|\/sessions\//.test(await page.locator('#source-view-where').innerText()))
    fail('the attached file is shown with a folder of the server');
  await page.keyboard.press('Escape');
  log(`session ${id} cites the attached file as source ${n}`);
  await shot('cited-upload', { fullPage: true });
}

const scenario_functions = { offline: offline_scenario, model: model_scenario, token: token_scenario,
                             reflective: reflective_scenario, resume: resume_scenario,
                             uploads: uploads_scenario };

async function run_scenario(playwright, name, exe) {
  const dev = exe.endsWith('.mjs');
  const artifacts = artifacts_dir();
  mkdirSync(artifacts, { recursive: true });
  rmSync(join(artifacts, `page_test-${name}-failure.png`), { force: true });
  const problems = [];
  const { browser, page } = await open_browser(playwright, problems);
  const shot = async (step, options = {}) => {
    const path = join(artifacts, `page_test-${name}-${step}.png`);
    await page.screenshot({ path, ...options });
    log(`screenshot ${path}`);
  };
  try {
    await scenario_functions[name]({ exe, dev, page, shot });
    if (problems.length > 0)
      fail(problems.join('\n'));
    log(`scenario ${name}: ok`);
  } catch (e) {
    // What the page showed when it failed.
    const path = join(artifacts, `page_test-${name}-failure.png`);
    await page.screenshot({ path, fullPage: true }).then(() => log(`screenshot ${path}`), () => {});
    if (e instanceof Error)
      e.message = `${name}: ${e.message}${problems.length > 0 ? `\nalso: ${problems.join('\n')}` : ''}`;
    throw e;
  } finally {
    await browser.close();
  }
}

const { scenario, rest } = parse_args(process.argv.slice(2));
const playwright = await prerequisites();
run_test('page_test', async () => {
  const exe = quarry_exe(rest);
  for (const name of scenario === 'all' ? scenarios : [scenario])
    await run_scenario(playwright, name, exe);
});
