// Runs Mozilla Readability (with jsdom) over the readability fixture pages:
// writes each page's article HTML for quarry_bench_extract --score-dir and
// measures the speed (MB/s of source HTML on one thread, pages/s).
//
// Usage: node compare.mjs [--dir FIXTURES] [--out DIR] [--rounds N] [--url URL]
//                         [--verbose]

import { Readability } from "@mozilla/readability";
import { JSDOM, VirtualConsole } from "jsdom";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
// The project root is two levels up; the fixtures live beside it in shared/.
const defaultDir = path.resolve(here, "../../../shared/fixtures/html/readability");

// The fixtures carry no page URL (expected-metadata.json has none), so every
// page gets the one Readability's own test suite uses for them; relative links
// in expected.html are resolved against it.
const defaultUrl = "http://fakehost/test/page.html";

function parseArgs(argv) {
  const opts = { dir: defaultDir, out: path.join(here, "out"), rounds: 3,
                 url: defaultUrl, verbose: false };
  for (let i = 2; i < argv.length; ++i) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length)
        throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--dir") opts.dir = next();
    else if (a === "--out") opts.out = next();
    else if (a === "--rounds") opts.rounds = Math.max(1, parseInt(next(), 10) || 1);
    else if (a === "--url") opts.url = next();
    else if (a === "--verbose") opts.verbose = true;
    else throw new Error(`unknown option ${a}`);
  }
  return opts;
}

// jsdom's messages ("Could not parse CSS stylesheet", ...) are dropped: a
// virtual console with no destination.
const quiet = new VirtualConsole();

// Time spent in each step of the timed rounds, in nanoseconds.
const split = { jsdom: 0n, readability: 0n };

// Lets the event loop turn once. Without it a closed jsdom window is never
// freed while a synchronous loop runs (about 9 MB per page stays on the heap
// and the garbage collector soon dominates), so every extraction ends with it,
// as it would between two requests of a server.
const turn = () => new Promise((resolve) => setImmediate(resolve));

// One extraction as timed: jsdom parse, Readability parse, then the window's
// teardown and one turn of the event loop (both counted with jsdom).
async function extract(source, url) {
  const t0 = process.hrtime.bigint();
  const dom = new JSDOM(source, { url, virtualConsole: quiet });
  const t1 = process.hrtime.bigint();
  const article = new Readability(dom.window.document).parse();
  const t2 = process.hrtime.bigint();
  dom.window.close();
  await turn();
  split.jsdom += t1 - t0 + (process.hrtime.bigint() - t2);
  split.readability += t2 - t1;
  return article;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

async function main() {
  const opts = parseArgs(process.argv);
  const names = fs.readdirSync(opts.dir)
    .filter((n) => fs.existsSync(path.join(opts.dir, n, "source.html")))
    .sort();
  if (names.length === 0) {
    console.error(`no pages in ${opts.dir}`);
    process.exit(1);
  }
  const pages = names.map((name) => {
    const bytes = fs.readFileSync(path.join(opts.dir, name, "source.html"));
    return { name, bytes: bytes.length, source: bytes.toString("utf8") };
  });
  const totalBytes = pages.reduce((sum, p) => sum + p.bytes, 0);

  // Output pass (untimed; also warms up the JIT): one file per page, empty
  // when parse() returns null.
  fs.mkdirSync(opts.out, { recursive: true });
  let nulls = 0;
  for (const p of pages) {
    const t0 = process.hrtime.bigint();
    const article = await extract(p.source, opts.url);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (!article) ++nulls;
    const content = article && article.content ? article.content : "";
    fs.writeFileSync(path.join(opts.out, `${p.name}.html`), content);
    if (opts.verbose)
      console.log(`${p.name.padEnd(50)} ${String(p.bytes).padStart(8)} B ` +
                  `${ms.toFixed(1).padStart(8)} ms  ${article ? content.length : "null"}`);
  }

  // Timed rounds: every page once per round on this (the only JS) thread.
  const mbps = [];
  const pps = [];
  const cpuMbps = [];
  console.log(`readability: ${pages.length} pages (${(totalBytes / 1e6).toFixed(1)} MB), ` +
              `${nulls} null results, url ${opts.url}`);
  for (let r = 0; r < opts.rounds; ++r) {
    let sink = 0;
    split.jsdom = 0n;
    split.readability = 0n;
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (const p of pages) {
      const article = await extract(p.source, opts.url);
      sink += article && article.content ? article.content.length : 0;
    }
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    const cpuSecs = (cpu.user + cpu.system) / 1e6;
    mbps.push(totalBytes / 1e6 / secs);
    pps.push(pages.length / secs);
    cpuMbps.push(totalBytes / 1e6 / cpuSecs);
    console.log(`  round ${r + 1}: ${secs.toFixed(2)} s wall, ${cpuSecs.toFixed(2)} s CPU ` +
                `(process), ${mbps[r].toFixed(2)} MB/s, ${pps[r].toFixed(1)} pages/s; ` +
                `jsdom ${(Number(split.jsdom) / 1e9).toFixed(2)} s, Readability ` +
                `${(Number(split.readability) / 1e9).toFixed(2)} s; RSS ` +
                `${(process.memoryUsage().rss / 1e6).toFixed(0)} MB (checksum ${sink})`);
  }
  const summary = {
    pages: pages.length,
    bytes: totalBytes,
    rounds: opts.rounds,
    mb_per_s: median(mbps),
    mb_per_s_best: Math.max(...mbps),
    mb_per_cpu_s: median(cpuMbps),
    pages_per_s: median(pps),
  };
  console.log(`  MB/s median ${summary.mb_per_s.toFixed(2)}, best ` +
              `${summary.mb_per_s_best.toFixed(2)}; per CPU-second (all process threads) ` +
              `${summary.mb_per_cpu_s.toFixed(2)}; pages/s median ${summary.pages_per_s.toFixed(1)}`);
  console.log(`  node ${process.version}, jsdom ${pkgVersion("jsdom")}, ` +
              `@mozilla/readability ${pkgVersion("@mozilla/readability")}`);
  // Read by quarry_bench_extract --score-dir: "key value" lines.
  fs.writeFileSync(path.join(opts.out, "speed.txt"),
                   Object.entries(summary).map(([k, v]) => `${k} ${v}\n`).join(""));
}

function pkgVersion(name) {
  const file = path.join(here, "node_modules", name, "package.json");
  return JSON.parse(fs.readFileSync(file, "utf8")).version;
}

await main();
