// Opens vramlab HTML reports in the system Chromium (puppeteer-core) and
// checks what a reader sees: no console errors or page errors, no request
// that leaves the file (the page is self-contained), no table cell
// narrower than its longest unbreakable word, at a desktop (1400 px) and a
// phone (390 px) width; keeps full-page screenshots and prints the load
// time of each page. Where the page has the explorer: it must be ready
// (its rebuilt peaks checked against the replay's, or it logs an error),
// hovering a block must show a tooltip with a size (and a `file.py:LINE`
// frame where the trace recorded stacks), and stepping the slider with the
// keyboard must change the segment map.
//
//   node tests/browser/check_report.mjs [--out DIR] REPORT/index.html ...
//
// Chromium: $CHROMIUM, else /usr/bin/chromium. Exit status 1 on any failure.

import { existsSync, mkdirSync } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const args = process.argv.slice(2);
let out = "target/browser";
const pages = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--out") out = args[++i];
  else pages.push(args[i]);
}
if (pages.length === 0) {
  console.error("usage: node tests/browser/check_report.mjs [--out DIR] REPORT/index.html ...");
  process.exit(2);
}
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
if (!existsSync(chromium)) {
  console.error(`no Chromium at ${chromium} (apt-get install chromium, or set CHROMIUM)`);
  process.exit(2);
}
mkdirSync(out, { recursive: true });

const VIEWPORTS = [
  { name: "desktop", width: 1400, height: 900 },
  { name: "phone", width: 390, height: 844, isMobile: true, deviceScaleFactor: 2 },
];

// In the page: every th/td whose box is narrower than its longest word
// (words break at spaces, and after "," and ":" where the page allows it).
function narrowCells() {
  const canvas = document.createElement("canvas");
  const ctx = canvas.getContext("2d");
  const bad = [];
  for (const cell of document.querySelectorAll("td, th")) {
    const st = getComputedStyle(cell);
    ctx.font = `${st.fontStyle} ${st.fontWeight} ${st.fontSize} ${st.fontFamily}`;
    const inner = cell.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
    for (const line of cell.innerText.split("\n")) {
      for (const word of line.split(/\s+|(?<=[,:;])/)) {
        if (!word) continue;
        const w = ctx.measureText(word).width;
        if (w > inner + 1) {
          bad.push({ word, width: Math.round(w), cell: Math.round(inner), table: cell.closest("table")?.id || "" });
        }
      }
    }
  }
  return bad;
}

// The explorer: ready, tooltip on a block, slider moves the map.
async function checkExplorer(page, file) {
  const ready = await page.evaluate(() => !!window.vramlabExplorer);
  if (!ready) return fail(`${file}: the explorer never became ready`);
  // A block whose allocation recorded a stack when there is one.
  const pick = await page.evaluate(() => {
    const idx = JSON.parse(document.getElementById("vramlab-explorer").textContent);
    const rects = [...document.querySelectorAll("#ex-map-a [data-id]")];
    const framed = idx.lines.some((l) => /\.py:\d+/.test(l));
    const el = rects[0];
    if (!el) return null;
    rects.forEach((r, i) => r.setAttribute("data-probe", String(i)));
    return { count: rects.length, framed };
  });
  if (!pick) return fail(`${file}: the explorer's left segment map has no block with data-id`);
  let tipText = "";
  const tries = Math.min(pick.count, 40);
  for (let i = 0; i < tries; i++) {
    const sel = `#ex-map-a [data-probe="${i}"]`;
    const box = await page.$eval(sel, (e) => { e.scrollIntoView({ block: "center" }); const r = e.getBoundingClientRect(); return { x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width }; });
    if (box.w < 1) continue;
    await page.mouse.move(box.x, box.y);
    tipText = await page.$eval("[role=tooltip]", (t) => (t.hidden ? "" : t.innerText));
    if (!pick.framed || /\.py:\d+/.test(tipText)) break;
  }
  if (!/\d(\.\d+)? (B|KiB|MiB|GiB|TiB)/.test(tipText)) fail(`${file}: hovering a block shows no size in a tooltip (got: ${JSON.stringify(tipText.slice(0, 200))})`);
  else if (pick.framed && !/\.py:\d+/.test(tipText)) fail(`${file}: no hovered block's tooltip shows a file.py:LINE frame (last: ${JSON.stringify(tipText.slice(0, 300))})`);
  else console.log(`${file}: tooltip: ${tipText.split("\n").slice(0, 4).join(" | ").slice(0, 240)}`);
  // Keyboard: Home moves the cursor to the start of the view.
  const before = await page.$eval("#ex-map-a", (e) => e.innerHTML);
  await page.focus("#ex-slider");
  await page.keyboard.press("Home");
  await page.keyboard.press("ArrowRight");
  await new Promise((r) => setTimeout(r, 300));
  const after = await page.$eval("#ex-map-a", (e) => e.innerHTML);
  const events = await page.evaluate(() => window.vramlabExplorer.events);
  if (events > 1 && before === after) fail(`${file}: stepping the slider did not change the segment map`);
  const t = await page.evaluate(() => window.vramlabExplorer.readyMs);
  console.log(`${file}: explorer ready in ${Math.round(t)} ms of script, ${pick.count} blocks drawn at the first cursor`);
}

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--no-sandbox", "--allow-file-access-from-files", "--disable-gpu"],
});
let failures = 0;
const fail = (msg) => {
  failures++;
  console.log(`FAIL ${msg}`);
};
for (const file of pages) {
  const url = pathToFileURL(resolve(file)).href;
  const name = basename(dirname(resolve(file)));
  for (const vp of VIEWPORTS) {
    const page = await browser.newPage();
    await page.setViewport(vp);
    const errors = [];
    const external = [];
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("request", (r) => {
      const u = r.url();
      if (!u.startsWith("file:") && !u.startsWith("data:")) external.push(u);
    });
    const t0 = Date.now();
    await page.goto(url, { waitUntil: "load", timeout: 120000 });
    const hasExplorer = await page.evaluate(() => !!document.getElementById("vramlab-explorer"));
    if (hasExplorer) {
      await page.waitForFunction(() => window.vramlabExplorer, { timeout: 120000 }).catch(() => {});
    }
    const ms = Date.now() - t0;
    if (hasExplorer && vp.name === "desktop") await checkExplorer(page, file);
    const narrow = await page.evaluate(narrowCells);
    const shot = `${out}/${name}-${vp.name}.png`;
    await page.screenshot({ path: shot, fullPage: true });
    const height = await page.evaluate(() => document.documentElement.scrollHeight);
    console.log(`${file} @ ${vp.name} ${vp.width}px: loaded in ${ms} ms, page ${height} px tall, screenshot ${shot}`);
    if (errors.length) fail(`${file} @ ${vp.name}: console errors: ${errors.join(" | ")}`);
    if (external.length) fail(`${file} @ ${vp.name}: requests leave the file: ${external.join(", ")}`);
    for (const n of narrow) {
      fail(`${file} @ ${vp.name}: "${n.word}" (${n.width} px) in a ${n.cell} px cell of table #${n.table}`);
    }
    await page.close();
  }
}
await browser.close();
console.log(failures ? `${failures} failure(s)` : "browser checks passed");
process.exit(failures ? 1 : 0);
