// The page of `quarry serve`: ask (with attached files), watch, answer,
// cancel, resume, delete, history, follow-up, export, and read every source
// with its cited passages. Talks to the API of docs/api.md through api.js;
// the session's view state comes from packets.js. Reports are rendered by
// the server (one Markdown renderer for the page, the HTML export and the
// PDF); html.js escapes what the page writes itself.
//
// Layout: a finished session shows the answer first (the report, then the
// follow-up form), with the plan and the agent lanes folded into "How this
// was researched" (#process); while a session runs, that section is open
// and leads until the report starts.
//
// Routes (the location's hash): `#/` asks a new question,
// `#/research/<id>` shows a session (live while it runs, replayed after).
//
// Stable hooks for tests (ids unless marked [data-testid]):
//   ask form         #ask-form, #question, #ask-options-toggle (shows
//                    #ask-options), #opt-clarify (checkbox), #opt-deadline,
//                    #opt-max-agents, #opt-strategy, #opt-mode, #opt-depth,
//                    #opt-verify, #ask-submit, #ask-error; files: #attach,
//                    #attach-input, #uploads [uploads] > [data-testid=upload]
//                    (data-state: uploading, ready, failed)
//   server info      #server-info [server-info] (a <details>: version,
//                    models by role, tools, defaults)
//   session          #session (hidden unless a session is shown;
//                    data-stream: connecting, live, replaying,
//                    reconnecting, ended (the `end` event came: every
//                    packet is shown), closed),
//                    #session-question, #session-state [session-state]
//                    (text: running, planning, researching, writing,
//                    clarification, completed, cancelled, failed,
//                    interrupted), #stats [stats], #cancel,
//                    #export-md [export-md], #export-html [export-html],
//                    #export-pdf [export-pdf], #export-docx [export-docx],
//                    #resume [resume], #delete [delete], #session-files
//   process          #process [process] (a <details>; open while running)
//   plan             #plan [plan] > li (one per step)
//   agents           #agents [agents] > [data-testid=agent-lane]
//                    (data-key="turn:tab", data-status=starting|searching|
//                    reading|thinking|writing|done|failed|stopped), inside:
//                    [lane-title], [lane-task], [lane-action],
//                    [lane-report] (a <details> with the intermediate report)
//   sources          #sources [sources] > [data-testid=source]
//                    (data-document-id, data-number once the report is
//                    done: the numbering of its references; its
//                    .source-title shows the card and opens the source),
//                    #sources-count [sources-count]
//   report           #report [report] (data-rendered: final (the
//                    stored report), live (the streaming one, rendered
//                    by the server), plain (its text until then));
//                    citation chips a.cite [data-testid=citation]
//                    (data-cite="n"); #references > li (id ref-N)
//   citation card    #citation-card [citation-card] (shown on hover or
//                    focus of a chip): [card-title], [card-url],
//                    [card-passage]
//   source view      #source-view [source-view] (a <dialog>, opened by a
//                    click on a chip, a reference or a cited source):
//                    [source-view-title], [source-view-where],
//                    [source-view-text] with [source-passage] marks
//   clarification    #clarification, #clarify-questions, #clarify-answer,
//                    #clarify-send
//   follow-up        #follow-up-form, #follow-up-question, #follow-up-submit
//   messages         #errors [errors], #notices [notices]
//   history          #history, #history-search ("/" focuses it), #history-list
//                    (data-query: the search the list shows results of) >
//                    [data-testid=history-item] (data-id, data-state),
//                    #history-more, #history-toggle (narrow screens)
//   auth             #auth-panel (shown after a 401), #auth-token,
//                    #auth-save, #auth-forget, #auth-open, #auth-error
//                    (shown when the server refused the kept token)
//   connection       #connection [connection] (connecting, live,
//                    reconnecting, or empty)

import { api_error, quarry_api, valid_duration } from './api.js';
import {
  apply_end, apply_packet, citation_card, citation_numbers, create_state, document_card,
  lane_citation_card, phase, plan_steps, session_notes, clip,
} from './packets.js';
import {
  best_passage, byte_to_index, escape_html, is_web_url, mark_passages, render_citation_card,
  safe_url, short_location,
} from './html.js';

const $ = (id) => document.getElementById(id);
const token_key = 'quarry.token';

// -- the token ----------------------------------------------------------------

let memory_token = null;

function load_token() {
  try {
    return window.localStorage.getItem(token_key) || memory_token;
  } catch {
    return memory_token;
  }
}

function save_token(token) {
  memory_token = token || null;
  try {
    if (token)
      window.localStorage.setItem(token_key, token);
    else
      window.localStorage.removeItem(token_key);
  } catch {
    // Storage may be disabled; the token then lives as long as the page.
  }
}

const api = new quarry_api({
  base: '',
  get_token: load_token,
  on_unauthorized: () => show_auth(true),
});

// `after_401`: the server refused a request (with the kept token, if any).
function show_auth(after_401) {
  const panel = $('auth-panel');
  if (!panel.hidden)
    return;
  panel.hidden = false;
  const kept = !!load_token();
  show_error($('auth-error'), after_401 && kept ? 'The server did not accept the token.' : '');
  $('auth-forget').hidden = !kept;
  $('auth-token').value = '';
  $('auth-token').focus();
}

function hide_auth() {
  $('auth-panel').hidden = true;
  $('auth-open').hidden = !load_token();
}

// -- helpers ------------------------------------------------------------------

function show_error(el, message) {
  el.textContent = message;
  el.hidden = !message;
}

function message_of(e) {
  if (e instanceof api_error) {
    if (e.status === 401)
      return 'The server needs an access token (see above).';
    if (e.status === 429)
      return `The server is busy${e.retry_after ? `; try again in ${e.retry_after} s` : ''}.`;
    return e.message || `Request failed (${e.status}).`;
  }
  return String(e && e.message ? e.message : e);
}

function format_time(iso) {
  if (typeof iso !== 'string')
    return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime()))
    return '';
  const now = Date.now();
  const s = Math.round((now - d.getTime()) / 1000);
  if (s >= 0 && s < 60)
    return 'just now';
  if (s >= 0 && s < 3600)
    return `${Math.floor(s / 60)} min ago`;
  if (s >= 0 && s < 86400)
    return `${Math.floor(s / 3600)} h ago`;
  return d.toLocaleDateString(undefined, { year: 'numeric', month: 'short', day: 'numeric' });
}

function format_tokens(n) {
  if (n < 1000)
    return String(n);
  if (n < 1e6)
    return `${(n / 1000).toFixed(1)}k`;
  return `${(n / 1e6).toFixed(2)}M`;
}

// A source's host (web) or file name (local): never a folder of the server.
function host_of(url) {
  if (!url)
    return '';
  if (is_web_url(url)) {
    try {
      return new URL(url).host;
    } catch {
      return '';
    }
  }
  return short_location(url);
}

function format_duration_ms(ms) {
  if (!Number.isFinite(ms) || ms < 0)
    return '';
  const secs = Math.round(ms / 1000);
  if (secs < 60)
    return `${secs} s`;
  if (secs < 3600)
    return `${Math.floor(secs / 60)} min ${secs % 60} s`;
  return `${Math.floor(secs / 3600)} h ${Math.floor((secs % 3600) / 60)} min`;
}

function format_bytes(n) {
  if (!Number.isFinite(n))
    return '';
  if (n < 1024)
    return `${n} B`;
  if (n < 1024 * 1024)
    return `${(n / 1024).toFixed(0)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

const state_labels = {
  idle: 'Starting',
  running: 'Running',
  planning: 'Planning',
  researching: 'Researching',
  writing: 'Writing the report',
  clarification: 'Needs your answers',
  completed: 'Completed',
  cancelled: 'Cancelled',
  failed: 'Failed',
  interrupted: 'Interrupted',
};

// (`pending`: stored, its run not started yet.)
const active_phases = new Set(['idle', 'pending', 'running', 'planning', 'researching', 'writing']);

// -- the current session --------------------------------------------------------

const view = {
  id: null,
  info: null,
  state: create_state(),
  stream: null,
  frame: 0,
  last_report_render: 0,
  report_timer: 0,
  rendered: null,
  clock: 0,
  // The finished report as the server renders it: {html, sources,
  // by_number: Map n -> source}, or null (not loaded, or none yet).
  final: null,
  final_loading: null,
  // Tries of load_final that found no report yet (409), the timer of the
  // next one, and whether a load failed otherwise (not asked again). Reset
  // for each run the page follows.
  final_tries: 0,
  final_retry: 0,
  final_failed: false,
  // The streaming report as the server last rendered it: {text, html,
  // written_of: Map shown number -> the event stream's citation number,
  // shown_of: the reverse}.
  live_html: null,
  live_request: null,
  // Sources read through the API, by number: promises of their JSON.
  source_cache: new Map(),
  // The person opened or closed #process themselves.
  process_touched: false,
};

function reset_rendered() {
  view.final = null;
  if (view.final_loading)
    view.final_loading.abort();
  view.final_loading = null;
  reset_final_tries();
  view.live_html = null;
  if (view.live_request)
    view.live_request.abort();
  view.live_request = null;
  view.live_failed = false;
  view.source_cache = new Map();
  view.process_touched = false;
  view.rendered = {
    plan: null,
    lanes: new Map(),
    sources: 0,
    sources_key: '',
    report: null,
    report_html: null,
    citations: -1,
    errors: -1,
    notices: -1,
    clarification: null,
  };
}
reset_rendered();

function reset_final_tries() {
  clearTimeout(view.final_retry);
  view.final_retry = 0;
  view.final_tries = 0;
  view.final_failed = false;
}

function close_stream() {
  if (view.stream) {
    view.stream.close();
    view.stream = null;
  }
  set_connection('');
}

function set_connection(status) {
  // While a finished session replays, "Live" would mislead.
  if (status === 'live' && view.info && !active_phases.has(view.info.state))
    status = 'replaying';
  $('session').dataset.stream = status || (view.state.end_state ? 'ended' : 'closed');
  const labels = { connecting: 'Connecting…', live: 'Live', reconnecting: 'Reconnecting…',
                   replaying: 'Loading…' };
  const el = $('connection');
  el.textContent = labels[status] || '';
  el.dataset.status = labels[status] ? status : '';
}

function replaying() {
  return !!(view.info && typeof view.info.state === 'string' && !active_phases.has(view.info.state)
            && !view.state.end_state && view.stream !== null);
}

function session_phase() {
  // A finished session's packets replay through every phase: show where it
  // ended instead.
  if (replaying())
    return view.info.state;
  const p = phase(view.state);
  if (p === 'idle' && view.info && typeof view.info.state === 'string')
    return view.info.state;
  if (view.state.packets === 0 && view.info && typeof view.info.state === 'string'
      && !view.state.end_state)
    return view.info.state;
  return p;
}

function follow(id, from) {
  close_stream();
  reset_final_tries();
  view.stream = api.events(id, {
    from,
    on_packet: (p) => {
      apply_packet(view.state, p);
      schedule();
    },
    on_end: (end) => {
      apply_end(view.state, end);
      set_connection('ended');
      schedule();
      refresh_info(id);
      load_final(id);
      load_history(true);
    },
    on_status: (s) => set_connection(s),
    on_error: (e) => {
      set_connection('');
      if (e.status !== 401)
        add_local_error(message_of(e));
      schedule();
    },
  });
}

function add_local_error(message) {
  view.state.errors.push({ message, code: 'page', lane: null });
  view.state.version += 1;
}

async function refresh_info(id) {
  try {
    const info = await api.get(id);
    if (view.id === id) {
      view.info = info;
      schedule();
    }
  } catch {
    // The header keeps what it had.
  }
}

async function open_session(id, question_hint) {
  if (view.id === id && view.stream)
    return;
  close_stream();
  view.id = id;
  view.info = question_hint ? { id, question: question_hint, state: 'running' } : null;
  view.state = create_state();
  set_connection('');
  reset_rendered();
  clear_session_dom();
  show_view('session');
  mark_history_current();
  render();
  try {
    const info = await api.get(id);
    if (view.id !== id)
      return;
    view.info = info;
    if (!active_phases.has(info.state) && info.state !== 'clarification')
      load_final(id);
  } catch (e) {
    if (view.id !== id)
      return;
    if (!(e instanceof api_error && e.status === 401))
      add_local_error(e instanceof api_error && e.status === 404
        ? 'There is no such research session.' : message_of(e));
    schedule();
    if (e instanceof api_error && (e.status === 404 || e.status === 401))
      return;
  }
  follow(id, 1);
  schedule();
}

function clear_session_dom() {
  for (const id of ['plan', 'agents', 'sources', 'report', 'references', 'errors', 'notices',
                    'clarify-questions', 'stats'])
    $(id).replaceChildren();
  $('clarify-answer').value = '';
  $('follow-up-question').value = '';
  show_error($('clarify-error'), '');
  show_error($('follow-up-error'), '');
  hide_card();
}

function show_view(which) {
  $('ask').hidden = which !== 'ask';
  $('session').hidden = which !== 'session';
  if (which === 'ask')
    document.title = 'Quarry';
}

// -- rendering ----------------------------------------------------------------

function schedule() {
  if (view.frame)
    return;
  view.frame = requestAnimationFrame(() => {
    view.frame = 0;
    render();
  });
}

function render() {
  if ($('session').hidden)
    return;
  const s = view.state;
  const p = session_phase();
  const info = view.info || {};
  const question = typeof info.question === 'string' ? info.question : '';
  const qel = $('session-question');
  if (qel.textContent !== question)
    qel.textContent = question || 'Research session';
  document.title = question ? `${clip(question, 60)} · Quarry` : 'Quarry';
  const badge = $('session-state');
  badge.textContent = state_labels[p] || p;
  badge.dataset.state = p;
  const meta = [];
  if (info.created_at)
    meta.push(`started ${format_time(info.created_at)}`);
  if (view.id)
    meta.push(view.id);
  $('session-meta').textContent = meta.join(' · ');
  const parent = $('session-parent');
  if (typeof info.parent_id === 'string' && info.parent_id) {
    parent.hidden = false;
    const link = $('session-parent-link');
    link.href = `#/research/${encodeURIComponent(info.parent_id)}`;
    link.textContent = info.parent_id;
  } else {
    parent.hidden = true;
  }

  const files = Array.isArray(info.uploads) ? info.uploads.filter((f) => f && typeof f.name === 'string') : [];
  const files_el = $('session-files');
  files_el.hidden = files.length === 0;
  const files_text = files.length ? `Files: ${files.map((f) => f.name).join(', ')}` : '';
  if (files_el.textContent !== files_text)
    files_el.textContent = files_text;

  const running = active_phases.has(p);
  $('cancel').hidden = !running || !view.id;
  $('resume').hidden = p !== 'interrupted' || !view.id;
  $('delete').hidden = running || !view.id;
  const has_report = s.report.length > 0 || !!(view.final && view.final.html !== null);
  for (const [id, format] of export_formats) {
    const el = $(id);
    el.hidden = !has_report || !view.id || running;
    if (view.id) {
      el.href = api.report_url(view.id, format);
      el.setAttribute('download', `quarry-${view.id}.${format}`);
    }
  }
  render_stats(p);
  render_messages(p);
  render_clarification(p);
  render_plan(p);
  render_lanes();
  render_process(running);
  render_sources();
  // The sources column is left out while there is nothing it could show.
  const no_side = s.sources.length === 0 && (p === 'clarification' || !running);
  $('session-side').hidden = no_side;
  $('session-grid').classList.toggle('no-side', no_side);
  render_report();
  $('follow-up').hidden = running || p === 'clarification' || !view.id || !has_report;
  tick_clock(running);
  // A re-rendered report replaced the chip the card belonged to.
  if (card_anchor && !card_anchor.isConnected)
    hide_card();
}

function tick_clock(running) {
  if (running && !view.clock) {
    view.clock = setInterval(() => render_stats(session_phase()), 1000);
  } else if (!running && view.clock) {
    clearInterval(view.clock);
    view.clock = 0;
  }
}

// The session's numbers: time, the model(s), sources, agents, calls,
// tokens and cost (the server's account once the session is done, the
// stream's while it runs). The offline extractive provider is "no model",
// without token counts.
function render_stats(p) {
  const s = view.state;
  const parts = [];
  const info = view.info || {};
  const running = active_phases.has(p);
  let ms = null;
  if (!running && Number.isFinite(info.duration_ms)) {
    ms = info.duration_ms;
  } else if (info.created_at) {
    const start = new Date(info.created_at).getTime();
    const end_iso = info.finished_at || (running ? null : info.updated_at);
    const end = end_iso ? new Date(end_iso).getTime() : Date.now();
    if (Number.isFinite(start) && Number.isFinite(end) && end >= start)
      ms = end - start;
  }
  if (ms !== null)
    parts.push(['Time', format_duration_ms(ms)]);
  const models = Array.isArray(info.models) ? info.models.filter((m) => m && typeof m === 'object') : [];
  const offline = models.length > 0 && models.every((m) => m.offline === true || m.model === null);
  const names = [...new Set(models.filter((m) => typeof m.model === 'string' && m.model).map((m) => m.model))];
  if (offline)
    parts.push(['Model', 'no model']);
  else if (names.length)
    parts.push([names.length > 1 ? 'Models' : 'Model', names.join(', ')]);
  const cited = view.final && view.final.html !== null ? view.final.sources.length : s.citations.size;
  parts.push(['Sources', String(s.sources.length)]);
  parts.push(['Cited', String(cited)]);
  parts.push(['Agents', String(s.lanes.length)]);
  if (!offline) {
    const u = !running && info.usage && typeof info.usage === 'object' ? info.usage : null;
    const calls = u && Number.isFinite(u.calls) ? u.calls : s.usage.calls;
    const tokens = u && Number.isFinite(u.input_tokens) && Number.isFinite(u.output_tokens)
      ? u.input_tokens + u.output_tokens : s.usage.input_tokens + s.usage.output_tokens;
    const cost = u && Number.isFinite(u.cost) ? u.cost : s.usage.cost_usd;
    parts.push(['Model calls', String(calls)]);
    parts.push(['Tokens', format_tokens(tokens)]);
    if (u && u.cost_known === false && !(cost > 0))
      parts.push(['Cost', 'not priced']);
    else if (cost > 0 || (u && u.cost_known === true))
      parts.push(['Cost', `$${cost.toFixed(cost >= 1 ? 2 : 4)}`]);
  }
  const html = parts.map(([k, v]) =>
    `<span class="stat" data-stat="${escape_html(k.toLowerCase().replace(/ /g, '-'))}"><span class="stat-label">${escape_html(k)}</span> <span class="stat-value">${escape_html(v)}</span></span>`).join('');
  const el = $('stats');
  if (el.innerHTML !== html)
    el.innerHTML = html;
}

function render_messages(p) {
  const s = view.state;
  if (view.rendered.errors !== s.errors.length) {
    view.rendered.errors = s.errors.length;
    $('errors').innerHTML = s.errors.slice(-20).map((e) =>
      `<div class="message error" data-testid="error"><strong>Error</strong> ${escape_html(e.message)}</div>`).join('');
  }
  const notes = session_notes(s, p);
  const key = notes.join('\u0001');
  if (view.rendered.notices !== key) {
    view.rendered.notices = key;
    $('notices').innerHTML = notes.map((n) =>
      `<div class="message notice" data-testid="notice">${escape_html(n)}</div>`).join('');
  }
}

function render_clarification(p) {
  const s = view.state;
  const panel = $('clarification');
  const asking = p === 'clarification' && s.clarification !== null;
  panel.hidden = !asking;
  if (asking && view.rendered.clarification !== s.clarification) {
    view.rendered.clarification = s.clarification;
    // Short questions, shown as their text (line breaks kept).
    $('clarify-questions').textContent = s.clarification;
    if (!$('clarify-answer').value)
      $('clarify-answer').focus({ preventScroll: true });
  }
}

// A plan step as text: Markdown's emphasis and code marks left out.
function plain_step(step) {
  return String(step).replace(/\*\*|__|`/g, '');
}

function render_plan(p) {
  const s = view.state;
  const planning = !s.plan && (p === 'idle' || p === 'running' || p === 'planning')
    && s.lanes.length === 0 && !s.report_started;
  $('plan-section').hidden = !s.plan && !planning;
  $('plan-empty').hidden = !planning;
  if (s.checklist.length > 0) {
    // The reflective strategy's plan: a checklist that updates live.
    $('plan-section').hidden = false;
    $('plan-empty').hidden = true;
    const key = `c${s.version}`;
    if (view.rendered.plan === key)
      return;
    view.rendered.plan = key;
    const marks = { completed: '\u2713', in_progress: '\u25B6', skipped: '\u2013', pending: '\u25CB' };
    $('plan').innerHTML = s.checklist.map((step) =>
      `<li class="plan-step ${escape_html(step.status)}" data-testid="plan-step" data-status="${escape_html(step.status)}">`
      + `<span class="mark" aria-label="${escape_html(step.status.replace('_', ' '))}">${marks[step.status] || ''}</span> `
      + `${escape_html(step.title)}</li>`).join('');
    return;
  }
  if (view.rendered.plan === s.plan)
    return;
  view.rendered.plan = s.plan;
  $('plan').innerHTML = plan_steps(s).map((step) =>
    `<li>${escape_html(plain_step(step))}</li>`).join('');
}

// "How this was researched": open while the session runs (the live lanes
// lead until the report starts above them), folded once it is done, unless
// the person opened or closed it.
function render_process(running) {
  const s = view.state;
  const proc = $('process');
  proc.hidden = $('plan-section').hidden && $('agents-section').hidden;
  if (!view.process_touched && proc.open !== running)
    proc.open = running;
  const steps = s.checklist.length || plan_steps(s).length;
  const parts = [];
  if (steps)
    parts.push(`${steps} ${steps === 1 ? 'step' : 'steps'}`);
  if (s.lanes.length)
    parts.push(`${s.lanes.length} ${s.lanes.length === 1 ? 'agent' : 'agents'}`);
  if (s.sources.length)
    parts.push(`${s.sources.length} ${s.sources.length === 1 ? 'source' : 'sources'} found`);
  const text = parts.join(' · ');
  if ($('process-summary').textContent !== text)
    $('process-summary').textContent = text;
}

const status_labels = {
  starting: 'Starting',
  searching: 'Searching',
  reading: 'Reading',
  thinking: 'Thinking',
  writing: 'Writing',
  done: 'Done',
  failed: 'Failed',
  stopped: 'Stopped',
};

function lane_element(lane) {
  const el = document.createElement('article');
  el.className = 'lane';
  el.dataset.testid = 'agent-lane';
  el.dataset.key = lane.key;
  el.innerHTML = `
    <header class="lane-head">
      <span class="lane-dot" aria-hidden="true"></span>
      <h3 class="lane-title" data-testid="lane-title"></h3>
      <span class="lane-status"></span>
    </header>
    <p class="lane-task" data-testid="lane-task"></p>
    <p class="lane-action" data-testid="lane-action"></p>
    <ul class="lane-queries"></ul>
    <details class="lane-report" data-testid="lane-report" hidden>
      <summary>Intermediate report</summary>
      <div class="prose small"></div>
    </details>`;
  return el;
}

function render_lanes() {
  const s = view.state;
  $('agents-section').hidden = s.lanes.length === 0;
  $('agents-count').textContent = s.lanes.length ? String(s.lanes.length) : '';
  const container = $('agents');
  const cycles = new Set(s.lanes.map((l) => l.cycle)).size;
  let added = false;
  for (const lane of s.lanes) {
    let r = view.rendered.lanes.get(lane.key);
    if (!r) {
      r = { el: lane_element(lane), sig: '', report_len: -1 };
      view.rendered.lanes.set(lane.key, r);
      added = true;
    }
    const sig = [lane.status, lane.action, lane.task, lane.queries.length, lane.urls.length,
                 lane.document_ids.length,
                 lane.cited_ids.length, cycles].join('\u0001');
    if (sig !== r.sig) {
      r.sig = sig;
      r.el.dataset.status = lane.status;
      r.el.querySelector('.lane-title').textContent = cycles > 1
        ? `Agent ${lane.number} · cycle ${lane.cycle}` : `Agent ${lane.number}`;
      r.el.querySelector('.lane-status').textContent = status_labels[lane.status] || lane.status;
      r.el.querySelector('.lane-task').textContent = lane.task;
      let action = lane.action;
      if (lane.status === 'done') {
        const n = lane.cited_ids.length || lane.document_ids.length;
        action = `Done · ${n} ${n === 1 ? 'source' : 'sources'}`;
      }
      r.el.querySelector('.lane-action').textContent = action;
      // The latest searches, then the latest pages read.
      const queries = lane.queries.slice(-6).map((q) =>
        `<li class="query" title="${escape_html(q)}">${escape_html(clip(q, 80))}</li>`);
      const pages = lane.urls.slice(-4).map((u) => {
        const url = safe_url(u);
        const label = escape_html(host_of(u) || 'a document');
        return url
          ? `<li class="page"><a href="${escape_html(url)}" target="_blank" rel="noopener noreferrer nofollow" title="${escape_html(url)}">${label}</a></li>`
          : `<li class="page">${label}</li>`;
      });
      r.el.querySelector('.lane-queries').innerHTML = queries.concat(pages).join('');
    }
    if (lane.report.length !== r.report_len) {
      r.report_len = lane.report.length;
      const details = r.el.querySelector('.lane-report');
      details.hidden = lane.report.length === 0;
      // Rendered now when open, else when opened.
      if (details.open)
        render_lane_report(details, lane);
      else
        details.dataset.stale = '1';
    }
  }
  if (added)
    order_lanes(container);
}

// Lanes in the order of their cycle, then their agent number.
function order_lanes(container) {
  const sorted = [...view.state.lanes].sort((a, b) => a.turn - b.turn || a.tab - b.tab);
  const els = sorted.map((l) => view.rendered.lanes.get(l.key).el);
  if (els.some((el, i) => container.children[i] !== el))
    container.replaceChildren(...els);
}

// Chips in HTML the server rendered (`<a class="cite" data-n="N">`): the
// page's chip attributes. `scope`: a lane's key for an agent's intermediate
// report, whose numbers are the agent's own (its chips link the web page,
// or nothing); otherwise the final report's numbers, each opening the
// source through the API. Other links of the body open in a new tab.
function decorate_links(root, scope) {
  for (const a of root.querySelectorAll('a')) {
    if (!a.classList.contains('cite')) {
      const url = safe_url(a.getAttribute('href') || '');
      if (url) {
        a.target = '_blank';
        a.rel = 'noopener noreferrer nofollow';
      } else {
        a.removeAttribute('href');
      }
      continue;
    }
    const n = Number(a.dataset.n || a.dataset.cite || String(a.textContent).replace(/\D/g, ''));
    a.dataset.cite = String(n);
    a.dataset.testid = 'citation';
    a.textContent = String(n);
    let title = '';
    if (scope) {
      a.dataset.scope = scope;
      const card = lane_citation_card(view.state, scope, n);
      const url = card && safe_url(card.url);
      title = card ? card.title : '';
      a.setAttribute('href', url || `#source-${n}`);
      if (url) {
        a.target = '_blank';
        a.rel = 'noopener noreferrer nofollow';
      } else {
        a.removeAttribute('target');
      }
    } else {
      const src = view.final && view.final.by_number.get(n);
      const card = src ? null : citation_card(view.state, streamed_number(n));
      title = src ? src.title : card ? card.title : '';
      if (view.id)
        a.setAttribute('href', api.source_url(view.id, n));
      a.removeAttribute('target');
    }
    a.setAttribute('aria-label', title ? `Source ${n}: ${title}` : `Source ${n}`);
  }
}

// An agent's report cites `[n]` or `[1, 2]` (its own numbers): written as
// the report's citation links, `[[n]](#)`, for the server's renderer.
function lane_citations(text) {
  return String(text).replace(/\[(\d{1,4}(?:\s*,\s*\d{1,4}){0,19})\](?![(\[])/g, (m, list) =>
    list.split(',').map((n) => `[[${n.trim()}]](#)`).join(''));
}

function render_lane_report(details, lane) {
  const box = details.querySelector('.prose');
  const text = lane.report;
  const id = view.id;
  delete details.dataset.stale;
  if (!box.innerHTML)
    box.textContent = text;
  api.render(id, lane_citations(text), undefined, 'as_written').then((res) => {
    if (view.id !== id || lane.report !== text || !res || typeof res.html !== 'string')
      return;
    box.innerHTML = res.html;
    decorate_links(box, lane.key);
  }).catch(() => {
    if (view.id === id)
      box.textContent = text;
  });
}

// -- the report -------------------------------------------------------------------

// The finished report as the server renders it, and its sources in the
// report's numbering (what its references list). A session without a
// report yet (409) keeps the streamed text; while it has streamed one, the
// load is tried again (final_retry_delays), as render_report also asks for
// it once the stream has ended, however it ended.
const final_retry_delays = [250, 500, 1000, 2000, 4000, 8000];
async function load_final(id) {
  if (view.final || view.final_loading || view.final_retry || view.id !== id)
    return;
  const controller = new AbortController();
  view.final_loading = controller;
  try {
    const [report, listed] = await Promise.all([api.report(id, controller.signal),
                                                api.sources(id, controller.signal)]);
    if (view.id !== id)
      return;
    const sources = (listed && Array.isArray(listed.sources) ? listed.sources : [])
      .filter((x) => x && Number.isInteger(x.number));
    view.final = {
      html: report && typeof report.html === 'string' ? report.html : null,
      text: report && typeof report.report === 'string' ? report.report : '',
      sources,
      by_number: new Map(sources.map((x) => [x.number, x])),
    };
    schedule();
  } catch (e) {
    if (e && e.name === 'AbortError')
      return;
    if (view.id === id && e instanceof api_error && e.status === 409 && view.state.report
        && view.final_tries < final_retry_delays.length) {
      view.final_retry = setTimeout(() => {
        view.final_retry = 0;
        load_final(id);
      }, final_retry_delays[view.final_tries++]);
      return;
    }
    if (view.id === id && !(e instanceof api_error && (e.status === 409 || e.status === 404))) {
      view.final_failed = true;
      add_local_error(`The report could not be loaded: ${message_of(e)}`);
      schedule();
    }
  } finally {
    if (view.final_loading === controller)
      view.final_loading = null;
  }
}

// The streamed report, rendered by the server about once a second (the
// same renderer as the finished one); until the first answer, and if the
// server cannot render, its text.
function request_live_render(text) {
  const id = view.id;
  if (!id || view.live_request || (view.live_html && view.live_html.text === text)
      || view.live_failed)
    return;
  const wait = 1000 - (performance.now() - view.last_report_render);
  if (wait > 0) {
    if (!view.report_timer)
      view.report_timer = setTimeout(() => {
        view.report_timer = 0;
        schedule();
      }, wait + 20);
    return;
  }
  view.last_report_render = performance.now();
  const controller = new AbortController();
  view.live_request = controller;
  api.render(id, text, controller.signal).then((res) => {
    if (view.id === id && res && typeof res.html === 'string')
      view.live_html = live_rendering(text, res);
  }).catch((e) => {
    if (!(e && e.name === 'AbortError') && view.id === id)
      view.live_failed = true;
  }).finally(() => {
    if (view.live_request === controller)
      view.live_request = null;
    schedule();
  });
}

// The server's rendering of the streaming report, with its numbering: the
// report is shown numbered as the stored one will be (1, 2, ... in the
// order first cited), the event stream's citations keep the numbers the
// model wrote; `numbers` pairs them.
function live_rendering(text, res) {
  const written_of = new Map();
  const shown_of = new Map();
  for (const x of Array.isArray(res.numbers) ? res.numbers : []) {
    if (x && Number.isInteger(x.written) && Number.isInteger(x.shown)) {
      written_of.set(x.shown, x.written);
      shown_of.set(x.written, x.shown);
    }
  }
  return { text, html: res.html, written_of, shown_of };
}

// The event stream's citation number of the streaming report's chip `n`
// (undefined when the last rendering does not show `n`); `n` itself before
// the first rendering.
function streamed_number(n) {
  const live = view.live_html;
  return live ? live.written_of.get(n) : n;
}

function set_report_html(html, how) {
  const el = $('report');
  el.innerHTML = html;
  el.dataset.rendered = how;
  decorate_links(el, null);
}

function render_report() {
  const s = view.state;
  const final = view.final;
  const loading_final = !final && !active_phases.has(session_phase()) && view.final_loading;
  $('report-section').hidden = !s.report_started && !s.report && !(final && final.html);
  if (final && final.html !== null) {
    // (The last live rendering of the whole text is the same HTML: what
    // changes then is that the shown report is the stored one.)
    if (view.rendered.report_html !== final.html || $('report').dataset.rendered !== 'final') {
      view.rendered.report_html = final.html;
      view.rendered.report = null;
      set_report_html(final.html, 'final');
      render_references();
    }
    return;
  }
  const text = s.report;
  // The stream has ended with a report streamed: the stored one replaces
  // it (whichever way the end came, and also if a load was cut short).
  if (text && s.end_state && !final && !view.final_loading && !view.final_retry
      && !view.final_failed && view.final_tries < final_retry_delays.length && view.id)
    load_final(view.id);
  if (!text) {
    if (view.rendered.report !== '') {
      view.rendered.report = '';
      view.rendered.report_html = null;
      $('report').innerHTML = '<p class="muted">The report is being written…</p>';
      $('report').dataset.rendered = '';
    }
    return;
  }
  if (!loading_final && !replaying())
    request_live_render(text);
  const live = view.live_html;
  if (live && text.startsWith(live.text.slice(0, 64))) {
    if (view.rendered.report_html !== live.html) {
      view.rendered.report_html = live.html;
      set_report_html(live.html, 'live');
      render_references();
    }
  } else if (view.rendered.report !== text) {
    view.rendered.report_html = null;
    const el = $('report');
    el.innerHTML = `<div class="report-plain">${escape_html(text)}</div>`;
    el.dataset.rendered = 'plain';
  }
  view.rendered.report = text;
  if (view.rendered.citations !== s.citations.size) {
    view.rendered.citations = s.citations.size;
    render_references();
  }
}

// The references under the report: the finished report's sources (their
// numbers are the report's), else the citations streamed so far.
function render_references() {
  const s = view.state;
  const final = view.final;
  let items;
  if (final && final.html !== null) {
    items = final.sources.map((src) => {
      const n = src.number;
      return `<li id="ref-${n}" value="${n}" data-testid="reference">`
        + `<a class="ref-open" data-cite="${n}" href="${escape_html(api.source_url(view.id, n))}">${escape_html(src.title || src.location || `Source ${n}`)}</a>`
        + (src.location ? ` <span class="muted ref-url">${escape_html(src.location)}</span>` : '')
        + (src.snippet_only ? ' <span class="muted">(snippet only)</span>' : '') + '</li>';
    });
  } else {
    // While the report streams: numbered as its rendering shows them.
    const live = view.live_html;
    const pairs = live
      ? [...live.written_of].sort((a, b) => a[0] - b[0])
      : [...s.citations.keys()].sort((a, b) => a - b).map((n) => [n, n]);
    items = pairs.map(([n, written]) => {
      const card = citation_card(s, written);
      if (!card)
        return '';
      const url = safe_url(card.url);
      const title = escape_html(card.title);
      const link = url
        ? `<a href="${escape_html(url)}" target="_blank" rel="noopener noreferrer nofollow">${title}</a>`
        : `<span class="ref-title">${title}</span>`;
      const where = short_location(card.url);
      return `<li id="ref-${n}" value="${n}" data-testid="reference">${link}`
        + (where ? ` <span class="muted ref-url">${escape_html(where)}</span>` : '') + '</li>';
    });
  }
  $('references-wrap').hidden = items.length === 0;
  $('references').innerHTML = items.join('');
}

// -- sources ----------------------------------------------------------------------

function source_item(d, nums, number) {
  const url = safe_url(d.url);
  const title = escape_html(d.title || short_location(d.url, d.location) || 'Untitled source');
  const doc = escape_html(d.document_id || '');
  const head = number !== null
    ? `<a class="source-title" data-doc="${doc}" data-cite="${number}" href="${escape_html(api.source_url(view.id, number))}">${title}</a>`
    : url
      ? `<a class="source-title" data-doc="${doc}" href="${escape_html(url)}" target="_blank" rel="noopener noreferrer nofollow">${title}</a>`
      : `<span class="source-title" data-doc="${doc}" tabindex="0">${title}</span>`;
  const badges = nums.map((n) => `<span class="num">${n}</span>`).join('');
  const kind = d.kind || (d.is_internet ? 'web' : (d.source_type || 'document'));
  const where = short_location(d.url, d.location);
  return `<li class="source${nums.length ? ' cited' : ''}" data-testid="source" data-document-id="${doc}"`
    + `${number !== null ? ` data-number="${number}"` : ''}>`
    + `<div class="source-head">${badges}${head}</div>`
    + `<div class="source-meta"><span class="kind">${escape_html(kind)}</span>`
    + `<span class="where">${escape_html(where)}</span></div></li>`;
}

function render_sources() {
  const s = view.state;
  const final = view.final && view.final.html !== null ? view.final : null;
  const live = final ? null : view.live_html;
  const key = `${s.sources.length}:${s.citations.size}:${final ? final.sources.length : -1}:`
    + (live ? live.html.length + live.text.length : -1);
  if (view.rendered.sources_key === key)
    return;
  view.rendered.sources_key = key;
  let html;
  let shown;
  if (final) {
    // One numbering: the report's. Then what was found and not cited.
    const cited_ids = new Set(s.citations.values());
    const cited = final.sources.map((src) => source_item(src, [src.number], src.number));
    const others = s.sources.filter((d) => !cited_ids.has(d.document_id))
      .map((d) => source_item(d, [], null));
    html = cited.join('')
      + (others.length
        ? `<li class="sources-more"><details><summary>${others.length} more found, not cited</summary><ol class="sources">${others.join('')}</ol></details></li>`
        : '');
    shown = cited.length + others.length;
  } else {
    // By the numbers the report shows (those of its last rendering).
    const cited = new Map();
    for (const [written, id] of s.citations) {
      const n = live ? live.shown_of.get(written) : written;
      if (n === undefined)
        continue;
      if (!cited.has(id))
        cited.set(id, []);
      cited.get(id).push(n);
    }
    // Cited sources first (by citation number), then the others as found.
    const order = s.sources.map((d, i) => {
      const nums = (cited.get(d.document_id) || []).sort((a, b) => a - b);
      return { d, i, nums };
    });
    order.sort((a, b) => {
      if (a.nums.length && b.nums.length)
        return a.nums[0] - b.nums[0];
      if (a.nums.length !== b.nums.length)
        return a.nums.length ? -1 : 1;
      return a.i - b.i;
    });
    html = order.map(({ d, nums }) => source_item(d, nums, null)).join('');
    shown = order.length;
  }
  $('sources-count').textContent = shown ? String(shown) : '';
  $('sources-empty').hidden = shown > 0;
  $('sources').innerHTML = html;
}

// A source of the finished report through the API, once per session.
function fetch_source(n) {
  const id = view.id;
  let p = view.source_cache.get(n);
  if (!p) {
    p = api.source(id, n);
    view.source_cache.set(n, p);
    p.catch(() => {
      if (view.source_cache.get(n) === p)
        view.source_cache.delete(n);
    });
  }
  return p;
}

// The sentence a chip ends: the text of its block before it, from the end
// of the sentence before (chips and punctuation right before it skipped).
function sentence_of(chip) {
  const block = chip.closest('p, li, td, th, blockquote, h1, h2, h3, h4, h5, h6') || chip.parentElement;
  if (!block)
    return '';
  const range = document.createRange();
  range.setStart(block, 0);
  range.setEndBefore(chip);
  const before = range.toString().replace(/[\s\d,.;:!?[\]()]+$/, '');
  const parts = before.split(/(?<=[.!?])\s+/);
  return parts[parts.length - 1] || before;
}

// The passage of source JSON `src` that the claim `sentence` cites: its
// text, or '' without passages.
function passage_text(src, sentence) {
  const k = best_passage(src.passages, sentence);
  if (k < 0 || typeof src.text !== 'string')
    return '';
  const at = byte_to_index(src.text);
  const p = src.passages[k];
  return src.text.slice(at(p.begin), at(p.end)).trim();
}

// -- citation cards -------------------------------------------------------------

let card_anchor = null;
let card_hide_timer = 0;
// What shows a card: citation chips and the titles in the sources list.
const card_targets = 'a.cite, #sources .source-title';

function show_card_html(chip, card) {
  const el = $('citation-card');
  el.innerHTML = render_citation_card(card);
  el.hidden = false;
  card_anchor = chip;
  chip.setAttribute('aria-describedby', 'citation-card');
  place_card();
}

function show_card(chip) {
  clearTimeout(card_hide_timer);
  const n = Number(chip.dataset.cite);
  const final_src = !chip.dataset.scope && view.final && Number.isInteger(n)
    ? view.final.by_number.get(n) : null;
  if (final_src) {
    // The finished report: the passage this claim cites, read through the API.
    const base = { number: n, title: final_src.title, url: safe_url(final_src.url) || '',
                   location: final_src.location, source_type: final_src.kind,
                   snippet_only: final_src.snippet_only, openable: true };
    show_card_html(chip, { ...base, loading: true });
    const sentence = chip.classList.contains('cite') ? sentence_of(chip) : '';
    fetch_source(n).then((src) => {
      if (card_anchor !== chip)
        return;
      const passage = passage_text(src, sentence);
      show_card_html(chip, { ...base, passage, evidence: passage.length > 0 });
    }).catch((e) => {
      if (card_anchor === chip)
        show_card_html(chip, { ...base, passage: '', loading: false,
                               title: `${base.title} (${message_of(e)})` });
    });
    return;
  }
  // Chips of an intermediate report use their agent's own numbers; an
  // entry of the sources list names its document.
  let card = chip.dataset.doc !== undefined && chip.dataset.cite === undefined
    ? document_card(view.state, chip.dataset.doc)
    : chip.dataset.scope ? lane_citation_card(view.state, chip.dataset.scope, n)
      : citation_card(view.state, streamed_number(n));
  if (!card && chip.dataset.doc !== undefined)
    return;
  if (!card)
    card = { number: n, title: `Source ${n}`, url: '', passage: '' };
  show_card_html(chip, card);
}

// Puts the card under its chip (above when there is no room below); hides
// it when the chip has left the window.
function place_card() {
  const chip = card_anchor;
  if (!chip)
    return;
  const el = $('citation-card');
  const r = chip.getBoundingClientRect();
  if (!chip.isConnected || r.bottom < 0 || r.top > window.innerHeight) {
    hide_card();
    return;
  }
  const w = Math.min(420, window.innerWidth - 16);
  el.style.width = `${w}px`;
  const left = Math.min(Math.max(8, r.left + r.width / 2 - w / 2), window.innerWidth - w - 8);
  const h = el.offsetHeight;
  let top = r.bottom + 8;
  if (top + h > window.innerHeight - 8 && r.top - h - 8 > 8)
    top = r.top - h - 8;
  el.style.left = `${Math.round(left)}px`;
  el.style.top = `${Math.round(top)}px`;
}

function hide_card() {
  clearTimeout(card_hide_timer);
  const el = $('citation-card');
  el.hidden = true;
  if (card_anchor)
    card_anchor.removeAttribute('aria-describedby');
  card_anchor = null;
}

function hide_card_soon() {
  clearTimeout(card_hide_timer);
  card_hide_timer = setTimeout(hide_card, 200);
}

// -- the source view ------------------------------------------------------------------

const verdict_labels = {
  supported: 'supported',
  partly_supported: 'partly supported',
  unsupported: 'not supported',
  no_evidence: 'no evidence found',
  unverified: 'not verified',
};

// Opens source `n` of the finished report in the dialog: the text that was
// read, the cited passages marked, the claims that cite them; scrolled to
// the passage of `sentence` (the claim clicked), else the first.
async function open_source(n, sentence = '') {
  const id = view.id;
  const src = view.final && view.final.by_number.get(n);
  if (!id || !src)
    return;
  hide_card();
  const dlg = $('source-view');
  dlg.dataset.n = String(n);
  dlg.dataset.state = 'loading';
  $('source-view-num').textContent = String(n);
  $('source-view-title').textContent = src.title || `Source ${n}`;
  $('source-view-where').textContent = src.location || '';
  const original = safe_url(src.url);
  $('source-view-original').hidden = !original;
  if (original)
    $('source-view-original').href = original;
  $('source-view-page').href = api.source_url(id, n);
  $('source-view-note').textContent = '';
  $('source-view-claims').replaceChildren();
  $('source-view-text').textContent = 'Loading the text that was read…';
  if (!dlg.open)
    dlg.showModal();
  let json;
  try {
    json = await fetch_source(n);
  } catch (e) {
    if (dlg.dataset.n === String(n)) {
      $('source-view-text').textContent = `The source could not be loaded: ${message_of(e)}`;
      dlg.dataset.state = 'failed';
    }
    return;
  }
  if (view.id !== id || dlg.dataset.n !== String(n))
    return;
  const passages = Array.isArray(json.passages) ? json.passages : [];
  const text = typeof json.text === 'string' ? json.text : '';
  $('source-view-text').innerHTML = mark_passages(text, passages);
  const notes = [];
  if (json.snippet_only)
    notes.push('Only the search engine\'s snippet was read; the page was never opened.');
  if (json.text_truncated)
    notes.push('The text is cut here; the original holds more.');
  if (passages.length === 0)
    notes.push('No passage of this source was located for its claims.');
  $('source-view-note').textContent = notes.join(' ');
  const at = byte_to_index(text);
  const marks = [...$('source-view-text').querySelectorAll('mark.passage')];
  // The mark holding a passage: the one whose text starts at or before it.
  const mark_of = (p) => {
    const i = at(p.begin);
    let found = marks[0] || null;
    for (const m of marks)
      if (Number(m.dataset.begin) <= i)
        found = m;
    return found;
  };
  $('source-view-claims').innerHTML = passages.length
    ? `<h3>Claims citing this source</h3><ol>${passages.map((p, k) => {
      const claims = Array.isArray(p.claims) ? p.claims : [];
      const verdict = p.verdict && verdict_labels[p.verdict]
        ? ` <span class="verdict" data-verdict="${escape_html(p.verdict)}">${escape_html(verdict_labels[p.verdict])}</span>` : '';
      return `<li><button type="button" class="link-button" data-passage="${k}">${escape_html(claims.join(' / ') || `Passage ${k + 1}`)}</button>${verdict}</li>`;
    }).join('')}</ol>` : '';
  for (const b of $('source-view-claims').querySelectorAll('button[data-passage]'))
    b.addEventListener('click', () => {
      const m = mark_of(passages[Number(b.dataset.passage)]);
      if (m)
        focus_mark(m);
    });
  dlg.dataset.state = 'loaded';
  const k = best_passage(passages, sentence);
  const target = k >= 0 ? mark_of(passages[k]) : null;
  if (target)
    focus_mark(target);
}

function focus_mark(mark) {
  for (const m of $('source-view-text').querySelectorAll('mark.current'))
    m.classList.remove('current');
  mark.classList.add('current');
  mark.scrollIntoView({ block: 'center' });
}

function setup_cards() {
  document.addEventListener('mouseover', (e) => {
    const chip = e.target.closest && e.target.closest(card_targets);
    if (chip) {
      if (chip !== card_anchor)
        show_card(chip);
      else
        clearTimeout(card_hide_timer);
    } else if (e.target.closest && e.target.closest('#citation-card')) {
      clearTimeout(card_hide_timer);
    } else if (card_anchor) {
      hide_card_soon();
    }
  });
  document.addEventListener('focusin', (e) => {
    const chip = e.target.closest && e.target.closest(card_targets);
    if (chip)
      show_card(chip);
    else if (!(e.target.closest && e.target.closest('#citation-card')))
      hide_card();
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && card_anchor) {
      const chip = card_anchor;
      hide_card();
      chip.focus();
    }
  });
  window.addEventListener('scroll', () => place_card(), { passive: true, capture: true });
  window.addEventListener('resize', () => place_card());
  $('source-view-close').addEventListener('click', () => $('source-view').close());
  // Escape closes it every time (a browser may skip its own close after the
  // first one without a new user activation).
  $('source-view').addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      $('source-view').close();
    }
  });
  $('source-view').addEventListener('click', (e) => {
    // A click on the backdrop closes the dialog.
    if (e.target === $('source-view'))
      $('source-view').close();
  });
  document.addEventListener('click', (e) => {
    if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey)
      return; // a new tab or window: the link's own page
    const chip = e.target.closest && e.target.closest('a.cite, a.ref-open, #sources a.source-title, a[href^="#source-"]');
    if (!chip)
      return;
    const n = Number(chip.dataset.cite || (chip.getAttribute('href') || '').replace('#source-', ''));
    // The finished report's sources open in the page, through the API.
    if (!chip.dataset.scope && view.final && view.final.by_number.has(n)) {
      e.preventDefault();
      open_source(n, chip.classList.contains('cite') ? sentence_of(chip) : '');
      return;
    }
    const href = chip.getAttribute('href') || '';
    if (is_web_url(href))
      return; // opens the page in a new tab
    // Before the report is done: show the source in the lists instead.
    e.preventDefault();
    const card = chip.dataset.scope ? lane_citation_card(view.state, chip.dataset.scope, n) : null;
    const ref = card
      ? document.querySelector(`#sources [data-document-id="${CSS.escape(card.document_id)}"]`)
      : $(`ref-${n}`);
    if (ref) {
      ref.scrollIntoView({ behavior: 'smooth', block: 'center' });
      ref.classList.remove('flash');
      void ref.offsetWidth;
      ref.classList.add('flash');
    }
  });
}

// -- history ------------------------------------------------------------------

// The history list: its items, the cursor of the next page, the search
// they answer and the request in flight.
const past = { next: null, query: '', loading: null, timer: 0, items: [] };

async function load_history(reset) {
  if (past.loading)
    past.loading.abort();
  const controller = new AbortController();
  past.loading = controller;
  const q = $('history-search').value.trim();
  try {
    const page = await api.list({ q, limit: 30, before: reset ? '' : past.next || '' },
                                controller.signal);
    if (past.loading !== controller)
      return;
    const sessions = page && Array.isArray(page.sessions) ? page.sessions : [];
    past.items = reset ? sessions : past.items.concat(sessions);
    past.next = page && typeof page.next === 'string' ? page.next : null;
    past.query = q;
    show_error($('history-error'), '');
    render_history();
  } catch (e) {
    if (e && e.name === 'AbortError')
      return;
    if (past.loading === controller)
      show_error($('history-error'), e instanceof api_error && e.status === 401
        ? 'Enter the access token to see the history.' : message_of(e));
  } finally {
    if (past.loading === controller)
      past.loading = null;
  }
}

function render_history() {
  const list = $('history-list');
  list.innerHTML = past.items.filter((it) => it && typeof it.id === 'string').map((it) => {
    const state = typeof it.state === 'string' ? it.state : '';
    const q = typeof it.question === 'string' ? it.question : '(no question)';
    const when = format_time(it.created_at);
    const id = escape_html(it.id);
    const actions = [];
    if (state === 'interrupted')
      actions.push(`<button type="button" class="link-button" data-action="resume" data-id="${id}">Resume</button>`);
    if (state === 'completed' || state === 'cancelled' || state === 'failed' || state === 'interrupted')
      actions.push(`<a class="link-button" data-action="export" href="${escape_html(api.report_url(it.id, 'md'))}" download="quarry-${id}.md">Export</a>`);
    if (state !== 'running' && state !== 'pending')
      actions.push(`<button type="button" class="link-button" data-action="delete" data-id="${id}">Delete</button>`);
    return `<li class="history-entry"><a class="history-item" data-testid="history-item" data-id="${id}"`
      + ` data-state="${escape_html(state)}" href="#/research/${encodeURIComponent(it.id)}">`
      + `<span class="history-q">${escape_html(clip(q, 140))}</span>`
      + `<span class="history-meta"><span class="dot" data-state="${escape_html(state)}" aria-hidden="true"></span>`
      + `${escape_html(state_labels[state] || state)}${when ? ` · ${escape_html(when)}` : ''}`
      + `${it.parent_id ? ' · follow-up' : ''}</span></a>`
      + (actions.length ? `<span class="history-actions" data-testid="history-actions">${actions.join('')}</span>` : '')
      + '</li>';
  }).join('');
  $('history-empty').hidden = past.items.length > 0;
  $('history-empty').textContent = past.query ? 'Nothing matches.' : 'No research yet.';
  $('history-more').hidden = !past.next;
  // The query these results answer (tests wait for it).
  list.dataset.query = past.query;
  mark_history_current();
}

function mark_history_current() {
  for (const a of document.querySelectorAll('#history-list a.history-item')) {
    if (a.dataset.id === view.id && !$('session').hidden)
      a.setAttribute('aria-current', 'page');
    else
      a.removeAttribute('aria-current');
  }
}

function set_history_open(open) {
  document.body.classList.toggle('history-open', open);
  $('history-toggle').setAttribute('aria-expanded', String(open));
  $('history-toggle').setAttribute('aria-label', open ? 'Hide history' : 'Show history');
  $('history-backdrop').hidden = !open;
}

// -- forms --------------------------------------------------------------------

function ask_options() {
  const deadline = $('opt-deadline').value.trim();
  const agents = $('opt-max-agents').value.trim();
  return {
    clarify: $('opt-clarify').checked,
    deadline: deadline || undefined,
    max_agents: agents === '' ? undefined : Number(agents),
    strategy: $('opt-strategy').value || undefined,
    mode: $('opt-mode').value || undefined,
    depth: $('opt-depth').value || undefined,
    verify: $('opt-verify').value === '' ? undefined : $('opt-verify').value === 'on',
  };
}

function check_options(o) {
  if ((o.mode || o.depth) && o.strategy === 'orchestrator')
    return 'Mode and depth belong to the reflective strategy: choose it, or leave them at the server default.';
  if (o.deadline && !valid_duration(o.deadline))
    return 'The deadline is a duration such as 90s, 10m or 1h30m.';
  if (o.max_agents !== undefined && !(Number.isInteger(o.max_agents) && o.max_agents >= 1 && o.max_agents <= 16))
    return 'Agents at once is a whole number from 1 to 16.';
  return '';
}

async function submit_question(e) {
  e.preventDefault();
  const question = $('question').value.trim();
  const err = $('ask-error');
  if (!question) {
    show_error(err, 'Type a question first.');
    $('question').focus();
    return;
  }
  const options = { question, ...ask_options() };
  const problem = check_options(options) || uploads_problem();
  if (problem) {
    show_error(err, problem);
    return;
  }
  show_error(err, '');
  const button = $('ask-submit');
  button.disabled = true;
  try {
    options.uploads = await uploads_ready();
    const res = await api.start(options);
    if (!res || typeof res.id !== 'string')
      throw new Error('The server did not return a session id.');
    $('question').value = '';
    clear_uploads();
    pending_question = { id: res.id, question };
    location.hash = `#/research/${encodeURIComponent(res.id)}`;
    load_history(true);
  } catch (ex) {
    show_error(err, message_of(ex));
  } finally {
    button.disabled = false;
  }
}

let pending_question = null;

// -- attached files ------------------------------------------------------------

// The files attached to the next question: each uploaded as soon as it is
// chosen ({file, state: uploading|ready|failed, upload, error, promise}).
const attached = [];

function render_uploads() {
  const list = $('uploads');
  list.hidden = attached.length === 0;
  list.innerHTML = attached.map((a, i) => {
    const status = a.state === 'uploading' ? 'Uploading…'
      : a.state === 'ready' ? format_bytes(a.upload.bytes) : a.error;
    return `<li class="upload" data-testid="upload" data-state="${a.state}">`
      + `<span class="upload-name">${escape_html(a.file.name)}</span>`
      + `<span class="upload-status${a.state === 'failed' ? ' form-error' : ' muted'}">${escape_html(status)}</span>`
      + `<button type="button" class="link-button" data-remove="${i}" aria-label="Remove ${escape_html(a.file.name)}">Remove</button></li>`;
  }).join('');
}

function attach_files(files) {
  for (const file of files) {
    const entry = { file, state: 'uploading', upload: null, error: '', promise: null };
    entry.promise = api.upload(file).then((res) => {
      if (!res || typeof res.upload !== 'string')
        throw new Error('The server did not return an upload id.');
      entry.upload = res;
      entry.state = 'ready';
    }).catch((e) => {
      entry.state = 'failed';
      entry.error = message_of(e);
    }).finally(render_uploads);
    attached.push(entry);
  }
  render_uploads();
}

function uploads_problem() {
  const failed = attached.filter((a) => a.state === 'failed');
  return failed.length
    ? `${failed.map((a) => a.file.name).join(', ')} could not be attached: remove ${failed.length === 1 ? 'it' : 'them'} or try again.`
    : '';
}

// The ids of the attached files once every upload is done.
async function uploads_ready() {
  await Promise.all(attached.map((a) => a.promise));
  const problem = uploads_problem();
  if (problem)
    throw new Error(problem);
  return attached.map((a) => a.upload.upload);
}

function clear_uploads() {
  attached.length = 0;
  render_uploads();
}

// -- what the server researches with --------------------------------------------

async function load_server_info() {
  let info;
  try {
    info = await api.info();
  } catch {
    return; // the page works without it (a 401 asks for the token)
  }
  if (!info || typeof info !== 'object')
    return;
  const providers = info.providers && typeof info.providers === 'object' ? info.providers : {};
  const roles = info.roles && typeof info.roles === 'object' ? info.roles : {};
  const model_of = (provider) => {
    const p = providers[provider];
    if (!p || typeof p !== 'object')
      return provider;
    if (p.plugin === 'extractive')
      return 'no model (the offline extractive provider)';
    if (p.model === null || p.model === undefined)
      return `${provider} (${p.plugin})`;
    return `${p.model} (${provider})`;
  };
  const main = roles.research || roles.orchestrator || Object.keys(providers)[0] || '';
  const tools = Array.isArray(info.tools) ? info.tools.filter((t) => t && typeof t.name === 'string') : [];
  const research = info.research && typeof info.research === 'object' ? info.research : {};
  $('server-summary').textContent = `Researching with ${main ? model_of(main) : 'the server\'s model'}`
    + ` · ${tools.length} ${tools.length === 1 ? 'tool' : 'tools'}`
    + (research.strategy ? ` · ${research.strategy} strategy` : '');
  const rows = [];
  if (info.version)
    rows.push(['Quarry', String(info.version)]);
  for (const [role, provider] of Object.entries(roles))
    rows.push([`Model for ${role}`, model_of(String(provider))]);
  rows.push(['Tools', tools.map((t) => `${t.name} (${t.kind})`).join(', ') || 'none']);
  for (const key of ['strategy', 'mode', 'depth', 'verify', 'deadline', 'max_parallel_agents'])
    if (research[key] !== undefined && research[key] !== null && research[key] !== '')
      rows.push([`Default ${key.replace(/_/g, ' ')}`, String(research[key])]);
  $('server-settings').innerHTML = rows.map(([k, v]) =>
    `<dt>${escape_html(k)}</dt><dd>${escape_html(v)}</dd>`).join('');
  $('server-info').hidden = false;
}

async function submit_answers(e) {
  e.preventDefault();
  const answer = $('clarify-answer').value.trim();
  const err = $('clarify-error');
  if (!answer) {
    show_error(err, 'Write your answers first.');
    return;
  }
  const id = view.id;
  $('clarify-send').disabled = true;
  try {
    await api.reply(id, [answer]);
    show_error(err, '');
    if (view.id !== id)
      return;
    view.state.clarification_answered = true;
    view.state.end_state = null;
    view.state.stopped = false;
    view.state.stop_reason = null;
    view.state.version += 1;
    if (view.info)
      view.info.state = 'running';
    follow(id, view.state.last_seq + 1);
    schedule();
  } catch (ex) {
    show_error(err, message_of(ex));
  } finally {
    $('clarify-send').disabled = false;
  }
}

async function resume_session() {
  const id = view.id;
  if (!id)
    return;
  const button = $('resume');
  button.disabled = true;
  try {
    await api.resume(id);
    if (view.id !== id)
      return;
    // The resumed run's packets follow what is shown.
    view.final = null;
    view.state.end_state = null;
    view.state.stopped = false;
    view.state.version += 1;
    if (view.info)
      view.info.state = 'running';
    follow(id, view.state.last_seq + 1);
    load_history(true);
  } catch (ex) {
    add_local_error(message_of(ex));
  } finally {
    button.disabled = false;
    schedule();
  }
}

// Deletes session `id` after a second click on the same button within 5 s
// (its label asks to confirm).
async function delete_session(id, button) {
  if (!id)
    return;
  if (button.dataset.confirm !== '1') {
    button.dataset.confirm = '1';
    button.dataset.label = button.textContent;
    button.textContent = 'Delete for good?';
    setTimeout(() => {
      if (button.dataset.confirm === '1') {
        button.dataset.confirm = '';
        button.textContent = button.dataset.label;
      }
    }, 5000);
    return;
  }
  button.dataset.confirm = '';
  button.disabled = true;
  try {
    await api.remove(id);
    past.items = past.items.filter((it) => it.id !== id);
    render_history();
    if (view.id === id)
      location.hash = '#/';
  } catch (ex) {
    if (view.id === id) {
      add_local_error(message_of(ex));
      schedule();
    } else {
      show_error($('history-error'), message_of(ex));
    }
  } finally {
    button.disabled = false;
    if (button.isConnected && button.dataset.label)
      button.textContent = button.dataset.label;
  }
}

async function cancel_session() {
  const id = view.id;
  if (!id)
    return;
  const button = $('cancel');
  button.disabled = true;
  try {
    await api.cancel(id);
    if (view.info && view.id === id)
      view.info.state = 'cancelled';
  } catch (ex) {
    // 409: it finished in the meantime.
    if (!(ex instanceof api_error && ex.status === 409))
      add_local_error(message_of(ex));
  } finally {
    button.disabled = false;
    schedule();
  }
}

async function submit_follow_up(e) {
  e.preventDefault();
  const question = $('follow-up-question').value.trim();
  const err = $('follow-up-error');
  if (!question) {
    show_error(err, 'Write the follow-up question first.');
    return;
  }
  $('follow-up-submit').disabled = true;
  try {
    const res = await api.follow_up(view.id, { question, ...ask_options() });
    if (!res || typeof res.id !== 'string')
      throw new Error('The server did not return a session id.');
    show_error(err, '');
    pending_question = { id: res.id, question };
    location.hash = `#/research/${encodeURIComponent(res.id)}`;
    load_history(true);
  } catch (ex) {
    show_error(err, message_of(ex));
  } finally {
    $('follow-up-submit').disabled = false;
  }
}

// The export links and their formats. PDF and DOCX are made by the server
// (a browser, pandoc), which may lack the tool: fetched by the page, so that
// an error is shown in it rather than downloaded.
const export_formats = [['export-md', 'md'], ['export-html', 'html'], ['export-pdf', 'pdf'],
                        ['export-docx', 'docx']];

// Saves `blob` as a download named `name`.
function save_blob(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// Exports carry the token when there is one (a plain link cannot).
async function export_click(e) {
  const token = load_token();
  const format = export_formats.find(([id]) => id === e.currentTarget.id)[1];
  if ((!token && format !== 'pdf' && format !== 'docx') || !view.id)
    return;
  e.preventDefault();
  try {
    save_blob(await api.report_blob(view.id, format), `quarry-${view.id}.${format}`);
  } catch (ex) {
    add_local_error(message_of(ex));
    schedule();
  }
}

// -- routing ------------------------------------------------------------------

function route() {
  const m = /^#\/research\/([A-Za-z0-9_-]{1,64})$/.exec(location.hash);
  set_history_open(false);
  if (m) {
    const id = m[1];
    const hint = pending_question && pending_question.id === id ? pending_question.question : null;
    pending_question = null;
    open_session(id, hint);
    return;
  }
  if (location.hash && !location.hash.startsWith('#/'))
    return; // an in-page anchor
  close_stream();
  view.id = null;
  show_view('ask');
  mark_history_current();
  tick_clock(false);
  $('question').focus({ preventScroll: true });
}

function setup() {
  $('ask-form').addEventListener('submit', submit_question);
  $('ask-options-toggle').addEventListener('click', () => {
    const open = $('ask-options').hidden;
    $('ask-options').hidden = !open;
    $('ask-options-toggle').setAttribute('aria-expanded', String(open));
  });
  $('question').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey))
      $('ask-form').requestSubmit();
  });
  $('follow-up-question').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey))
      $('follow-up-form').requestSubmit();
  });
  $('clarify-form').addEventListener('submit', submit_answers);
  $('follow-up-form').addEventListener('submit', submit_follow_up);
  $('cancel').addEventListener('click', cancel_session);
  $('resume').addEventListener('click', resume_session);
  $('delete').addEventListener('click', (e) => delete_session(view.id, e.currentTarget));
  $('history-list').addEventListener('click', async (e) => {
    const b = e.target.closest && e.target.closest('[data-action]');
    if (!b)
      return;
    if (b.dataset.action === 'delete') {
      e.preventDefault();
      delete_session(b.dataset.id, b);
    } else if (b.dataset.action === 'resume') {
      e.preventDefault();
      try {
        await api.resume(b.dataset.id);
        location.hash = `#/research/${encodeURIComponent(b.dataset.id)}`;
        load_history(true);
      } catch (ex) {
        show_error($('history-error'), message_of(ex));
      }
    } else if (b.dataset.action === 'export' && load_token()) {
      // A plain link cannot carry the token.
      e.preventDefault();
      try {
        const id = b.getAttribute('download').replace(/^quarry-|\.md$/g, '');
        save_blob(await api.report_blob(id, 'md'), `quarry-${id}.md`);
      } catch (ex) {
        show_error($('history-error'), message_of(ex));
      }
    }
  });
  $('process').querySelector('summary').addEventListener('click', () => {
    view.process_touched = true;
  });
  $('attach').addEventListener('click', () => $('attach-input').click());
  $('attach-input').addEventListener('change', (e) => {
    attach_files([...e.target.files]);
    e.target.value = '';
  });
  $('uploads').addEventListener('click', (e) => {
    const b = e.target.closest && e.target.closest('button[data-remove]');
    if (!b)
      return;
    attached.splice(Number(b.dataset.remove), 1);
    render_uploads();
  });
  for (const [id] of export_formats)
    $(id).addEventListener('click', export_click);
  $('history-search').addEventListener('input', () => {
    clearTimeout(past.timer);
    past.timer = setTimeout(() => load_history(true), 250);
  });
  $('history-search').addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      clearTimeout(past.timer);
      load_history(true);
    }
  });
  $('history-more').addEventListener('click', () => load_history(false));
  $('history-toggle').addEventListener('click', () =>
    set_history_open(!document.body.classList.contains('history-open')));
  $('history-backdrop').addEventListener('click', () => set_history_open(false));
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && document.body.classList.contains('history-open'))
      set_history_open(false);
    // "/" searches the history (unless typing somewhere).
    const typing = e.target.closest && e.target.closest('input, textarea, [contenteditable]');
    if (e.key === '/' && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) {
      e.preventDefault();
      set_history_open(true);
      $('history-search').focus();
    }
  });
  $('agents').addEventListener('toggle', (e) => {
    const details = e.target;
    if (!(details instanceof HTMLDetailsElement) || !details.open || !details.dataset.stale)
      return;
    const key = details.closest('.lane').dataset.key;
    const lane = view.state.lane_by_key.get(key);
    if (lane)
      render_lane_report(details, lane);
  }, true);
  $('auth-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const token = $('auth-token').value.trim();
    if (!token)
      return;
    save_token(token);
    hide_auth();
    show_error($('ask-error'), '');
    show_error($('history-error'), '');
    // Retry what failed.
    view.id = null;
    close_stream();
    route();
    load_history(true);
    load_server_info();
  });
  $('auth-forget').addEventListener('click', () => {
    save_token(null);
    $('auth-token').value = '';
    $('auth-open').hidden = true;
    $('auth-forget').hidden = true;
    show_error($('auth-error'), '');
  });
  $('auth-open').addEventListener('click', () => show_auth(false));
  $('auth-open').hidden = !load_token();
  setup_cards();
  window.addEventListener('hashchange', route);
  route();
  load_history(true);
  load_server_info();
}

// Exposed for debugging in the browser's console (and for tests).
window.quarry_page = { view, api, citation_numbers };

if (document.readyState === 'loading')
  document.addEventListener('DOMContentLoaded', setup);
else
  setup();
