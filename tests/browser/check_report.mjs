// Opens vramlab HTML reports in the system Chromium (puppeteer-core) and
// checks what a reader sees: no console errors or page errors, no request
// that leaves the file (the page is self-contained), no table cell
// narrower than its longest unbreakable word, at a desktop (1400 px) and a
// phone (390 px) width; keeps full-page screenshots and prints the load
// time of each page.
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
    await page.goto(url, { waitUntil: "load", timeout: 60000 });
    const ms = Date.now() - t0;
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
