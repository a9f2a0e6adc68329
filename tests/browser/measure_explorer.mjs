// Measures how a report's explorer behaves at scale in the system
// Chromium (headless, puppeteer-core): file size, time from navigation to
// the explorer being ready, the script's own share, the time to move the
// cursor (both segment maps redrawn) and to zoom the timeline, and the JS
// heap afterwards. Prints one Markdown table row per report.
//
//   node tests/browser/measure_explorer.mjs [--max-ready-ms MS] REPORT/index.html ...
//
// With --max-ready-ms, exits 1 when a page takes longer than MS to be
// ready, or logs an error.
//
// Chromium: $CHROMIUM, else /usr/bin/chromium.

import { statSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const args = process.argv.slice(2);
let maxReady = Infinity;
const pages = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--max-ready-ms") maxReady = Number(args[++i]);
  else pages.push(args[i]);
}
let failures = 0;
if (pages.length === 0) {
  console.error("usage: node tests/browser/measure_explorer.mjs REPORT/index.html ...");
  process.exit(2);
}
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--js-flags=--max-old-space-size=8192"],
  protocolTimeout: 600000,
});
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log("| report | events | file | load → ready | script | cursor move (median of 9) | zoom to 10 % | zoom back | JS heap |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const file of pages) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 900 });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  const t0 = Date.now();
  await page.goto(pathToFileURL(resolve(file)).href, { waitUntil: "load", timeout: 600000 });
  await page.waitForFunction(() => window.vramlabExplorer, { timeout: 600000, polling: 100 });
  const ready = Date.now() - t0;
  const r = await page.evaluate(async () => {
    const x = window.vramlabExplorer;
    const frame = () => new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)));
    const moves = [];
    for (let i = 1; i <= 9; i++) {
      const s = performance.now();
      x.setCursor(Math.floor((x.events * i) / 10));
      await frame();
      moves.push(performance.now() - s);
    }
    let s = performance.now();
    x.setView(Math.floor(x.events * 0.45), Math.floor(x.events * 0.55));
    await frame();
    const zoom = performance.now() - s;
    s = performance.now();
    x.setView(-1, x.events - 1);
    await frame();
    const back = performance.now() - s;
    return { events: x.events, script: x.readyMs, moves, zoom, back, heap: performance.memory ? performance.memory.usedJSHeapSize : 0 };
  });
  const mb = (b) => `${(b / 1e6).toFixed(1)} MB`;
  const ms = (v) => `${Math.round(v)} ms`;
  console.log(`| ${file} | ${r.events.toLocaleString("en-US")} | ${mb(statSync(file).size)} | ${ms(ready)} | ${ms(r.script)} | ${ms(median(r.moves))} | ${ms(r.zoom)} | ${ms(r.back)} | ${mb(r.heap)} |`);
  if (errors.length) {
    failures++;
    console.log(`FAIL errors in ${file}: ${errors.join(" | ")}`);
  }
  if (ready > maxReady) {
    failures++;
    console.log(`FAIL ${file}: ready after ${ready} ms, over ${maxReady} ms`);
  }
  await page.close();
}
await browser.close();
process.exit(failures ? 1 : 0);
