// The page's Markdown renderer on hostile inputs: time per input and how the
// time grows with four times the input (linear: about 4x; quadratic: 16x).
//
//   node bench/web_markdown_bench.mjs
//
// Prints one line per input; never fails on timing.

import { render_markdown } from '../app/web/markdown.js';
import { hostile_inputs } from '../tests/web/hostile_inputs.mjs';

function best_ms(input) {
  let min = Infinity;
  for (let k = 0; k < 3; ++k) {
    const start = process.hrtime.bigint();
    render_markdown(input);
    min = Math.min(min, Number(process.hrtime.bigint() - start) / 1e6);
  }
  return min;
}

const inputs = hostile_inputs(200000);
console.log('input            chars     ms   ms(4x input)  growth');
for (const [name, input] of Object.entries(inputs)) {
  const one = best_ms(input);
  const four = best_ms(input.repeat(4));
  console.log(`${name.padEnd(14)} ${String(input.length).padStart(8)} ${one.toFixed(1).padStart(6)} `
              + `${four.toFixed(1).padStart(13)} ${(four / Math.max(one, 0.01)).toFixed(1).padStart(7)}x`);
}
