// Inputs that make naive Markdown renderers quadratic or worse; shared by
// tests/web/markdown.test.mjs (safety and output size) and
// bench/web_markdown_bench.mjs (time).

/// Hostile Markdown texts of about `n` characters each, by name.
export function hostile_inputs(n) {
  return {
    brackets: '['.repeat(n),
    closing: ']'.repeat(n),
    cites: '[[1]]('.repeat(n / 6),
    links: '[a](x'.repeat(n / 5),
    stars: '*a '.repeat(n / 3),
    strong: '**a '.repeat(n / 4),
    underscores: '_'.repeat(n),
    backticks: Array.from({ length: 600 }, (_, i) => '`'.repeat(i + 1) + 'x').join(''),
    lt: '<'.repeat(n),
    autolinks: '<http://a'.repeat(n / 9),
    urls: 'http://a\\'.repeat(n / 9),
    paren_urls: ('http://a' + ')'.repeat(4000) + ' ').repeat(Math.max(1, Math.floor(n / 4009))),
    quotes: '>'.repeat(n),
    list: '- '.repeat(n / 2),
    nested_list: Array.from({ length: 500 }, (_, i) => ' '.repeat(i * 2) + '- x').join('\n'),
    table: '|'.repeat(n) + '\n' + '|-'.repeat(n / 2),
    spaces: ' '.repeat(n) + 'x\n',
    escapes: '\\'.repeat(n),
    mixed: '[*_`<h~'.repeat(n / 7),
  };
}
