// The view state of a research session, folded from its packets.
//
// apply_packet(state, packet) is the one reducer: no DOM, no I/O, no clock,
// so the same packets always give the same state (the page and the tests in
// tests/web run it alike). It updates `state` in place and returns it, and
// bumps `state.version` when anything changed, so the page can re-render
// only what is new; whole-state copies per packet would make a long stream
// quadratic.
//
// Packets are those of core/packets.hpp: `{seq, session, placement:
// {turn_index, tab_index, sub_turn_index}, obj: {type, ...}}`. They come from
// the network: every field is checked, unknown types are ignored, packets
// whose seq is not above the last one are dropped (a replay after a
// reconnect repeats nothing), and every list and text is bounded.

/// Bounds of what one session's state keeps.
export const limits = {
  text: 4 * 1024 * 1024, // plan, report, each intermediate report
  lanes: 256,
  sources: 5000,
  messages: 500, // errors, notices
  queries_per_lane: 200,
  urls_per_lane: 200,
  passage: 700, // characters of a source's text on a citation card
  claims: 1000, // claim_verified packets kept
};

/// A fresh state.
export function create_state() {
  return {
    version: 0,
    last_seq: 0,
    packets: 0,
    /// The plan's text (deep_research_plan_delta) and whether it is complete.
    plan: '',
    plan_done: false,
    /// The reflective strategy's plan (reflective_plan): {id, title, status}
    /// per step, the latest one; and the reflector's decisions.
    checklist: [],
    reflections: [],
    /// The verification_summary packet, when the report was verified.
    verification: null,
    /// claim_verified packets: {id, claim, verdict, source, evidence,
    /// snippet_only}; evidence_by_number: citation number -> the evidence a
    /// claim citing it was judged by (a supported one first).
    claims: [],
    evidence_by_number: new Map(),
    /// Top-level reasoning (the orchestrator's), when the model streams it.
    reasoning: '',
    /// One lane per research agent, in the order they started.
    lanes: [],
    lane_by_key: new Map(),
    /// Every document seen, in the order they arrived; sources_by_id maps a
    /// document_id to its entry.
    sources: [],
    sources_by_id: new Map(),
    /// citation number -> document_id.
    citations: new Map(),
    /// The final report (message_delta) and whether it has started.
    report: '',
    report_started: false,
    final_document_ids: [],
    /// Clarifying questions, when the session asks the user first, and
    /// whether the research went on after them.
    clarification: null,
    clarification_answered: false,
    errors: [],
    notices: [],
    /// Set by a `resumed` packet: {checkpoint, superseded_after}.
    resumed: null,
    usage: {
      calls: 0,
      input_tokens: 0,
      output_tokens: 0,
      reasoning_tokens: 0,
      cached_input_tokens: 0,
      cost_usd: 0,
      by_role: {},
    },
    /// Set by the `stop` packet: the run is over.
    stopped: false,
    stop_reason: null,
    /// Set by the stream's `end` event (see apply_end).
    end_state: null,
    truncated: false,
  };
}

function str(obj, key) {
  const v = obj[key];
  return typeof v === 'string' ? v : '';
}

function num(obj, key) {
  const v = obj[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

function int_or_null(v) {
  return Number.isInteger(v) ? v : null;
}

function append(state, current, text) {
  if (current.length + text.length > limits.text) {
    state.truncated = true;
    return current + text.slice(0, Math.max(0, limits.text - current.length));
  }
  return current + text;
}

function push_bounded(state, list, item, max) {
  if (list.length >= max) {
    state.truncated = true;
    return false;
  }
  list.push(item);
  return true;
}

/// A document (Onyx's SearchDoc) as the page keeps it, or null when it has
/// no id.
export function normalize_document(d) {
  if (d === null || typeof d !== 'object' || Array.isArray(d))
    return null;
  const id = str(d, 'document_id');
  if (!id)
    return null;
  const link = str(d, 'link') || str(d, 'url');
  return {
    document_id: id.slice(0, 1000),
    title: (str(d, 'semantic_identifier') || str(d, 'title') || link || id).slice(0, 1000),
    url: link.slice(0, 8192),
    blurb: str(d, 'blurb').slice(0, 20000),
    snippet: str(d, 'snippet').slice(0, 20000),
    content: str(d, 'content').slice(0, 100000),
    source_type: str(d, 'source_type').slice(0, 100),
    is_internet: d.is_internet === true,
    snippet_only: d.snippet_only === true,
    updated_at: str(d, 'updated_at').slice(0, 100),
  };
}

// Adds or merges a document; returns its entry. Later packets may carry
// more text (an opened page after its search result): the longer text wins.
function add_source(state, raw, lane) {
  const doc = normalize_document(raw);
  if (!doc)
    return null;
  let entry = state.sources_by_id.get(doc.document_id);
  if (!entry) {
    if (state.sources.length >= limits.sources) {
      state.truncated = true;
      return null;
    }
    entry = { ...doc, lanes: [] };
    state.sources.push(entry);
    state.sources_by_id.set(doc.document_id, entry);
  } else {
    for (const k of ['blurb', 'snippet', 'content'])
      if (doc[k].length > entry[k].length)
        entry[k] = doc[k];
    // Read once, read for good: a later search result does not undo it.
    entry.snippet_only = entry.snippet_only && doc.snippet_only;
    if (!entry.url && doc.url)
      entry.url = doc.url;
    if ((entry.title === entry.document_id || entry.title === entry.url)
        && doc.title !== doc.document_id && doc.title !== doc.url)
      entry.title = doc.title;
  }
  if (lane && !entry.lanes.includes(lane.key) && entry.lanes.length < 64)
    entry.lanes.push(lane.key);
  return entry;
}

function add_documents(state, list, lane) {
  const ids = [];
  if (!Array.isArray(list))
    return ids;
  for (const d of list) {
    const entry = add_source(state, d, lane);
    if (entry)
      ids.push(entry.document_id);
  }
  return ids;
}

function lane_of(state, where, create_task) {
  const key = `${where.turn}:${where.tab}`;
  let lane = state.lane_by_key.get(key);
  if (lane || create_task === undefined)
    return lane || null;
  if (state.lanes.length >= limits.lanes) {
    state.truncated = true;
    return null;
  }
  // Cycles number the orchestrator turns that started agents, from 1.
  const turns = new Set(state.lanes.map((l) => l.turn));
  turns.add(where.turn);
  const cycle = [...turns].sort((a, b) => a - b).indexOf(where.turn) + 1;
  lane = {
    key,
    turn: where.turn,
    tab: where.tab,
    /// "Agent N" on the page: the branch number, from 1.
    number: where.tab + 1,
    cycle,
    task: create_task,
    /// starting, searching, reading, thinking, writing, done, failed.
    status: 'starting',
    /// What the agent does now, as a line of text.
    action: 'Starting',
    queries: [],
    urls: [],
    document_ids: [],
    report: '',
    report_done: false,
    cited_ids: [],
    error: null,
  };
  state.lanes.push(lane);
  state.lane_by_key.set(key, lane);
  return lane;
}

function quote_list(items, max) {
  const shown = items.slice(0, max).map((q) => `“${q}”`).join(', ');
  return items.length > max ? `${shown} and ${items.length - max} more` : shown;
}

/// Folds one packet into `state`; returns `state`. Malformed packets and
/// repeated sequence numbers change nothing.
export function apply_packet(state, packet) {
  if (packet === null || typeof packet !== 'object')
    return state;
  const obj = packet.obj;
  if (obj === null || typeof obj !== 'object' || typeof obj.type !== 'string')
    return state;
  if (packet.seq !== undefined) {
    if (!Number.isSafeInteger(packet.seq) || packet.seq <= state.last_seq)
      return state;
    state.last_seq = packet.seq;
  }
  const p = packet.placement && typeof packet.placement === 'object' ? packet.placement : {};
  const where = {
    turn: int_or_null(p.turn_index) ?? 0,
    tab: int_or_null(p.tab_index) ?? 0,
    sub: int_or_null(p.sub_turn_index),
  };
  state.packets += 1;
  state.version += 1;
  if ((state.stopped || state.end_state !== null) && obj.type !== 'stop'
      && obj.type !== 'usage' && obj.type !== 'chat_heartbeat') {
    // The run goes on after a stop: answers to the clarifying questions,
    // or a resumed session.
    state.stopped = false;
    state.stop_reason = null;
    state.end_state = null;
    if (state.clarification !== null)
      state.clarification_answered = true;
  }
  const lane = lane_of(state, where);
  switch (obj.type) {
    case 'deep_research_plan_start':
      break;
    case 'reflective_plan': {
      const p = obj.plan && typeof obj.plan === 'object' ? obj.plan : {};
      const steps = Array.isArray(p.steps) ? p.steps.slice(0, 50) : [];
      state.checklist = steps.filter((x) => x && typeof x === 'object').map((x) => ({
        id: str(x, 'id').slice(0, 100),
        title: str(x, 'title').slice(0, 1000),
        status: ['pending', 'in_progress', 'completed', 'skipped'].includes(x.status)
          ? x.status : 'pending',
      }));
      state.plan_done = true;
      break;
    }
    case 'reflection':
      push_bounded(state, state.reflections, {
        step_id: str(obj, 'step_id').slice(0, 100),
        decision: str(obj, 'decision').slice(0, 20),
        taken: str(obj, 'taken').slice(0, 20),
        refused: obj.refused === true,
        why: str(obj, 'why').slice(0, 1000),
      }, limits.messages);
      if (obj.refused === true)
        push_bounded(state, state.notices, str(obj, 'why').slice(0, 1000), limits.messages);
      break;
    case 'claim_verified': {
      if (state.claims.length >= limits.claims)
        break;
      const source = Number.isInteger(obj.source) ? obj.source : null;
      const claim = {
        id: Number.isInteger(obj.id) ? obj.id : state.claims.length,
        claim: str(obj, 'claim').slice(0, 4000),
        verdict: str(obj, 'verdict').slice(0, 40),
        source,
        evidence: str(obj, 'evidence').slice(0, 4000),
        snippet_only: obj.snippet_only === true,
      };
      state.claims.push(claim);
      if (source !== null && claim.evidence) {
        const had = state.evidence_by_number.get(source);
        if (!had || (had.verdict !== 'supported' && claim.verdict === 'supported'))
          state.evidence_by_number.set(source, claim);
      }
      break;
    }
    case 'verification_summary': {
      const n = (k) => (Number.isFinite(obj[k]) ? obj[k] : 0);
      state.verification = {
        claims: n('claims'), supported: n('supported'), unsupported: n('unsupported'),
        unverified: n('unverified'), recited: n('recited'), rate: n('rate'),
      };
      break;
    }
    case 'deep_research_plan_delta':
      state.plan = append(state, state.plan, str(obj, 'content'));
      break;
    case 'section_end':
      if (state.plan && !state.plan_done && !lane)
        state.plan_done = true;
      if (lane && lane.status === 'writing') {
        lane.report_done = true;
        lane.status = 'done';
        lane.action = 'Done';
      }
      break;
    case 'top_level_branching':
      state.plan_done = state.plan_done || state.plan.length > 0;
      break;
    case 'reasoning_start':
      if (lane && where.sub !== null && lane.status !== 'done') {
        lane.status = 'thinking';
        lane.action = 'Thinking';
      }
      break;
    case 'reasoning_delta':
      if (!lane || where.sub === null)
        state.reasoning = append(state, state.reasoning, str(obj, 'reasoning'));
      break;
    case 'reasoning_done':
      break;
    case 'research_agent_start': {
      state.plan_done = state.plan_done || state.plan.length > 0;
      const l = lane || lane_of(state, where, str(obj, 'research_task').slice(0, 10000));
      if (l && lane)
        l.task = str(obj, 'research_task').slice(0, 10000);
      break;
    }
    case 'search_tool_start':
      if (lane) {
        lane.status = 'searching';
        lane.action = obj.is_internet_search === true ? 'Searching the web'
                                                       : 'Searching the documents';
      }
      break;
    case 'search_tool_queries_delta': {
      const qs = Array.isArray(obj.queries)
        ? obj.queries.filter((q) => typeof q === 'string').map((q) => q.slice(0, 1000)) : [];
      if (lane) {
        for (const q of qs)
          push_bounded(state, lane.queries, q, limits.queries_per_lane);
        lane.status = 'searching';
        lane.action = qs.length > 0 ? `Searching ${quote_list(qs, 3)}` : 'Searching';
      }
      break;
    }
    case 'search_tool_documents_delta':
    case 'open_url_documents': {
      const ids = add_documents(state, obj.documents, lane);
      if (lane)
        for (const id of ids)
          if (!lane.document_ids.includes(id))
            push_bounded(state, lane.document_ids, id, limits.sources);
      break;
    }
    case 'open_url_start':
      if (lane) {
        lane.status = 'reading';
        lane.action = 'Opening pages';
      }
      break;
    case 'open_url_urls': {
      const urls = Array.isArray(obj.urls)
        ? obj.urls.filter((u) => typeof u === 'string').map((u) => u.slice(0, 8192)) : [];
      if (lane) {
        for (const u of urls)
          push_bounded(state, lane.urls, u, limits.urls_per_lane);
        lane.status = 'reading';
        lane.action = urls.length === 1 ? `Reading ${urls[0]}`
                                        : `Reading ${urls.length} pages`;
      }
      break;
    }
    case 'intermediate_report_start':
      if (lane) {
        lane.status = 'writing';
        lane.action = 'Writing its report';
      }
      break;
    case 'intermediate_report_delta':
      if (lane)
        lane.report = append(state, lane.report, str(obj, 'content'));
      break;
    case 'intermediate_report_cited_docs': {
      const ids = add_documents(state, obj.cited_docs, lane);
      if (lane) {
        lane.cited_ids = ids.slice(0, limits.sources);
        lane.report_done = true;
        lane.status = 'done';
        lane.action = 'Done';
      }
      break;
    }
    case 'message_start':
      state.report_started = true;
      state.plan_done = state.plan_done || state.plan.length > 0;
      state.final_document_ids = add_documents(state, obj.final_documents, null);
      break;
    case 'message_delta':
      state.report_started = true;
      state.report = append(state, state.report, str(obj, 'content'));
      break;
    case 'citation_info': {
      const n = obj.citation_number;
      const id = str(obj, 'document_id');
      if (Number.isInteger(n) && n > 0 && n < 100000 && id
          && (state.citations.has(n) || state.citations.size < limits.sources))
        state.citations.set(n, id.slice(0, 1000));
      break;
    }
    case 'clarification':
      state.clarification = str(obj, 'questions').slice(0, 100000);
      state.clarification_answered = false;
      break;
    case 'error': {
      const message = str(obj, 'message').slice(0, 10000) || 'An error occurred.';
      push_bounded(state, state.errors,
                   { message, code: str(obj, 'code').slice(0, 100), lane: lane ? lane.key : null },
                   limits.messages);
      if (lane && lane.status !== 'done') {
        lane.status = 'failed';
        lane.action = `Failed: ${message.slice(0, 200)}`;
        lane.error = message;
      }
      break;
    }
    case 'notice':
      push_bounded(state, state.notices, str(obj, 'text').slice(0, 10000), limits.messages);
      break;
    case 'resumed': {
      // The session goes on after its process stopped; lanes of the attempt
      // that was interrupted (packets after superseded_after) end as
      // stopped, and the run starts again from its checkpoint.
      const after = int_or_null(obj.superseded_after) ?? 0;
      state.resumed = {checkpoint: int_or_null(obj.checkpoint) ?? 0, superseded_after: after};
      for (const l of state.lanes)
        if (l.status !== 'done' && l.status !== 'failed') {
          l.status = 'stopped';
          l.action = 'Interrupted';
        }
      push_bounded(state, state.notices,
                   'The research was interrupted and goes on from its last checkpoint.',
                   limits.messages);
      break;
    }
    case 'usage': {
      const u = state.usage;
      u.calls += 1;
      u.input_tokens += num(obj, 'input_tokens');
      u.output_tokens += num(obj, 'output_tokens');
      u.reasoning_tokens += num(obj, 'reasoning_tokens');
      u.cached_input_tokens += num(obj, 'cached_input_tokens');
      u.cost_usd += num(obj, 'cost_usd');
      const role = str(obj, 'role').slice(0, 50) || 'other';
      if (Object.keys(u.by_role).length < 50 || u.by_role[role]) {
        const r = u.by_role[role] || (u.by_role[role] = { calls: 0, tokens: 0, cost_usd: 0 });
        r.calls += 1;
        r.tokens += num(obj, 'input_tokens') + num(obj, 'output_tokens');
        r.cost_usd += num(obj, 'cost_usd');
      }
      break;
    }
    case 'stop':
      state.stopped = true;
      state.stop_reason = typeof obj.stop_reason === 'string' ? obj.stop_reason.slice(0, 100) : null;
      // An agent that had not handed in its report when the run stopped
      // was stopped (a cancelled run's stop carries no reason once its
      // findings became the report).
      for (const l of state.lanes)
        if (l.status !== 'done' && l.status !== 'failed') {
          l.status = 'stopped';
          l.action = 'Stopped';
        }
      break;
    default:
      // chat_heartbeat and types of later versions.
      state.version -= 1;
      break;
  }
  return state;
}

/// Records the stream's `end` event (`{"state": "completed"}`, ...).
export function apply_end(state, end) {
  const s = end && typeof end.state === 'string' ? end.state.slice(0, 50) : 'unknown';
  state.end_state = s;
  state.version += 1;
  return state;
}

/// Folds a list of packets into a fresh state.
export function fold(packets) {
  const state = create_state();
  for (const p of packets)
    apply_packet(state, p);
  return state;
}

/// What the session is doing, as one of: clarification, planning,
/// researching, writing, completed, cancelled, failed, interrupted, idle.
export function phase(state) {
  if (state.end_state && state.end_state !== 'running')
    return state.end_state;
  if (state.clarification !== null && !state.clarification_answered)
    return 'clarification';
  if (state.stopped) {
    if (state.stop_reason === 'user_cancelled' || state.stop_reason === 'cancelled')
      return 'cancelled';
    if (state.stop_reason === 'clarification')
      return 'clarification';
    return state.errors.length > 0 && !state.report ? 'failed' : 'completed';
  }
  if (state.report_started)
    return 'writing';
  if (state.lanes.length > 0 || state.plan_done)
    return 'researching';
  if (state.plan)
    return 'planning';
  return state.packets > 0 ? 'planning' : 'idle';
}

/// The notes shown above a session: its notices (the latest 20), then a
/// line for a run that stopped early, unless a notice of the server already
/// says it. `p` is the phase the page shows (phase(), or the stored state of
/// a session being replayed). A session cancelled through the API is worded
/// by the research as interrupted; those notices give way to one saying it
/// was cancelled.
export function session_notes(state, p) {
  const has_report = state.report.length > 0;
  let notes = state.notices.slice(-20);
  let stop = stop_note(state.stop_reason, has_report, notes);
  if (p === 'cancelled') {
    notes = notes.filter((n) => !/^The research was interrupted;/.test(n));
    stop = has_report ? 'The research was cancelled: the report holds what was found until then.'
      : 'The research was cancelled before it found anything.';
  }
  if (stop)
    notes.push(stop);
  return notes;
}

// A line for a run that stopped early (the `stop` packet's reason).
// Nothing when a notice of the server already says it.
function stop_note(reason, has_report, notices) {
  if (!reason || reason === 'clarification')
    return '';
  const word = { user_cancelled: 'cancel', cancelled: 'cancel', interrupted: 'interrupt',
                 deadline: 'deadline' }[reason];
  if (word && notices.some((n) => n.toLowerCase().includes(word)))
    return '';
  const rest = has_report ? ': the report holds what was found until then.' : '.';
  if (reason === 'user_cancelled' || reason === 'cancelled')
    return `The research was cancelled${rest}`;
  if (reason === 'interrupted')
    return `The research was interrupted${rest}`;
  if (reason === 'deadline')
    return `The deadline was reached${rest}`;
  return `The research stopped early (${reason})${rest}`;
}

/// The steps of the plan: its non-blank lines, list markers removed.
export function plan_steps(state) {
  return state.plan.split('\n')
    .map((l) => l.trim().replace(/^(?:\d{1,4}[.)]|[-*+])(?:[ \t]+|$)/, ''))
    .filter((l) => l.length > 0);
}

/// The document cited as number `n`, or null.
export function cited_document(state, n) {
  const id = state.citations.get(n);
  return id === undefined ? null : state.sources_by_id.get(id) || null;
}

/// The citation numbers of a document, ascending.
export function citation_numbers(state, document_id) {
  const out = [];
  for (const [n, id] of state.citations)
    if (id === document_id)
      out.push(n);
  return out.sort((a, b) => a - b);
}

/// Cuts `text` to about `max` characters at a word boundary. Runs of
/// spaces become one; line breaks stay, one for a run.
export function clip(text, max) {
  const t = String(text).replace(/[ \t\f\v\r]+/g, ' ').replace(/ ?\n\s*/g, '\n').trim();
  if (t.length <= max)
    return t;
  const cut = t.lastIndexOf(' ', max);
  return `${t.slice(0, cut > max * 0.6 ? cut : max)}…`;
}

function card_of(doc, n, evidence = null) {
  if (!doc)
    return null;
  const text = doc.content || doc.blurb || doc.snippet;
  return {
    number: n,
    document_id: doc.document_id,
    title: doc.title,
    url: doc.url,
    source_type: doc.source_type,
    // The verification's evidence from what was read, when there is some.
    passage: evidence ? clip(evidence.evidence, limits.passage) : text ? clip(text, limits.passage) : '',
    evidence: evidence !== null,
    snippet_only: doc.snippet_only || (evidence !== null && evidence.snippet_only),
  };
}

/// What a citation card shows for citation `n` of the final report:
/// `{number, title, url, passage, source_type, document_id}`, or null when
/// `n` is not cited. The passage is the text of the document that the
/// packets carried (the opened page's content, else the search result's
/// blurb or snippet).
export function citation_card(state, n) {
  return card_of(cited_document(state, n), n, state.evidence_by_number.get(n) || null);
}

/// The card of a source by its document id (`number`: its first citation
/// number, or null when it is not cited), or null for an unknown id.
export function document_card(state, document_id) {
  const doc = state.sources_by_id.get(document_id);
  if (!doc)
    return null;
  const nums = citation_numbers(state, document_id);
  return card_of(doc, nums.length > 0 ? nums[0] : null);
}

/// The card for `[n]` in the intermediate report of the lane `lane_key`.
/// A research agent numbers its documents itself, from 1, in the order its
/// tools returned them (each document once), which is the order of
/// `lane.document_ids`.
export function lane_citation_card(state, lane_key, n) {
  const lane = state.lane_by_key.get(lane_key);
  if (!lane || !Number.isInteger(n) || n < 1 || n > lane.document_ids.length)
    return null;
  return card_of(state.sources_by_id.get(lane.document_ids[n - 1]), n);
}
