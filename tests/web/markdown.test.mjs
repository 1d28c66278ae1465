// app/web/markdown.js: the Markdown renderer of the web page. Its input is
// model output and page titles: nothing in it may become HTML of its own.

import { test } from 'node:test';
import { hostile_inputs } from './hostile_inputs.mjs';
import assert from 'node:assert/strict';

import {
  escape_html, max_input, render_inline_markdown, render_markdown, safe_url,
} from '../../app/web/markdown.js';

// Every tag in `html`, by name.
function tags(html) {
  return [...html.matchAll(/<\/?([a-zA-Z][a-zA-Z0-9]*)/g)].map((m) => m[1].toLowerCase());
}

const allowed_tags = new Set(['p', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'em', 'strong', 'del',
  'code', 'pre', 'blockquote', 'ul', 'ol', 'li', 'table', 'thead', 'tbody', 'tr', 'th',
  'td', 'hr', 'br', 'a', 'div', 'sup']);

// Every attribute in `html` is one the renderer writes, and every href is
// http(s), file or an in-page anchor.
function assert_safe(html) {
  for (const t of tags(html))
    assert.ok(allowed_tags.has(t), `unexpected tag <${t}> in ${html}`);
  for (const m of html.matchAll(/<[a-z0-9]+((?:\s+[^\s=>]+="[^"]*")*)\s*\/?>/g)) {
    for (const a of m[1].matchAll(/([^\s=]+)="([^"]*)"/g)) {
      const [, name, value] = a;
      assert.ok(['href', 'class', 'target', 'rel', 'data-cite', 'data-scope', 'data-testid', 'aria-label',
                 'start'].includes(name), `unexpected attribute ${name} in ${html}`);
      if (name === 'href')
        assert.match(value, /^(https?:|file:|#source-\d+$)/i, `unsafe href ${value}`);
    }
  }
  // Nothing that opens a tag survives outside the renderer's own tags.
  const stripped = html.replace(/<\/?[a-z0-9]+(?:\s+[^\s=>]+="[^"]*")*\s*\/?>/g, '');
  assert.ok(!stripped.includes('<'), `a raw "<" passed: ${stripped}`);
}

test('markdown: <script> and other raw HTML are escaped, never passed', () => {
  const inputs = [
    '<script>alert(1)</script>',
    'Hello <img src=x onerror=alert(1)> world',
    '<iframe src="javascript:alert(1)"></iframe>',
    '# <svg onload=alert(1)>',
    '- <b onmouseover="x()">item</b>',
    '> <style>body{display:none}</style>',
    '| <script> | b |\n|---|---|\n| <img onerror=x> | 2 |',
    '```\n</code></pre><script>x</script>\n```',
    '`</code><script>x</script>`',
    '**<script>x</script>**',
    '[<img src=x onerror=alert(1)>](http://example.com/)',
    '<http://example.com/"onmouseover="alert(1)>',
    '&lt;script&gt; &amp; &#60;script&#62;',
  ];
  for (const input of inputs) {
    const html = render_markdown(input);
    assert_safe(html);
    assert.ok(!/<script|<img|<iframe|<svg|<style|<b\b/i.test(html), html);
  }
  assert.equal(render_markdown('<script>alert(1)</script>'),
               '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n');
  assert.match(render_markdown('Hello <img src=x onerror=alert(1)> world'),
               /Hello &lt;img src=x onerror=alert\(1\)&gt; world/);
  // Character references decode to text, which is escaped again.
  assert.equal(render_markdown('&lt;b&gt; R&amp;D &#60;i&#x3E; &bogus; &#0;'),
               '<p>&lt;b&gt; R&amp;D &lt;i&gt; &amp;bogus; \ufffd</p>\n');
  assert.equal(render_markdown('`&lt;`'), '<p><code>&amp;lt;</code></p>\n');
});

test('markdown: only http, https and file links become links', () => {
  const bad = [
    '[x](javascript:alert(1))',
    '[x](JavaScript:alert(1))',
    '[x]( javascript:alert(1))',
    '[x](java\tscript:alert(1))',
    '[x](data:text/html;base64,PHNjcmlwdD4=)',
    '[x](vbscript:msgbox)',
    '[x](/relative/path)',
    '[x](//evil.example/)',
    '[x](javascript&colon;alert(1))',
    '[x](http:evil)',
    '<javascript:alert(1)>',
    '![x](javascript:alert(1))',
    '[[1]](javascript:alert(1))',
  ];
  for (const input of bad) {
    const html = render_markdown(input);
    assert_safe(html);
    assert.ok(!/href="(?!#source-)/.test(html) || /href="(https?|file):/.test(html), `${input} -> ${html}`);
    assert.ok(!/javascript:|data:|vbscript:/i.test(html.match(/href="[^"]*"/g)?.join(' ') || ''), html);
  }
  // The text of a refused link stays.
  assert.equal(render_markdown('[click me](javascript:alert(1))'), '<p>click me</p>\n');
  const ok = render_markdown('[a](https://example.com/x?y=1&z=2) [b](http://example.org) [c](file:///srv/doc.md)');
  assert.match(ok, /<a href="https:\/\/example\.com\/x\?y=1&amp;z=2" target="_blank" rel="noopener noreferrer nofollow">a<\/a>/);
  assert.match(ok, /href="http:\/\/example\.org"/);
  assert.match(ok, /href="file:\/\/\/srv\/doc\.md"/);
  assert_safe(ok);
  // A quote cannot end the attribute.
  const quoted = render_markdown('[x](http://example.com/"onmouseover=alert(1))');
  assert.ok(!/onmouseover="/.test(quoted), quoted);
  assert_safe(quoted);
});

test('markdown: safe_url', () => {
  assert.equal(safe_url('https://example.com/a'), 'https://example.com/a');
  assert.equal(safe_url('  http://example.com '), 'http://example.com');
  assert.equal(safe_url('file:///usr/share/doc.md'), 'file:///usr/share/doc.md');
  for (const u of ['javascript:alert(1)', 'JAVASCRIPT:x', 'data:,x', 'ftp://x', '/path', '#x',
                   'http://exa mple.com', 'http://a.com/\u0000', 'https:', 'http:///x',
                   'http://x.com/"a', 'http://x.com/<a>', '', null, 42, 'h'.repeat(5000)])
    assert.equal(safe_url(u), null, String(u).slice(0, 40));
});

test('markdown: citations become chips', () => {
  const html = render_markdown('Heat pumps work [[1]](https://example.com/a) in cold [[2]](file:///srv/b.md).');
  assert.match(html, /<a class="cite" data-cite="1" data-testid="citation" href="https:\/\/example\.com\/a"[^>]*>1<\/a>/);
  // A file: URL is kept as the chip's link; the page shows the reference instead.
  assert.match(html, /<a class="cite" data-cite="2" data-testid="citation" href="file:\/\/\/srv\/b\.md"[^>]*>2<\/a>/);
  const bare = render_markdown('Claims [3] and [4, 5] and [6][7].');
  assert.deepEqual([...bare.matchAll(/data-cite="(\d+)"/g)].map((m) => m[1]), ['3', '4', '5', '6', '7']);
  assert.match(bare, /href="#source-3"/);
  // The page passes what it knows of a citation.
  const known = render_markdown('See [8].', { citation: (n) => ({ url: `https://example.com/${n}`, title: 'T <x>' }) });
  assert.match(known, /href="https:\/\/example\.com\/8"/);
  assert.match(known, /aria-label="Source 8: T &lt;x&gt;"/);
  // Not citations: links whose text is a number, footnote-like labels.
  assert.ok(!/class="cite"/.test(render_markdown('[12](http://x.com/)')));
  assert.ok(!/class="cite"/.test(render_markdown('[1]: http://x.com/')));
  assert.ok(!/class="cite"/.test(render_markdown('[12345]')));
  // An unsafe citation link keeps the chip without the link.
  const unsafe = render_markdown('[[9]](javascript:alert(1))');
  assert.match(unsafe, /data-cite="9"[^>]*href="#source-9"/);
  assert_safe(unsafe);
});

test('markdown: nested and unbalanced brackets', () => {
  const cases = {
    '[[[1]](http://a.com/)': /\[<a class="cite" data-cite="1"/,
    '[a [b] c](http://a.com/)': /<a href="http:\/\/a\.com\/"[^>]*>a <a class="cite"|<a href="http:\/\/a\.com\/"[^>]*>a \[b\] c<\/a>/,
    '[[1]](http://a.com/(x))': /href="http:\/\/a\.com\/\(x\)"/,
    '[[1]](http://a.com/x)(y)': /href="http:\/\/a\.com\/x"[^>]*>1<\/a>\(y\)/,
    '[x]]](http://a.com/)': /\]\]\(<a href/,
    ']][[': /^<p>\]\]\[\[<\/p>\n$/,
    '[[[[': /^<p>\[\[\[\[<\/p>\n$/,
    '[link [[2]](http://b.com/)](http://a.com/)': /<a href="http:\/\/a\.com\/"[^>]*>link <sup class="cite-text">\[2\]<\/sup><\/a>/,
  };
  for (const [input, expected] of Object.entries(cases)) {
    const html = render_markdown(input);
    assert.match(html, expected, `${input} -> ${html}`);
    assert_safe(html);
    // No link inside a link.
    assert.ok(!/<a [^>]*>[^<]*<a /.test(html.replace(/<a class="cite"[^>]*>\d+<\/a>/g, '')), html);
  }
});

test('markdown: blocks and inline formatting', () => {
  const md = [
    '# Title', '', 'Some **bold**, *em*, ~~gone~~, `code <x>` and snake_case_name.', '',
    '- one', '- two', '  - nested', '', '1. first', '2. second', '',
    '> quoted **text**', '', '```js', 'let a = "<b>";', '```', '', '---', '',
    '| Left | Center | Right |', '|:-----|:------:|------:|', '| a | b | c |', '| d | e |',
  ].join('\n');
  const html = render_markdown(md);
  assert_safe(html);
  assert.match(html, /<h1>Title<\/h1>/);
  assert.match(html, /<strong>bold<\/strong>, <em>em<\/em>, <del>gone<\/del>, <code>code &lt;x&gt;<\/code> and snake_case_name\./);
  assert.match(html, /<ul>\n<li>one<\/li>\n<li>two\n<ul>\n<li>nested<\/li>\n<\/ul><\/li>\n<\/ul>/);
  assert.match(html, /<ol>\n<li>first<\/li>\n<li>second<\/li>\n<\/ol>/);
  assert.match(html, /<blockquote>\n<p>quoted <strong>text<\/strong><\/p>\n<\/blockquote>/);
  assert.match(html, /<pre><code class="language-js">let a = &quot;&lt;b&gt;&quot;;<\/code><\/pre>/);
  assert.match(html, /<hr>/);
  assert.match(html, /<th class="align-left">Left<\/th><th class="align-center">Center<\/th><th class="align-right">Right<\/th>/);
  assert.match(html, /<tr><td class="align-left">d<\/td><td class="align-center">e<\/td><td class="align-right"><\/td><\/tr>/);
  assert.equal(render_markdown('a\\*b\\* \\<x\\>'), '<p>a*b* &lt;x&gt;</p>\n');
  assert.match(render_markdown('line one  \nline two'), /line one<br>\nline two/);
  assert.match(render_markdown('See https://example.com/a.'), /<a href="https:\/\/example\.com\/a"[^>]*>https:\/\/example\.com\/a<\/a>\./);
  assert.match(render_markdown('(see https://example.com/a)'), /href="https:\/\/example\.com\/a"[^>]*>https:\/\/example\.com\/a<\/a>\)/);
  assert.match(render_markdown('https://en.wikipedia.org/wiki/Heat_pump_(device).'), /href="https:\/\/en\.wikipedia\.org\/wiki\/Heat_pump_\(device\)"/);
  assert.equal(render_inline_markdown('**Step** <one>'), '<strong>Step</strong> &lt;one&gt;');
  // A fence language cannot inject an attribute.
  assert.match(render_markdown('```js" onclick="x\ncode\n```'), /<code class="language-js">/);
});

test('markdown: an unclosed fence takes the rest, escaped', () => {
  const html = render_markdown('```\n<script>\n# not a heading');
  assert.equal(html, '<pre><code>&lt;script&gt;\n# not a heading</code></pre>\n');
});

// Speed is measured in bench/web_markdown_bench.mjs (timings are not
// asserted in tests); a quadratic renderer would still run into the test's
// time limit on these inputs.
test('markdown: huge and hostile inputs render safely into bounded output', { timeout: 120000 }, () => {
  for (const [name, input] of Object.entries(hostile_inputs(200000))) {
    const html = render_markdown(input);
    assert_safe(html);
    // Output stays within a constant factor of the input (a citation chip,
    // the largest thing written for a few characters, is ~150 bytes for 3).
    assert.ok(html.length <= 64 * input.length + 1000, `${name}: ${html.length} bytes out of ${input.length}`);
  }
});

test('markdown: input beyond max_input is cut off with a note', () => {
  const html = render_markdown('a'.repeat(max_input + 10));
  assert.match(html, /class="truncated"/);
  assert.ok(html.length < max_input + 1000);
});

test('markdown: deep nesting stays plain text past the limit', () => {
  const html = render_markdown('>'.repeat(5000) + ' deep <x>');
  assert_safe(html);
  assert.ok((html.match(/<blockquote>/g) || []).length <= 16);
  assert.match(html, /deep &lt;x&gt;/);
  const emph = render_markdown('*a '.repeat(100) + 'x' + ' a*'.repeat(100));
  assert_safe(emph);
});

test('markdown: escape_html', () => {
  assert.equal(escape_html(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
});

test('markdown: random inputs never produce unsafe HTML', () => {
  // A small deterministic generator (no dependency, same inputs every run).
  let seed = 12345;
  const rand = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const pieces = ['<', '>', '"', "'", '[', ']', '(', ')', '*', '_', '`', '~', '\\', '!', ':', '/',
    ' ', '\n', '|', '-', '#', '>', '1', '.', 'a', 'http://x.com/', 'javascript:', 'file:', '<script>',
    'onerror=', '&', '[[1]](', '```', '  ', '\t', 'data:', '<http://', '&#x3c;'];
  for (let k = 0; k < 3000; ++k) {
    let input = '';
    const len = rand(60);
    for (let i = 0; i < len; ++i)
      input += pieces[rand(pieces.length)];
    const html = render_markdown(input);
    try {
      assert_safe(html);
    } catch (e) {
      assert.fail(`input ${JSON.stringify(input)}: ${e.message}`);
    }
  }
});
