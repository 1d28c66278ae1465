// app/web/packets.js: the view state folded from a session's packets, fed
// with packet streams recorded from `quarry research --json` (fixtures/).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  apply_end, apply_packet, citation_card, citation_numbers, clip, create_state, document_card,
  fold, lane_citation_card, limits, phase, plan_steps, session_notes,
} from '../../app/web/packets.js';
import { render_citation_card } from '../../app/web/html.js';

function load(name) {
  return readFileSync(new URL(`fixtures/${name}`, import.meta.url), 'utf8')
    .split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

const research = load('research.jsonl');
const clarification = load('clarification.jsonl');

function packet(seq, obj, placement = {}) {
  return { seq, session: 'qtest', placement: { turn_index: 0, tab_index: 0, sub_turn_index: null, ...placement }, obj };
}

test('packets: a recorded research gives the plan, the lanes, the sources and the report', () => {
  const s = fold(research);
  assert.equal(s.last_seq, research.length);
  assert.equal(s.packets, research.length);
  // The plan: four numbered steps.
  assert.equal(plan_steps(s).length, 4);
  assert.equal(plan_steps(s)[0], 'What is the example corpus about?');
  assert.ok(s.plan_done);
  // Four agents: three in the first cycle (tabs 0-2), one in the second.
  assert.deepEqual(s.lanes.map((l) => [l.key, l.number, l.cycle]),
                   [['1:1', 2, 1], ['1:2', 3, 1], ['1:0', 1, 1], ['2:0', 1, 2]]);
  const first = s.lane_by_key.get('1:0');
  assert.equal(first.task, 'What is the example corpus about?');
  assert.deepEqual(first.queries, ['What is the example corpus about?']);
  assert.ok(first.document_ids.length > 0);
  assert.ok(first.cited_ids.length > 0);
  assert.ok(first.report.startsWith('This '));
  for (const lane of s.lanes) {
    assert.equal(lane.status, 'done', lane.key);
    assert.ok(lane.report_done);
    assert.ok(lane.report.length > 100);
  }
  // Sources: each document once, with its title, link and passage.
  const ids = s.sources.map((d) => d.document_id);
  assert.equal(new Set(ids).size, ids.length);
  assert.ok(s.sources.length >= 16);
  for (const d of s.sources) {
    assert.ok(d.title);
    assert.match(d.url, /^file:\/\/\//);
    assert.ok(d.blurb.length > 0);
    assert.equal(d.source_type, 'internal');
  }
  // The report and its 16 citations, each to a known document.
  assert.ok(s.report_started);
  assert.ok(s.report.startsWith('This report answers the question'));
  assert.equal(s.citations.size, 16);
  for (const [n, id] of s.citations) {
    assert.ok(s.sources_by_id.has(id), `citation ${n} -> ${id}`);
    assert.ok(s.report.includes(`[[${n}]](`), `citation ${n} appears in the report`);
  }
  assert.deepEqual(citation_numbers(s, s.citations.get(6)), [6]);
  // Usage and the end.
  assert.equal(s.usage.calls, research.filter((p) => p.obj.type === 'usage').length);
  assert.ok(s.usage.input_tokens > 10000);
  assert.ok(s.usage.by_role.final.calls === 1);
  assert.ok(s.stopped);
  assert.equal(s.stop_reason, null);
  assert.equal(phase(s), 'completed');
  assert.equal(s.clarification, null);
  assert.deepEqual(s.errors, []);
  assert.equal(s.truncated, false);
});

test('packets: phases while the recorded research streams in', () => {
  const s = create_state();
  const seen = [];
  for (const p of research) {
    apply_packet(s, p);
    const ph = phase(s);
    if (seen[seen.length - 1] !== ph)
      seen.push(ph);
  }
  assert.deepEqual(seen, ['planning', 'researching', 'writing', 'completed']);
  apply_end(s, { state: 'completed' });
  assert.equal(phase(s), 'completed');
});

test('packets: lane actions follow the agent', () => {
  const s = create_state();
  const at = { turn_index: 1, tab_index: 0 };
  const sub = { ...at, sub_turn_index: 0 };
  apply_packet(s, packet(1, { type: 'research_agent_start', research_task: 'Find X' }, at));
  const lane = s.lane_by_key.get('1:0');
  assert.equal(lane.action, 'Starting');
  apply_packet(s, packet(2, { type: 'search_tool_start', is_internet_search: true }, sub));
  assert.equal(lane.action, 'Searching the web');
  apply_packet(s, packet(3, { type: 'search_tool_queries_delta', queries: ['a', 'b', 'c', 'd'] }, sub));
  assert.equal(lane.status, 'searching');
  assert.equal(lane.action, 'Searching “a”, “b”, “c” and 1 more');
  apply_packet(s, packet(4, { type: 'open_url_start' }, sub));
  apply_packet(s, packet(5, { type: 'open_url_urls', urls: ['https://example.com/a'] }, sub));
  assert.equal(lane.status, 'reading');
  assert.equal(lane.action, 'Reading https://example.com/a');
  apply_packet(s, packet(6, { type: 'open_url_documents', documents: [
    { document_id: 'web:1', semantic_identifier: 'Page A', link: 'https://example.com/a', blurb: 'short' },
  ] }, sub));
  apply_packet(s, packet(7, { type: 'reasoning_start' }, sub));
  assert.equal(lane.action, 'Thinking');
  apply_packet(s, packet(8, { type: 'intermediate_report_start' }, at));
  assert.equal(lane.status, 'writing');
  apply_packet(s, packet(9, { type: 'intermediate_report_delta', content: 'Found **X**.' }, at));
  apply_packet(s, packet(10, { type: 'section_end' }, at));
  assert.equal(lane.status, 'done');
  assert.equal(lane.report, 'Found **X**.');
  assert.deepEqual(lane.document_ids, ['web:1']);
  // An error in another lane marks that lane failed.
  apply_packet(s, packet(11, { type: 'research_agent_start', research_task: 'Find Y' }, { turn_index: 1, tab_index: 1 }));
  apply_packet(s, packet(12, { type: 'error', message: 'search backend down', code: 'unavailable' },
                            { turn_index: 1, tab_index: 1, sub_turn_index: 0 }));
  const failed = s.lane_by_key.get('1:1');
  assert.equal(failed.status, 'failed');
  assert.equal(failed.action, 'Failed: search backend down');
  assert.deepEqual(s.errors, [{ message: 'search backend down', code: 'unavailable', lane: '1:1' }]);
  apply_packet(s, packet(13, { type: 'notice', text: 'The deadline passed.' }));
  assert.deepEqual(s.notices, ['The deadline passed.']);
});

test('packets: a later document with more text enriches the source', () => {
  const s = create_state();
  apply_packet(s, packet(1, { type: 'search_tool_documents_delta', documents: [
    { document_id: 'd1', semantic_identifier: 'https://example.com/p', link: 'https://example.com/p', blurb: 'A snippet.' },
  ] }));
  apply_packet(s, packet(2, { type: 'open_url_documents', documents: [
    { document_id: 'd1', semantic_identifier: 'The Page', link: 'https://example.com/p', blurb: 'A snippet. And the whole page text, longer.', content: 'Full text.' },
  ] }));
  assert.equal(s.sources.length, 1);
  assert.equal(s.sources[0].title, 'The Page');
  assert.equal(s.sources[0].blurb, 'A snippet. And the whole page text, longer.');
  assert.equal(s.sources[0].content, 'Full text.');
});

test('packets: repeated and malformed packets change nothing', () => {
  const s = fold(research.slice(0, 100));
  const before = JSON.stringify({ plan: s.plan, lanes: s.lanes, sources: s.sources, last: s.last_seq, packets: s.packets });
  // A replay after a reconnect repeats seqs already seen.
  for (const p of research.slice(50, 100))
    apply_packet(s, p);
  for (const bad of [null, 1, 'x', [], {}, { obj: null }, { obj: { type: 7 } }, { seq: -1, obj: { type: 'notice', text: 'x' } },
                     { seq: 1.5, obj: { type: 'notice', text: 'x' } }, { seq: '101', obj: { type: 'notice', text: 'x' } }])
    apply_packet(s, bad);
  const after = JSON.stringify({ plan: s.plan, lanes: s.lanes, sources: s.sources, last: s.last_seq, packets: s.packets });
  assert.equal(after, before);
  assert.deepEqual(s.notices, []);
  // Wrong field types are ignored field by field.
  const t = create_state();
  apply_packet(t, packet(1, { type: 'deep_research_plan_delta', content: { x: 1 } }));
  apply_packet(t, packet(2, { type: 'search_tool_documents_delta', documents: [null, 3, { document_id: 5 }, { title: 'no id' }] }));
  apply_packet(t, packet(3, { type: 'citation_info', citation_number: '1', document_id: 'x' }));
  apply_packet(t, packet(4, { type: 'citation_info', citation_number: 0, document_id: 'x' }));
  apply_packet(t, packet(5, { type: 'usage', input_tokens: 'many', output_tokens: Infinity, cost_usd: NaN }));
  apply_packet(t, packet(6, { type: 'research_agent_start', research_task: 'T' }, { turn_index: 'x', tab_index: null }));
  apply_packet(t, packet(7, { type: 'some_future_type', x: 1 }));
  assert.equal(t.plan, '');
  assert.equal(t.sources.length, 0);
  assert.equal(t.citations.size, 0);
  assert.equal(t.usage.calls, 1);
  assert.equal(t.usage.input_tokens, 0);
  assert.equal(t.usage.output_tokens, 0);
  assert.equal(t.lanes[0].key, '0:0');
  assert.equal(t.last_seq, 7);
});

test('packets: text and lists are bounded', () => {
  const s = create_state();
  const chunk = 'x'.repeat(1 << 20);
  for (let i = 1; i <= 6; ++i)
    apply_packet(s, packet(i, { type: 'message_delta', content: chunk }));
  assert.equal(s.report.length, limits.text);
  assert.ok(s.truncated);
  let seq = 10;
  for (let i = 0; i < limits.lanes + 10; ++i)
    apply_packet(s, packet(++seq, { type: 'research_agent_start', research_task: 't' }, { turn_index: 1, tab_index: i }));
  assert.equal(s.lanes.length, limits.lanes);
  const docs = Array.from({ length: 1000 }, (_, i) => ({ document_id: `d${seq}-${i}` }));
  for (let i = 0; i < 7; ++i)
    apply_packet(s, packet(++seq, { type: 'search_tool_documents_delta', documents: docs.map((d) => ({ document_id: `${d.document_id}-${i}` })) }));
  assert.equal(s.sources.length, limits.sources);
  for (let i = 0; i < limits.messages + 5; ++i)
    apply_packet(s, packet(++seq, { type: 'notice', text: 'n' }));
  assert.equal(s.notices.length, limits.messages);
});

test('packets: a recorded clarification, then the research after the answer', () => {
  const s = fold(clarification);
  assert.equal(s.clarification, '1. Which climate zone is the house in?\n2. Is the house well insulated, or is an upgrade planned?');
  assert.ok(s.stopped);
  assert.equal(s.stop_reason, 'clarification');
  assert.equal(phase(s), 'clarification');
  apply_end(s, { state: 'clarification' });
  assert.equal(phase(s), 'clarification');
  assert.equal(s.lanes.length, 0);
  // After the reply the same session goes on with the next seqs.
  const offset = clarification.length;
  for (const p of research)
    apply_packet(s, { ...p, seq: p.seq + offset });
  assert.ok(s.clarification_answered);
  assert.equal(phase(s), 'completed');
  assert.equal(s.citations.size, 16);
  assert.equal(s.last_seq, offset + research.length);
});

test('packets: plan steps lose their list markers; an unfinished marker is no step', () => {
  const s = create_state();
  apply_packet(s, packet(1, { type: 'deep_research_plan_delta', content: '1. First\n\n- Second\n3) Third\n4.' }));
  assert.deepEqual(plan_steps(s), ['First', 'Second', 'Third']);
});

test('packets: a cancelled session', () => {
  const s = fold(research.slice(0, 200));
  assert.equal(phase(s), 'researching');
  apply_packet(s, packet(201, { type: 'stop', stop_reason: 'user_cancelled' }));
  assert.equal(phase(s), 'cancelled');
  assert.ok(s.lanes.every((l) => l.status === 'done' || l.status === 'stopped'));
  assert.ok(s.lanes.some((l) => l.status === 'stopped'));
});

// What `quarry serve` streams for a run cancelled through the API while an
// agent works: the research words it as an interruption, its findings
// become the report, and the stop carries no reason.
test('packets: a session cancelled while an agent works, as the server streams it', () => {
  const s = fold(research.slice(0, 200));
  const working = s.lanes.filter((l) => l.status !== 'done');
  assert.ok(working.length > 0);
  let seq = 200;
  apply_packet(s, packet(++seq, { type: 'notice',
    text: 'The research was interrupted; the report holds what was found until then.' }));
  apply_packet(s, packet(++seq, { type: 'notice',
    text: 'The research was interrupted; these are the findings gathered until then.' }));
  apply_packet(s, packet(++seq, { type: 'message_start' }, { turn_index: 3 }));
  apply_packet(s, packet(++seq, { type: 'message_delta', content: 'What was found.' }, { turn_index: 3 }));
  apply_packet(s, packet(++seq, { type: 'stop' }, { turn_index: 3 }));
  assert.ok(working.every((l) => l.status === 'stopped' && l.action === 'Stopped'));
  apply_end(s, { state: 'cancelled' });
  assert.equal(phase(s), 'cancelled');
  assert.deepEqual(session_notes(s, phase(s)),
                   ['The research was cancelled: the report holds what was found until then.']);
});

test('packets: a session cancelled or interrupted before its plan', () => {
  const notice = 'The research was interrupted; the report holds what was found until then.';
  const s = create_state();
  apply_packet(s, packet(1, { type: 'notice', text: notice }, { turn_index: 1 }));
  apply_packet(s, packet(2, { type: 'stop', stop_reason: 'interrupted' }));
  // Stopped by the server: the research's own notice says so, once.
  assert.deepEqual(session_notes(s, phase(s)), [notice]);
  apply_end(s, { state: 'cancelled' });
  assert.deepEqual(session_notes(s, phase(s)), ['The research was cancelled before it found anything.']);
  // Other notices stay.
  const t = create_state();
  apply_packet(t, packet(1, { type: 'notice', text: 'The corpus is empty.' }));
  apply_packet(t, packet(2, { type: 'stop', stop_reason: 'deadline' }));
  assert.deepEqual(session_notes(t, phase(t)), ['The corpus is empty.', 'The deadline was reached.']);
  // No second line for a stop a notice already explains.
  const d = create_state();
  const reached = 'The research deadline was reached; the report is written from what was found so far.';
  apply_packet(d, packet(1, { type: 'notice', text: reached }));
  apply_packet(d, packet(2, { type: 'stop', stop_reason: 'deadline' }));
  assert.deepEqual(session_notes(d, phase(d)), [reached]);
});

test('citation cards: title, URL and the passage the packets carried', () => {
  const s = fold(research);
  for (const n of s.citations.keys()) {
    const card = citation_card(s, n);
    const doc = s.sources_by_id.get(s.citations.get(n));
    assert.equal(card.number, n);
    assert.equal(card.title, doc.title);
    assert.equal(card.url, doc.url);
    assert.ok(card.passage.length > 20);
    assert.ok(card.passage.length <= limits.passage + 1);
    // The passage is the document's text as the packets carried it.
    assert.ok(doc.blurb.replace(/\s+/g, ' ').startsWith(card.passage.replace(/…$/, '').replace(/\s+/g, ' ').slice(0, 50)));
  }
  assert.equal(citation_card(s, 999), null);
  // A source's own card carries its first citation number, or none.
  assert.equal(document_card(s, s.citations.get(6)).number, 6);
  const uncited = s.sources.find((d) => citation_numbers(s, d.document_id).length === 0);
  assert.equal(document_card(s, uncited.document_id).number, null);
  assert.ok(!/card-num/.test(render_citation_card(document_card(s, uncited.document_id))));
  assert.equal(document_card(s, 'nope'), null);
  const html = render_citation_card(citation_card(s, 1));
  assert.match(html, /data-testid="card-title">Illustrative Case Study: An Electrically Heated House in a Cold Nordic Climate</);
  // A local document shows its file name: never its folder, never a file: URL.
  assert.match(html, /data-testid="card-url">case-study-nordic-cold-climate-house\.md</);
  assert.doesNotMatch(html, /file:|\/usr\//);
  assert.match(html, /data-testid="card-passage">This is an illustrative example\./);
  // A file: URL is shown, not linked (browsers do not follow it from a web page).
  assert.ok(!/<a [^>]*card-url/.test(html));
});

test('citation cards: an agent\'s intermediate report uses the agent\'s own numbers', () => {
  const s = fold(research);
  const lane = s.lane_by_key.get('1:0');
  // "This is an illustrative example [6]." in agent 1's report cites the
  // sixth document its search returned: the Nordic case study.
  assert.ok(lane.report.startsWith('This is an illustrative example [6].'));
  const card = lane_citation_card(s, '1:0', 6);
  assert.equal(card.document_id, 'corpus:9');
  assert.match(card.title, /^Illustrative Case Study: An Electrically Heated House/);
  assert.ok(card.passage.startsWith('This is an illustrative example.'));
  // Every number in every intermediate report names one of the agent's documents,
  // and those are the documents the agent reported as cited.
  for (const l of s.lanes) {
    const nums = [...l.report.matchAll(/\[(\d+)\]/g)].map((m) => Number(m[1]));
    assert.ok(nums.length > 0);
    const ids = new Set(nums.map((n) => lane_citation_card(s, l.key, n)?.document_id));
    assert.deepEqual([...ids].sort(), [...l.cited_ids].sort(), l.key);
  }
  assert.equal(lane_citation_card(s, '1:0', 0), null);
  assert.equal(lane_citation_card(s, '1:0', 11), null);
  assert.equal(lane_citation_card(s, '9:9', 1), null);
});

test('citation cards: hostile titles, URLs and passages are escaped', () => {
  const s = create_state();
  apply_packet(s, packet(1, { type: 'search_tool_documents_delta', documents: [{
    document_id: 'evil', semantic_identifier: '<img src=x onerror=alert(1)>', link: 'javascript:alert(1)',
    blurb: '</blockquote><script>alert(1)</script>', source_type: '<b>web</b>',
  }, {
    document_id: 'good', semantic_identifier: 'A "quoted" title', link: 'https://example.com/a?b=1&c=2', content: 'The page text.',
  }] }));
  apply_packet(s, packet(2, { type: 'citation_info', citation_number: 1, document_id: 'evil' }));
  apply_packet(s, packet(3, { type: 'citation_info', citation_number: 2, document_id: 'good' }));
  const evil = render_citation_card(citation_card(s, 1));
  assert.ok(!/<img|<script|<b>|href=/.test(evil), evil);
  assert.match(evil, /&lt;img src=x onerror=alert\(1\)&gt;/);
  // A URL that is not http(s) is neither linked nor shown as a location.
  assert.doesNotMatch(evil, /javascript/);
  const good = render_citation_card(citation_card(s, 2));
  assert.match(good, /<a class="card-url" data-testid="card-url" href="https:\/\/example\.com\/a\?b=1&amp;c=2"[^>]*>example\.com\/a</);
  assert.match(good, /A &quot;quoted&quot; title/);
  assert.match(good, /The page text\./);
});

test('citation cards: long passages are clipped at a word', () => {
  assert.equal(clip('one two three', 100), 'one two three');
  const long = 'word '.repeat(400);
  const c = clip(long, 50);
  assert.ok(c.endsWith('…'));
  assert.ok(c.length <= 51);
  assert.ok(!c.includes('  '));
  assert.equal(clip('  Heading  \n\n\n  Text\tafter \r\n end ', 100), 'Heading\nText after\nend');
});

test('packets: a resumed session ends the interrupted lanes and goes on', () => {
  const s = create_state();
  apply_packet(s, packet(1, { type: 'research_agent_start', research_task: 'Task A' }, { turn_index: 2, tab_index: 0, sub_turn_index: 0 }));
  assert.equal(s.lanes.length, 1);
  assert.notEqual(s.lanes[0].status, 'stopped');
  apply_packet(s, packet(2, { type: 'resumed', checkpoint: 3, superseded_after: 1 }));
  assert.deepEqual(s.resumed, { checkpoint: 3, superseded_after: 1 });
  assert.equal(s.lanes[0].status, 'stopped');
  assert.ok(s.notices.some((n) => n.includes('goes on from its last checkpoint')));
  // Packets after it are folded as usual.
  apply_packet(s, packet(3, { type: 'message_delta', content: 'Report.' }, { turn_index: 3 }));
  assert.equal(s.report, 'Report.');
});

test('packets: the reflective plan is a checklist, refused decisions are notices, and the '
     + 'verification summary is kept', () => {
  const s = create_state();
  const plan = (statuses) => ({
    type: 'reflective_plan',
    plan: { id: 'p', title: 'Cold', iteration: 1, steps: statuses.map((st, i) => ({
      id: `s1.${i + 1}`, title: `Step ${i + 1}`, status: st, observation: '' })) },
  });
  apply_packet(s, packet(1, plan(['pending', 'pending'])));
  assert.deepEqual(s.checklist.map((x) => x.status), ['pending', 'pending']);
  assert.equal(s.plan_done, true);
  apply_packet(s, packet(2, plan(['completed', 'in_progress'])));
  assert.deepEqual(s.checklist.map((x) => [x.id, x.status]), [['s1.1', 'completed'], ['s1.2', 'in_progress']]);
  // Hostile steps: unknown statuses are pending, non-objects are dropped.
  apply_packet(s, packet(3, { type: 'reflective_plan', plan: { steps: [{ id: 7, title: null, status: '<b>' }, 'x'] } }));
  assert.deepEqual(s.checklist, [{ id: '', title: '', status: 'pending' }]);
  apply_packet(s, packet(4, { type: 'reflection', step_id: 's1.1', decision: 'complete', taken: 'continue',
                              refused: true, why: 'COMPLETE refused: 1 of the 3 steps this depth needs are completed' }));
  assert.equal(s.reflections.length, 1);
  assert.equal(s.reflections[0].taken, 'continue');
  assert.deepEqual(s.notices, ['COMPLETE refused: 1 of the 3 steps this depth needs are completed']);
  apply_packet(s, packet(5, { type: 'verification_summary', claims: 4, supported: 3, unsupported: 1,
                              unverified: 0, recited: 1, rate: 0.75 }));
  assert.deepEqual(s.verification, { claims: 4, supported: 3, unsupported: 1, unverified: 0, recited: 1, rate: 0.75 });
});

test('citation cards: the verification\'s evidence from the read text, and "snippet only"', () => {
  const s = create_state();
  const docs = [
    { document_id: 'https://a.example/', semantic_identifier: 'Read page', link: 'https://a.example/',
      blurb: 'A snippet that lacks the fact.', source_type: 'web', is_internet: true, snippet_only: true },
    { document_id: 'https://b.example/', semantic_identifier: 'Never opened', link: 'https://b.example/',
      blurb: 'Only a snippet.', source_type: 'web', is_internet: true, snippet_only: true },
  ];
  apply_packet(s, packet(1, { type: 'search_tool_documents_delta', documents: docs }));
  // The page was opened later: read for good.
  apply_packet(s, packet(2, { type: 'open_url_documents',
    documents: [{ ...docs[0], blurb: 'The page.', snippet_only: false }] }));
  apply_packet(s, packet(3, { type: 'citation_info', citation_number: 1, document_id: 'https://a.example/' }));
  apply_packet(s, packet(4, { type: 'citation_info', citation_number: 2, document_id: 'https://b.example/' }));
  apply_packet(s, packet(5, { type: 'search_tool_documents_delta', documents: [docs[0]] }));
  assert.equal(s.sources_by_id.get('https://a.example/').snippet_only, false);
  apply_packet(s, packet(6, { type: 'claim_verified', id: 0, claim: 'The COP is 4.2.', verdict: 'partly_supported',
    source: 1, evidence: 'a weaker quote', snippet_only: false }));
  apply_packet(s, packet(7, { type: 'claim_verified', id: 1, claim: 'The COP is 4.2 all year.', verdict: 'supported',
    source: 1, evidence: 'keeps a seasonal COP of 4.2', snippet_only: false }));
  apply_packet(s, packet(8, { type: 'claim_verified', id: 2, claim: 'Costs vary.', verdict: 'supported',
    source: 2, evidence: 'Only a snippet.', snippet_only: true }));
  // A hostile packet is bounded, not trusted.
  apply_packet(s, packet(9, { type: 'claim_verified', id: 'x', source: '1', evidence: 42 }));
  const read = citation_card(s, 1);
  assert.equal(read.passage, 'keeps a seasonal COP of 4.2'); // the supported claim's evidence
  assert.equal(read.evidence, true);
  assert.equal(read.snippet_only, false);
  const html = render_citation_card(read);
  assert.match(html, /data-testid="card-evidence"/);
  assert.doesNotMatch(html, /card-snippet-only/);
  const snippet = citation_card(s, 2);
  assert.equal(snippet.snippet_only, true);
  assert.match(render_citation_card(snippet), /data-testid="card-snippet-only">Snippet only/);
  assert.equal(s.claims.length, 4);
  // A document card without claims shows the text the packets carried.
  assert.equal(document_card(s, 'https://b.example/').evidence, false);
});
