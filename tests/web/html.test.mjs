// app/web/html.js: what the page escapes and writes itself (the reports
// come rendered by the server), with Node's test runner.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  best_passage, byte_to_index, escape_html, mark_passages, render_citation_card, safe_url,
  short_location, words_of,
} from '../../app/web/html.js';

test('html: escaping covers element text and quoted attributes', () => {
  assert.equal(escape_html(`<a href="x" onclick='y'>&</a>`),
               '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
  assert.equal(escape_html(42), '42');
});

test('html: only http(s) URLs with a host are linked', () => {
  assert.equal(safe_url(' https://example.org/a?b=1 '), 'https://example.org/a?b=1');
  assert.equal(safe_url('http://x'), 'http://x');
  for (const bad of ['file:///etc/passwd', 'javascript:alert(1)', 'data:text/html,x', '//evil.example/',
                     '/v1/x', 'https:///nohost', 'https://a b', 'https://a"b', 'https://a\u2028b',
                     `https://a/${'x'.repeat(5000)}`, null, 42])
    assert.equal(safe_url(bad), null, String(bad).slice(0, 40));
});

test('html: a location never shows a folder of the server', () => {
  assert.equal(short_location('file:///srv/corpus/notes/heat%20pumps.md'), 'heat pumps.md');
  assert.equal(short_location('/srv/corpus/a.pdf'), 'a.pdf');
  assert.equal(short_location('https://example.org/'), 'example.org');
  assert.equal(short_location('https://example.org/a/b?q=1#x'), 'example.org/a/b');
  assert.equal(short_location('file:///srv/corpus/x.md', 'notes/x.md'), 'notes/x.md');
  assert.equal(short_location(''), '');
  assert.equal(short_location('file:///srv/%E0%A4%A'), '%E0%A4%A');
});

test('html: UTF-8 byte offsets map to string indexes', () => {
  const text = 'aé€😀b';
  // bytes: a(1) é(2) €(3) 😀(4) b(1)
  const at = byte_to_index(text);
  assert.equal(at(0), 0);
  assert.equal(at(1), 1);
  assert.equal(at(2), 1); // inside é: its start
  assert.equal(at(3), 2);
  assert.equal(at(6), 3);
  assert.equal(at(10), 5);
  assert.equal(at(11), text.length);
  assert.equal(at(999), text.length);
  assert.equal(at(-5), 0);
  assert.equal(at(NaN), 0);
});

test('html: passages are marked by byte range, merged, clamped and escaped', () => {
  const text = 'Ünïcode first. <b>Second</b> claim here. Third.';
  const enc = new TextEncoder();
  const byte = (s) => enc.encode(text.slice(0, text.indexOf(s))).length;
  const html = mark_passages(text, [
    { begin: byte('<b>'), end: byte(' claim') },
    { begin: byte('Second'), end: byte(' here.') + 6 }, // overlaps the first
    { begin: byte('Third'), end: 10_000 }, // past the end: clamped
    { begin: 5, end: 5 }, // empty: left out
    { begin: 'x', end: 3 }, // not numbers: left out
  ]);
  assert.equal((html.match(/<mark /g) || []).length, 2);
  assert.match(html, /^Ünïcode first\. <mark class="passage" id="passage-1" data-testid="source-passage" data-begin="15">&lt;b&gt;Second&lt;\/b&gt; claim here\.<\/mark> <mark [^>]*id="passage-2"[^>]*>Third\.<\/mark>$/);
  assert.doesNotMatch(html, /<b>/);
  assert.equal(mark_passages('<x>', null), '&lt;x&gt;');
});

test('html: a chip finds the passage whose claims share most words with its sentence', () => {
  const passages = [
    { begin: 0, end: 5, claims: ['Heat pumps keep working at minus twenty degrees.'] },
    { begin: 9, end: 20, claims: ['Insulation lowers the heating bill.', 'Costs vary.'] },
  ];
  assert.equal(best_passage(passages, 'Good insulation lowers the bill'), 1);
  assert.equal(best_passage(passages, 'pumps work at minus twenty'), 0);
  assert.equal(best_passage(passages, 'nothing in common'), 0);
  assert.equal(best_passage([], 'x'), -1);
  assert.equal(best_passage(null, 'x'), -1);
  assert.deepEqual(words_of('Ça, 42 C°!'), ['ça', '42', 'c']);
});

test('html: citation cards escape everything and link only web pages', () => {
  const evil = render_citation_card({ number: 1, title: '<img src=x onerror=alert(1)>', url: 'javascript:alert(1)',
                                      passage: '</blockquote><script>x</script>', evidence: true });
  assert.doesNotMatch(evil, /<img|<script|href=|javascript/);
  assert.match(evil, /data-testid="card-evidence"/);
  const local = render_citation_card({ number: 2, title: 'Notes', url: 'file:///srv/corpus/notes.md',
                                       location: 'sub/notes.md', passage: '', loading: true, openable: true });
  assert.match(local, /<span class="card-url" data-testid="card-url">sub\/notes\.md<\/span>/);
  assert.match(local, /Finding the cited passage/);
  assert.match(local, /Click to read the source/);
  assert.doesNotMatch(local, /file:|\/srv\//);
  const web = render_citation_card({ number: 3, title: 'T', url: 'https://example.org/p', passage: 'q' });
  assert.match(web, /<a class="card-url" data-testid="card-url" href="https:\/\/example\.org\/p" target="_blank"/);
  assert.match(render_citation_card({ title: 'x', passage: '' }), /No passage was recorded/);
  assert.equal(render_citation_card(null), '');
});
