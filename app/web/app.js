// The page of `quarry serve`: ask, watch, answer, cancel, history, follow-up,
// export. Talks to the API of docs/api.md through api.js; the session's view
// state comes from packets.js; Markdown from markdown.js (all text escaped).
//
// Routes (the location's hash): `#/` asks a new question,
// `#/research/<id>` shows a session (live while it runs, replayed after).
//
// Stable hooks for tests (ids unless marked [data-testid]):
//   ask form         #ask-form, #question, #ask-options-toggle (shows
//                    #ask-options), #opt-clarify (checkbox), #opt-deadline,
//                    #opt-max-agents, #ask-submit, #ask-error
//   session          #session (hidden unless a session is shown;
//                    data-stream: connecting, live, replaying,
//                    reconnecting, ended (the `end` event came: every
//                    packet is shown), closed),
//                    #session-question, #session-state [session-state]
//                    (text: running, planning, researching, writing,
//                    clarification, completed, cancelled, failed,
//                    interrupted), #stats [stats], #cancel,
//                    #export-md [export-md], #export-html [export-html],
//                    #export-pdf [export-pdf], #export-docx [export-docx]
//   plan             #plan [plan] > li (one per step)
//   agents           #agents [agents] > [data-testid=agent-lane]
//                    (data-key="turn:tab", data-status=starting|searching|
//                    reading|thinking|writing|done|failed|stopped), inside:
//                    [lane-title], [lane-task], [lane-action],
//                    [lane-report] (a <details> with the intermediate report)
//   sources          #sources [sources] > [data-testid=source]
//                    (data-document-id; its .source-title shows the card
//                    too), #sources-count [sources-count]
//   report           #report [report]; citation chips a.cite
//                    [data-testid=citation] (data-cite="n");
//                    #references > li (id ref-N)
//   citation card    #citation-card [citation-card] (shown on hover or
//                    focus of a chip): [card-title], [card-url],
//                    [card-passage]
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
  escape_html, is_web_url, render_citation_card, render_inline_markdown, render_markdown,
  safe_url,
} from './markdown.js';

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

function host_of(url) {
  if (!url)
    return '';
  if (/^file:/i.test(url)) {
    const name = url.replace(/[?#].*$/, '').split('/').filter(Boolean).pop() || url;
    try {
      return decodeURIComponent(name);
    } catch {
      return name;
    }
  }
  try {
    return new URL(url).host;
  } catch {
    return url.slice(0, 80);
  }
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

const active_phases = new Set(['idle', 'running', 'planning', 'researching', 'writing']);

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
};

function reset_rendered() {
  view.rendered = {
    plan: null,
    lanes: new Map(),
    sources: 0,
    sources_key: '',
    report: null,
    citations: -1,
    errors: -1,
    notices: -1,
    clarification: null,
  };
}
reset_rendered();

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
  return !!(view.info && typeof view.info.state === 'string' && view.info.state !== 'running'
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

  const running = active_phases.has(p);
  $('cancel').hidden = !running || !view.id;
  const has_report = s.report.length > 0;
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
  render_sources();
  // The sources column is left out while there is nothing it could show.
  const no_side = s.sources.length === 0 && (p === 'clarification' || !running);
  $('session-side').hidden = no_side;
  $('session-grid').classList.toggle('no-side', no_side);
  render_report(running || replaying());
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

function render_stats(p) {
  const s = view.state;
  const parts = [];
  const info = view.info || {};
  if (info.created_at) {
    const start = new Date(info.created_at).getTime();
    const end_iso = info.finished_at || (active_phases.has(p) ? null : info.updated_at);
    const end = end_iso ? new Date(end_iso).getTime() : Date.now();
    if (Number.isFinite(start) && Number.isFinite(end) && end >= start) {
      const secs = Math.round((end - start) / 1000);
      parts.push(['Time', secs < 60 ? `${secs} s` : `${Math.floor(secs / 60)} min ${secs % 60} s`]);
    }
  }
  parts.push(['Sources', String(s.sources.length)]);
  parts.push(['Cited', String(s.citations.size)]);
  parts.push(['Agents', String(s.lanes.length)]);
  parts.push(['Model calls', String(s.usage.calls)]);
  parts.push(['Tokens', format_tokens(s.usage.input_tokens + s.usage.output_tokens)]);
  if (s.usage.cost_usd > 0)
    parts.push(['Cost', `$${s.usage.cost_usd.toFixed(4)}`]);
  const html = parts.map(([k, v]) =>
    `<span class="stat"><span class="stat-label">${escape_html(k)}</span> <span class="stat-value">${escape_html(v)}</span></span>`).join('');
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
    $('clarify-questions').innerHTML = render_markdown(s.clarification);
    if (!$('clarify-answer').value)
      $('clarify-answer').focus({ preventScroll: true });
  }
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
    `<li>${render_inline_markdown(step)}</li>`).join('');
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
        const label = escape_html(host_of(u) || u.slice(0, 60));
        return url && is_web_url(url)
          ? `<li class="page"><a href="${escape_html(url)}" target="_blank" rel="noopener noreferrer nofollow" title="${escape_html(u)}">${label}</a></li>`
          : `<li class="page" title="${escape_html(u)}">${label}</li>`;
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

function render_lane_report(details, lane) {
  details.querySelector('.prose').innerHTML = render_markdown(lane.report, {
    scope: lane.key,
    citation: (n) => {
      const card = lane_citation_card(view.state, lane.key, n);
      return card ? { url: card.url, title: card.title } : null;
    },
  });
  delete details.dataset.stale;
}

function cite_info(n) {
  const card = citation_card(view.state, n);
  return card ? { url: card.url, title: card.title } : null;
}

function render_sources() {
  const s = view.state;
  $('sources-count').textContent = s.sources.length ? String(s.sources.length) : '';
  $('sources-empty').hidden = s.sources.length > 0;
  const key = `${s.sources.length}:${s.citations.size}`;
  if (view.rendered.sources_key === key)
    return;
  view.rendered.sources_key = key;
  const cited = new Map();
  for (const [n, id] of s.citations) {
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
  $('sources').innerHTML = order.map(({ d, nums }) => {
    const url = safe_url(d.url);
    const title = escape_html(d.title);
    const doc = escape_html(d.document_id);
    const head = url && is_web_url(url)
      ? `<a class="source-title" data-doc="${doc}" href="${escape_html(url)}" target="_blank" rel="noopener noreferrer nofollow">${title}</a>`
      : `<span class="source-title" data-doc="${doc}" tabindex="0">${title}</span>`;
    const badges = nums.map((n) => `<span class="num">${n}</span>`).join('');
    const kind = d.is_internet ? 'web' : (d.source_type || 'document');
    return `<li class="source${nums.length ? ' cited' : ''}" data-testid="source" data-document-id="${escape_html(d.document_id)}">`
      + `<div class="source-head">${badges}${head}</div>`
      + `<div class="source-meta"><span class="kind">${escape_html(kind)}</span>`
      + `<span class="where" title="${escape_html(d.url)}">${escape_html(host_of(d.url))}</span></div></li>`;
  }).join('');
}

function render_report(throttle) {
  const s = view.state;
  $('report-section').hidden = !s.report_started && !s.report;
  const text = s.report;
  if (view.rendered.report === text && view.rendered.citations === s.citations.size)
    return;
  // While the report streams in, re-render at most a few times a second.
  const now = performance.now();
  if (throttle && now - view.last_report_render < 200) {
    if (!view.report_timer)
      view.report_timer = setTimeout(() => {
        view.report_timer = 0;
        schedule();
      }, 220);
    return;
  }
  view.last_report_render = now;
  view.rendered.report = text;
  view.rendered.citations = s.citations.size;
  $('report').innerHTML = text
    ? render_markdown(text, { citation: cite_info })
    : '<p class="muted">The report is being written…</p>';
  const nums = [...s.citations.keys()].sort((a, b) => a - b);
  $('references-wrap').hidden = nums.length === 0;
  $('references').innerHTML = nums.map((n) => {
    const card = citation_card(s, n);
    if (!card)
      return '';
    const url = safe_url(card.url);
    const title = escape_html(card.title);
    const link = url && is_web_url(url)
      ? `<a href="${escape_html(url)}" target="_blank" rel="noopener noreferrer nofollow">${title}</a>`
      : `<span class="ref-title">${title}</span>`;
    return `<li id="ref-${n}" value="${n}">${link}`
      + (card.url ? ` <span class="muted ref-url">${escape_html(card.url)}</span>` : '') + '</li>';
  }).join('');
}

// -- citation cards -------------------------------------------------------------

let card_anchor = null;
let card_hide_timer = 0;
// What shows a card: citation chips and the titles in the sources list.
const card_targets = 'a.cite, #sources .source-title';

function show_card(chip) {
  clearTimeout(card_hide_timer);
  const n = Number(chip.dataset.cite);
  // Chips of an intermediate report use their agent's own numbers; an
  // entry of the sources list names its document.
  let card = chip.dataset.doc !== undefined ? document_card(view.state, chip.dataset.doc)
    : chip.dataset.scope ? lane_citation_card(view.state, chip.dataset.scope, n)
      : citation_card(view.state, n);
  if (!card && chip.dataset.doc !== undefined)
    return;
  if (!card) {
    const href = chip.getAttribute('href') || '';
    card = { number: n, title: `Source ${n}`, url: href.startsWith('#') ? '' : href, passage: '' };
  }
  const el = $('citation-card');
  el.innerHTML = render_citation_card(card);
  el.hidden = false;
  card_anchor = chip;
  chip.setAttribute('aria-describedby', 'citation-card');
  place_card();
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
  document.addEventListener('click', (e) => {
    const chip = e.target.closest && e.target.closest('a.cite, a[href^="#source-"]');
    if (!chip)
      return;
    const href = chip.getAttribute('href') || '';
    if (is_web_url(href))
      return; // opens the page in a new tab
    // Local documents: browsers do not follow file: links from a web page;
    // show the source in the references instead.
    e.preventDefault();
    const n = Number(chip.dataset.cite || href.replace('#source-', ''));
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
    return `<li><a class="history-item" data-testid="history-item" data-id="${escape_html(it.id)}"`
      + ` data-state="${escape_html(state)}" href="#/research/${encodeURIComponent(it.id)}">`
      + `<span class="history-q">${escape_html(clip(q, 140))}</span>`
      + `<span class="history-meta"><span class="dot" data-state="${escape_html(state)}" aria-hidden="true"></span>`
      + `${escape_html(state_labels[state] || state)}${when ? ` · ${escape_html(when)}` : ''}`
      + `${it.parent_id ? ' · follow-up' : ''}</span></a></li>`;
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
    depth: $('opt-depth').value || undefined,
  };
}

function check_options(o) {
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
  const problem = check_options(options);
  if (problem) {
    show_error(err, problem);
    return;
  }
  show_error(err, '');
  const button = $('ask-submit');
  button.disabled = true;
  try {
    const res = await api.start(options);
    if (!res || typeof res.id !== 'string')
      throw new Error('The server did not return a session id.');
    $('question').value = '';
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

// Exports carry the token when there is one (a plain link cannot).
async function export_click(e) {
  const token = load_token();
  const format = export_formats.find(([id]) => id === e.currentTarget.id)[1];
  if ((!token && format !== 'pdf' && format !== 'docx') || !view.id)
    return;
  e.preventDefault();
  try {
    const blob = await api.report_blob(view.id, format);
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = `quarry-${view.id}.${format}`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
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
}

// Exposed for debugging in the browser's console (and for tests).
window.quarry_page = { view, api, citation_numbers };

if (document.readyState === 'loading')
  document.addEventListener('DOMContentLoaded', setup);
else
  setup();
