// vramlab report explorer: rebuilds every moment of the replays from the
// packed columns (per allocation id: request, lifetime, stream, stack; per
// setting: block address and size, device calls) and draws a zoomable
// timeline and two segment maps at the cursor. Exact values on hover;
// drawing is downsampled to one bucket per pixel column.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const root = $("explorer");
  if (!root) return;
  const t0 = performance.now();
  const idx = JSON.parse($("vramlab-explorer").textContent);

  function decode(text) {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
    const bin = atob(text);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  const blob = decode($("vramlab-packed").textContent.trim());
  const TYPES = { u8: Uint8Array, u16: Uint16Array, u32: Uint32Array, f64: Float64Array };
  // A packed column: value(i) = base + scale * a[i].
  function column(c) {
    if (!c) return null;
    return { a: new TYPES[c.dtype](blob.buffer, blob.byteOffset + c.offset, c.len), base: c.base, scale: c.scale };
  }
  const val = (c, i) => c.base + c.scale * c.a[i];

  const E = idx.events;
  const N = idx.ids;
  const NEVER = 2147483647;
  const K = 1024; // events between checkpoints
  const T = {};
  for (const k in idx.columns) T[k] = column(idx.columns[k]);
  const freeDone = idx.deferred ? T.free_done : T.free_at;

  // Event -> id, and what the event did: 1 alloc, 2 free (requested and
  // completed at once), 3 free requested, 4 free completed.
  const evId = new Int32Array(Math.max(E, 1)).fill(-1);
  const evKind = new Uint8Array(Math.max(E, 1));
  let req0 = 0;
  for (let id = 0; id < N; id++) {
    const a = val(T.alloc_at, id);
    const f = val(T.free_at, id);
    const d = val(freeDone, id);
    // Live at the start (a free requested before the recording no longer
    // counts as requested or allocated).
    if (a === -1 && f !== -1) req0 += val(T.requested, id);
    else if (a >= 0 && a < E) { evId[a] = id; evKind[a] = 1; }
    if (f >= 0 && f < E) { evId[f] = id; evKind[f] = d === f ? 2 : 3; }
    if (d >= 0 && d < E && d !== f) { evId[d] = id; evKind[d] = 4; }
  }
  const reqDelta = (e) => {
    const k = evKind[e];
    if (k === 1) return val(T.requested, evId[e]);
    if (k === 2 || k === 3) return -val(T.requested, evId[e]);
    return 0;
  };

  const settings = idx.settings.map(prepare);
  const reqCk = checkpoints(req0, reqDelta, E);

  function checkpoints(start, delta, upto) {
    const ck = new Float64Array(Math.floor(E / K) + 2);
    let v = start;
    ck[0] = v;
    for (let e = 0; e < upto; e++) {
      v += delta(e);
      if ((e + 1) % K === 0) ck[(e + 1) / K] = v;
    }
    return ck;
  }

  // One setting: its columns, allocated-bytes checkpoints and reserved
  // bytes after every device call; checks its own peaks against the
  // replay's.
  function prepare(s, k) {
    const c = {};
    for (const key in s.columns) c[key] = column(s.columns[key]);
    const L = c.log_ev.a.length;
    const lev = new Float64Array(L);
    const resAfter = new Float64Array(L);
    let res = 0;
    let peakRes = 0;
    for (let j = 0; j < L; j++) {
      lev[j] = val(c.log_ev, j);
      const kind = val(c.log_kind, j);
      const size = val(c.log_size, j);
      if (kind === 0 || kind === 2) res += size;
      else if (kind === 1 || kind === 3) res -= size;
      resAfter[j] = res;
      if (res > peakRes) peakRes = res;
    }
    let alloc0 = 0;
    for (let id = 0; id < N; id++) if (val(T.alloc_at, id) === -1 && val(T.free_at, id) !== -1) alloc0 += val(c.bsize, id);
    const replayed = Math.min(s.replayed, E);
    const delta = (e) => {
      const k2 = evKind[e];
      if (k2 === 1) return val(c.bsize, evId[e]);
      if (k2 === 2 || k2 === 3) return -val(c.bsize, evId[e]);
      return 0;
    };
    const st = { s, k, c, lev, resAfter, replayed, delta, alloc0 };
    st.ck = checkpoints(alloc0, delta, replayed);
    let v = alloc0;
    let peakAlloc = v;
    for (let e = 0; e < replayed; e++) {
      v += delta(e);
      if (v > peakAlloc) peakAlloc = v;
    }
    if (peakRes !== s.peak_reserved || peakAlloc !== s.peak_allocated) {
      console.error(`vramlab explorer: ${s.label}: rebuilt peaks (reserved ${peakRes}, allocated ${peakAlloc}) differ from the replay's (${s.peak_reserved}, ${s.peak_allocated})`);
    }
    return st;
  }

  // The first device call after event t.
  function firstAfter(st, t) {
    let lo = 0, hi = st.lev.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (st.lev[m] <= t) lo = m + 1; else hi = m; }
    return lo;
  }
  // Reserved bytes after event t (t = -1: the start).
  function reservedAt(st, t) {
    const j = firstAfter(st, t);
    return j === 0 ? 0 : st.resAfter[j - 1];
  }
  // A prefix value after event t from checkpoints.
  function prefixAt(ck, delta, t) {
    const n = t + 1;
    const j = Math.floor(n / K);
    let v = ck[j];
    for (let e = j * K; e < n; e++) v += delta(e);
    return v;
  }
  const requestedAt = (t) => prefixAt(reqCk, reqDelta, t);
  const allocatedAt = (st, t) => prefixAt(st.ck, st.delta, Math.min(t, st.replayed - 1));

  // ---- formatting ----
  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  function short(b) {
    let u = 0, v = b;
    while (Math.abs(v) >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
    if (u === 0) return `${b} B`;
    return `${v >= 100 ? v.toFixed(1) : v.toFixed(2)} ${UNITS[u]}`;
  }
  const int = (n) => Math.round(n).toLocaleString("en-US");
  const exact = (b) => `${short(b)} (${int(b)} B)`;
  const escHtml = (s) => String(s).replace(/[&<>"]/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[ch]);
  const hex = (n) => "0x" + n.toString(16);
  // A setting's name, breakable after "," and ":" only.
  const nameHtml = (s) => escHtml(s).replace(/([,:=])/g, "$1<wbr>");
  function phaseAt(t) {
    let p = null;
    for (const [ev, label] of idx.phases) if (ev <= Math.max(t, 0)) p = label;
    return p;
  }
  const eventName = (t) => (t < 0 ? "the start of the recording" : `event ${int(t)}`);

  // ---- controls ----
  const selA = $("ex-a"), selB = $("ex-b");
  settings.forEach((st, i) => {
    for (const sel of [selA, selB]) {
      const o = document.createElement("option");
      o.value = String(i);
      o.textContent = st.s.label;
      sel.appendChild(o);
    }
  });
  selB.value = String(Math.min(1, settings.length - 1));
  const view = { a: -1, b: Math.max(E - 1, -1) };
  let cursor = settings[0].s.peak_event ?? -1;
  const slider = $("ex-slider"), evInput = $("ex-event");
  const from = $("ex-from"), to = $("ex-to");
  const COLORS = ["#4e79a7", "#e15759"];
  const shown = () => {
    const a = settings[+selA.value], b = settings[+selB.value];
    return a === b ? [a] : [a, b];
  };

  function setView(a, b) {
    a = Math.max(-1, Math.min(Math.round(a), E - 1));
    b = Math.max(-1, Math.min(Math.round(b), E - 1));
    if (b < a) [a, b] = [b, a];
    view.a = a; view.b = b;
    from.value = a; to.value = b;
    slider.min = a; slider.max = b;
    if (cursor < a || cursor > b) cursor = Math.max(a, Math.min(cursor, b));
    slider.value = cursor;
    drawTimeline();
    scheduleMaps();
  }
  function setCursor(t) {
    cursor = Math.max(view.a, Math.min(Math.round(t), view.b));
    slider.value = cursor;
    evInput.value = cursor;
    placeCursor();
    readout(cursor);
    scheduleMaps();
  }

  // ---- timeline ----
  const tl = $("ex-timeline");
  const canvas = tl.querySelector("canvas");
  const selBox = tl.querySelector(".selection");
  const hoverLine = tl.querySelector(".hover");
  const cursorLine = tl.querySelector(".cursor");
  const M = { l: 76, r: 12, t: 16, b: 28 };
  let yMax = 1;
  const plotW = () => tl.clientWidth - M.l - M.r;
  const xOf = (t) => M.l + ((t - view.a + 0.5) / (view.b - view.a + 1)) * plotW();
  const tOf = (x) => view.a + Math.floor(((x - M.l) / plotW()) * (view.b - view.a + 1));

  function legend() {
    const items = [`<span><i style="border-color:#212529;border-top-style:dotted"></i>requested (live tensors)</span>`];
    shown().forEach((st, j) => {
      items.push(`<span><i style="border-color:${COLORS[j]}"></i>reserved: ${nameHtml(st.s.label)}</span>`);
      items.push(`<span><i style="border-color:${COLORS[j]};border-top-style:dashed"></i>allocated: ${nameHtml(st.s.label)}</span>`);
    });
    $("ex-legend").innerHTML = items.join("");
  }

  // Per pixel column, the maximum of each series over its events.
  function buckets(W) {
    const n = view.b - view.a + 1;
    const B = Math.max(1, Math.min(W, n));
    const sh = shown();
    const out = { B, req: new Float64Array(B), alloc: sh.map(() => new Float64Array(B).fill(NaN)), res: sh.map(() => new Float64Array(B).fill(NaN)) };
    let req = requestedAt(view.a);
    const alloc = sh.map((st) => allocatedAt(st, view.a));
    const res = sh.map((st) => reservedAt(st, view.a));
    const ptr = sh.map((st) => firstAfter(st, view.a));
    for (let t = view.a; t <= view.b; t++) {
      if (t > view.a) {
        req += reqDelta(t);
        sh.forEach((st, j) => { if (t < st.replayed) alloc[j] += st.delta(t); });
      }
      const bi = Math.min(B - 1, Math.floor(((t - view.a) * B) / n));
      if (req > out.req[bi]) out.req[bi] = req;
      sh.forEach((st, j) => {
        if (t >= st.replayed && t >= 0) return;
        // Every device call of the event counts: the peak inside it too.
        let r = res[j];
        let top = r;
        while (ptr[j] < st.lev.length && st.lev[ptr[j]] <= t) { r = st.resAfter[ptr[j]]; if (r > top) top = r; ptr[j]++; }
        res[j] = r;
        if (!(out.res[j][bi] >= top)) out.res[j][bi] = top;
        if (!(out.alloc[j][bi] >= alloc[j])) out.alloc[j][bi] = alloc[j];
      });
    }
    return out;
  }

  function niceStep(max) {
    const u = Math.pow(1024, Math.max(0, Math.floor(Math.log(Math.max(max, 1)) / Math.log(1024))));
    const raw = max / u / 5;
    const p = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    const m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p * u;
  }

  function drawTimeline() {
    const dpr = window.devicePixelRatio || 1;
    const W = tl.clientWidth, H = tl.clientHeight;
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    const pw = plotW(), ph = H - M.t - M.b;
    const bk = buckets(Math.max(1, Math.floor(pw)));
    yMax = 1;
    for (const arr of [bk.req, ...bk.alloc, ...bk.res]) for (const v of arr) if (v > yMax) yMax = v;
    yMax *= 1.05;
    const y = (v) => M.t + ph - (v / yMax) * ph;
    g.font = "12px 'DejaVu Sans', sans-serif";
    g.fillStyle = "#606870";
    g.strokeStyle = "#e9ecef";
    g.lineWidth = 1;
    const step = niceStep(yMax);
    for (let v = 0; v <= yMax; v += step) {
      g.beginPath(); g.moveTo(M.l, y(v)); g.lineTo(M.l + pw, y(v)); g.stroke();
      g.textAlign = "right"; g.fillText(short(v), M.l - 6, y(v) + 4);
    }
    g.textAlign = "center";
    const n = view.b - view.a + 1;
    const ticks = Math.max(1, Math.min(5, Math.floor(pw / 110)));
    for (let i = 0; i <= ticks; i++) {
      const t = view.a + Math.round(((n - 1) * i) / ticks);
      g.fillText(int(t), Math.min(Math.max(xOf(t), M.l + 20), M.l + pw - 20), H - 8);
    }
    // Phase starts.
    g.strokeStyle = "#adb5bd";
    g.setLineDash([2, 3]);
    let lastLabel = -1e9;
    for (const [ev, label] of idx.phases) {
      const t = ev - 1;
      if (t < view.a || t > view.b) continue;
      const x = xOf(t);
      g.beginPath(); g.moveTo(x, M.t); g.lineTo(x, M.t + ph); g.stroke();
      if (x - lastLabel > 80) { g.textAlign = "left"; g.fillText(label.slice(0, 16), x + 3, M.t + 10); lastLabel = x; }
    }
    g.setLineDash([]);
    const line = (arr, color, dash, width) => {
      g.strokeStyle = color; g.setLineDash(dash); g.lineWidth = width;
      g.beginPath();
      let open = false;
      for (let i = 0; i < bk.B; i++) {
        const v = arr[i];
        if (Number.isNaN(v)) { open = false; continue; }
        const x = M.l + ((i + 0.5) / bk.B) * pw;
        if (open) g.lineTo(x, y(v)); else { g.moveTo(x, y(v)); open = true; }
      }
      g.stroke();
    };
    shown().forEach((st, j) => {
      line(bk.res[j], COLORS[j], [], 2);
      line(bk.alloc[j], COLORS[j], [6, 4], 1.5);
      const o = st.s.oom_event;
      if (o != null && o >= view.a && o <= view.b) {
        // Below the phase labels, one line per setting, in its colour.
        g.fillStyle = COLORS[j]; g.textAlign = "left"; g.font = "bold 13px 'DejaVu Sans', sans-serif";
        g.fillText("✕ OOM", xOf(o) + 4, M.t + 30 + 16 * j);
        g.font = "12px 'DejaVu Sans', sans-serif";
      }
    });
    line(bk.req, "#212529", [2, 3], 1.5);
    g.setLineDash([]);
    legend();
    placeCursor();
    readout(cursor);
  }
  function placeCursor() {
    cursorLine.style.left = `${xOf(cursor)}px`;
    cursorLine.hidden = E === 0;
  }

  function readout(t, hovered) {
    const parts = [`<b>${hovered ? "Pointer" : "Cursor"}: after ${eventName(t)}</b>`];
    const p = phaseAt(t);
    if (p) parts.push(`phase ${escHtml(p)}`);
    parts.push(`requested ${exact(requestedAt(t))}`);
    for (const st of shown()) {
      if (t >= st.replayed && t >= 0) {
        parts.push(`${nameHtml(st.s.label)}: out of memory at event ${int(st.s.oom_event ?? st.replayed)}`);
        continue;
      }
      parts.push(`${nameHtml(st.s.label)}: allocated ${exact(allocatedAt(st, t))}, reserved ${exact(reservedAt(st, t))}`);
    }
    $("ex-readout").innerHTML = parts.join(" · ");
  }

  let drag = null;
  const localX = (ev) => ev.clientX - tl.getBoundingClientRect().left;
  tl.addEventListener("pointerdown", (ev) => { drag = { x0: localX(ev) }; tl.setPointerCapture(ev.pointerId); });
  tl.addEventListener("pointermove", (ev) => {
    const x = localX(ev);
    const t = Math.max(view.a, Math.min(tOf(x), view.b));
    hoverLine.hidden = false;
    hoverLine.style.left = `${xOf(t)}px`;
    readout(t, true);
    if (drag && Math.abs(x - drag.x0) > 4) {
      selBox.hidden = false;
      selBox.style.left = `${Math.min(x, drag.x0)}px`;
      selBox.style.width = `${Math.abs(x - drag.x0)}px`;
    }
  });
  tl.addEventListener("pointerleave", () => { hoverLine.hidden = true; readout(cursor); });
  tl.addEventListener("pointerup", (ev) => {
    if (!drag) return;
    const x = localX(ev);
    selBox.hidden = true;
    if (Math.abs(x - drag.x0) > 4) setView(tOf(Math.min(x, drag.x0)), tOf(Math.max(x, drag.x0)));
    else setCursor(tOf(x));
    drag = null;
  });
  slider.addEventListener("input", () => setCursor(+slider.value));
  evInput.addEventListener("change", () => {
    const t = +evInput.value;
    if (t < view.a || t > view.b) setView(-1, E - 1);
    setCursor(t);
  });
  from.addEventListener("change", () => setView(+from.value, view.b));
  to.addEventListener("change", () => setView(view.a, +to.value));
  $("ex-reset").addEventListener("click", () => setView(-1, E - 1));
  $("ex-peak").addEventListener("click", () => {
    const p = settings[+selA.value].s.peak_event ?? -1;
    if (p < view.a || p > view.b) setView(-1, E - 1);
    setCursor(p);
  });
  for (const sel of [selA, selB]) sel.addEventListener("change", () => { drawTimeline(); scheduleMaps(); });
  $("ex-equal").addEventListener("change", scheduleMaps);
  let resizeTimer = 0;
  window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(() => { drawTimeline(); scheduleMaps(); }, 150); });

  // ---- segment maps ----
  let mapsPending = false;
  function scheduleMaps() {
    if (mapsPending) return;
    mapsPending = true;
    requestAnimationFrame(() => { mapsPending = false; drawMaps(); });
  }

  // The segments after event t: rebuilt from the device calls.
  function segmentsAt(st, t) {
    const segs = new Map();
    const c = st.c;
    for (let j = 0; j < st.lev.length && st.lev[j] <= t; j++) {
      const kind = val(c.log_kind, j);
      const ptr = val(c.log_ptr, j), size = val(c.log_size, j);
      if (kind === 0) segs.set(ptr, { ptr, size, exp: false, mapped: [[ptr, ptr + size]] });
      else if (kind === 1 || kind === 5) segs.delete(ptr);
      else if (kind === 4) segs.set(ptr, { ptr, size, exp: true, mapped: [] });
      else if (kind === 2 || kind === 3) {
        for (const s of segs.values()) {
          if (s.exp && ptr >= s.ptr && ptr < s.ptr + s.size) { s.mapped = kind === 2 ? addRange(s.mapped, ptr, ptr + size) : cutRange(s.mapped, ptr, ptr + size); break; }
        }
      }
    }
    return [...segs.values()].sort((x, y) => x.ptr - y.ptr);
  }
  function addRange(rs, a, b) {
    const out = [];
    for (const [x, y] of rs) {
      if (y < a || x > b) out.push([x, y]);
      else { a = Math.min(a, x); b = Math.max(b, y); }
    }
    out.push([a, b]);
    return out.sort((p, q) => p[0] - q[0]);
  }
  function cutRange(rs, a, b) {
    const out = [];
    for (const [x, y] of rs) {
      if (y <= a || x >= b) out.push([x, y]);
      else { if (x < a) out.push([x, a]); if (y > b) out.push([b, y]); }
    }
    return out;
  }

  // The blocks live after event t: [ptr, size, id, pending].
  function blocksAt(st, t) {
    const out = [];
    const { addr, bsize } = st.c;
    const hold = st.s.holds_pending;
    for (let id = 0; id < N; id++) {
      const a = val(T.alloc_at, id);
      if (a > t || a === NEVER) continue;
      const f = val(T.free_at, id);
      const end = hold ? val(freeDone, id) : f;
      if (end <= t) continue;
      const bs = val(bsize, id);
      if (bs === 0) continue;
      out.push([val(addr, id), bs, id, f <= t]);
    }
    return out.sort((x, y) => x[0] - y[0]);
  }

  const mapState = new Map();
  function drawMaps() {
    const sh = shown();
    const els = [$("ex-map-a"), $("ex-map-b")];
    els[1].hidden = sh.length < 2;
    sh.forEach((st, j) => drawMap(els[j], st, cursor, COLORS[j]));
  }

  function drawMap(el, st, t, color) {
    let note = "";
    let tt = t;
    if (t >= st.replayed && t >= 0) {
      tt = st.replayed - 1;
      note = st.s.oom_event == null && st.replayed === 0
        ? "<p>The state at the start of the recording does not fit: nothing was replayed; the map shows the start.</p>"
        : `<p>Out of memory at event ${int(st.s.oom_event ?? st.replayed - 1)}; the map shows the state the replay stopped in (after that request failed).</p>`;
    }
    const segs = segmentsAt(st, tt);
    const blocks = blocksAt(st, tt);
    // Blocks into their segments (both sorted by address).
    let bi = 0;
    for (const s of segs) {
      s.blocks = [];
      while (bi < blocks.length && blocks[bi][0] < s.ptr) bi++;
      while (bi < blocks.length && blocks[bi][0] < s.ptr + s.size) s.blocks.push(blocks[bi++]);
      s.extent = s.exp ? s.mapped.reduce((m, r) => Math.max(m, r[1] - s.ptr), 0) : s.size;
      s.mappedBytes = s.mapped.reduce((m, r) => m + r[1] - r[0], 0);
    }
    const shownSegs = segs.filter((s) => s.extent > 0);
    const reserved = segs.reduce((m, s) => m + s.mappedBytes, 0);
    const allocated = blocks.reduce((m, b) => m + (b[3] ? 0 : b[1]), 0);
    const W = Math.max(200, el.clientWidth - 18);
    const equal = $("ex-equal").checked;
    const largest = shownSegs.reduce((m, s) => Math.max(m, s.extent), 1);
    const total = shownSegs.reduce((m, s) => m + s.extent, 0);
    const oneEach = equal || shownSegs.length <= 40;
    const LABEL = oneEach ? 78 : 0;
    const barW = W - LABEL - 4;
    const rowBytes = oneEach ? largest : Math.max(largest, total / 40);
    const GAP = 3;
    // Rows: [{y, items: [{s, x, w}]}]
    const rows = [];
    let row = null, used = 0;
    for (const s of shownSegs) {
      const w = equal ? barW : Math.max(2, (s.extent / rowBytes) * barW);
      if (!row || oneEach || used + w > barW + 0.5) { row = { items: [] }; rows.push(row); used = 0; }
      row.items.push({ s, x: LABEL + used, w });
      used += w + GAP;
    }
    const RH = 18, RG = 4;
    const parts = [];
    const groups = [];
    rows.forEach((r, ri) => {
      const y = ri * (RH + RG) + 2;
      for (const it of r.items) {
        const s = it.s;
        const si = segs.indexOf(s);
        if (oneEach) parts.push(`<text x="${LABEL - 6}" y="${y + 13}" text-anchor="end" font-size="11" fill="#606870">${short(s.mappedBytes)}</text>`);
        const scale = it.w / s.extent;
        const empty = s.blocks.length === 0;
        // The segment: unmapped parts white, mapped parts free-coloured.
        parts.push(`<rect data-seg="${si}" x="${it.x}" y="${y}" width="${it.w}" height="${RH}" fill="#fff" stroke="#adb5bd" stroke-width="0.5"${s.exp ? ' stroke-dasharray="3 2"' : ""}/>`);
        for (const [a, b] of s.mapped) {
          parts.push(`<rect data-seg="${si}" x="${it.x + (a - s.ptr) * scale}" y="${y}" width="${Math.max(0.5, (b - a) * scale)}" height="${RH}" fill="${empty ? "#f3d6d6" : "#d5dde5"}"/>`);
        }
        // Blocks; runs of sub-pixel blocks drawn as one.
        let run = null;
        const flush = () => {
          if (!run) return;
          const gi = groups.push(run.members) - 1;
          parts.push(`<rect data-group="${gi}" x="${run.x}" y="${y + 1}" width="${Math.max(1, run.x1 - run.x)}" height="${RH - 2}" fill="${run.pending * 2 > run.members.length ? "#e8a33d" : color}"/>`);
          run = null;
        };
        for (const b of s.blocks) {
          const x = it.x + (b[0] - s.ptr) * scale;
          const w = b[1] * scale;
          if (w >= 1.5) {
            flush();
            parts.push(`<rect data-id="${b[2]}" x="${x}" y="${y + 1}" width="${Math.max(1, w - 0.5)}" height="${RH - 2}" fill="${b[3] ? "#e8a33d" : color}"/>`);
          } else {
            if (run && x - run.x1 > 1) flush();
            if (!run) run = { x, x1: x, members: [], pending: 0 };
            run.x1 = x + w;
            run.members.push(b[2]);
            if (b[3]) run.pending++;
          }
        }
        flush();
      }
    });
    const H = rows.length * (RH + RG) + 4;
    const head = `<h3>${nameHtml(st.s.label)}</h3><p>After ${eventName(tt)}: ${segs.length} segment${segs.length === 1 ? "" : "s"}, reserved ${exact(reserved)}, allocated ${exact(allocated)}, ${int(blocks.length)} block${blocks.length === 1 ? "" : "s"}.</p>`;
    el.innerHTML = `${head}${note}<div class="rows"><svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">${parts.join("")}</svg></div>`;
    mapState.set(el, { st, segs, groups, tt, rows });
  }

  // ---- tooltip ----
  const tip = $("ex-tip");
  function stackHtml(id) {
    const k = val(T.stack, id);
    const stack = k >= 0 ? idx.stacks[k] : null;
    if (!stack || stack.length === 0) return "<br>no stack recorded";
    return "<br>" + stack.map((i) => `<code>${escHtml(idx.lines[i])}</code>`).join("<br>");
  }
  function lifetime(id, hold) {
    const a = val(T.alloc_at, id), f = val(T.free_at, id), d = val(freeDone, id);
    const got = a === -1 ? "live at the start of the recording" : `allocated at event ${int(a)}`;
    let gone;
    if (f === NEVER) gone = "still live at the end";
    else if (d !== f) gone = `free requested ${f === -1 ? "before the recording" : `at event ${int(f)}`}, ${d === NEVER ? "never completed" : `completed at event ${int(d)}`}${hold ? "" : " (freed at the request by this allocator)"}`;
    else gone = `freed at event ${int(f)}`;
    return `${got} · ${gone}`;
  }
  function blockHtml(st, id) {
    const bs = val(st.c.bsize, id), rq = val(T.requested, id);
    const stream = idx.streams[val(T.stream, id)] ?? "?";
    return `<b>block of ${exact(bs)}</b> at ${hex(val(st.c.addr, id))}<br>requested ${exact(rq)} · stream ${escHtml(stream)}<br>${lifetime(id, st.s.holds_pending)}${stackHtml(id)}`;
  }
  function freeHtml(ms, si, clientX, rect) {
    const s = ms.segs[si];
    if (!s) return "";
    // The free gap under the pointer, exactly.
    const box = rect.ownerSVGElement.getBoundingClientRect();
    const vb = rect.ownerSVGElement.viewBox.baseVal;
    const sx = ((clientX - box.left) / box.width) * vb.width;
    let it = null;
    for (const r of ms.rows) for (const i of r.items) if (i.s === s) it = i;
    const at = it ? s.ptr + ((sx - it.x) / it.w) * s.extent : s.ptr;
    let lo = s.ptr, hi = s.ptr + s.extent;
    for (const r of s.mapped) if (at >= r[0] && at < r[1]) { lo = r[0]; hi = r[1]; }
    for (const b of s.blocks) {
      if (b[0] + b[1] <= at && b[0] + b[1] > lo) lo = b[0] + b[1];
      if (b[0] > at && b[0] < hi) hi = b[0];
    }
    const kind = s.exp ? `expandable segment, ${short(s.mappedBytes)} mapped of ${short(s.size)} reserved address space` : `segment of ${exact(s.size)}`;
    const used = s.blocks.reduce((m, b) => m + b[1], 0);
    const mapped = s.mapped.some((r) => at >= r[0] && at < r[1]);
    const what = !mapped ? "<b>address space not mapped</b>" : `<b>free (cached) ${exact(hi - lo)}</b> at ${hex(lo)}`;
    return `${what}<br>${kind} at ${hex(s.ptr)}<br>${int(s.blocks.length)} block${s.blocks.length === 1 ? "" : "s"} in it, ${exact(used)}`;
  }
  function groupHtml(st, members) {
    const bytes = members.reduce((m, id) => m + val(st.c.bsize, id), 0);
    const req = members.reduce((m, id) => m + val(T.requested, id), 0);
    const first = members[0];
    return `<b>${int(members.length)} small blocks, ${exact(bytes)}</b> (requested ${exact(req)})<br>too narrow to draw apart; zoom the map with “every segment full width”.<br>first: ${blockHtml(st, first)}`;
  }
  const maps = root.querySelector("[data-segment-map]");
  maps.addEventListener("mousemove", (ev) => {
    const target = ev.target.closest("[data-id],[data-group],[data-seg]");
    const mapEl = ev.target.closest(".map");
    const ms = mapEl && mapState.get(mapEl);
    if (!target || !ms) { tip.hidden = true; return; }
    let html;
    if (target.dataset.id !== undefined) html = blockHtml(ms.st, +target.dataset.id);
    else if (target.dataset.group !== undefined) html = groupHtml(ms.st, ms.groups[+target.dataset.group] || []);
    else html = freeHtml(ms, +target.dataset.seg, ev.clientX, target);
    tip.innerHTML = html;
    tip.hidden = false;
    const r = tip.getBoundingClientRect();
    const x = Math.min(ev.clientX + 14, window.innerWidth - r.width - 8);
    const y = ev.clientY + 16 + r.height > window.innerHeight ? ev.clientY - r.height - 10 : ev.clientY + 16;
    tip.style.left = `${Math.max(4, x)}px`;
    tip.style.top = `${Math.max(4, y)}px`;
  });
  maps.addEventListener("mouseleave", () => { tip.hidden = true; });

  // ---- start ----
  if (E === 0) tl.hidden = true;
  evInput.min = -1; evInput.max = Math.max(E - 1, -1);
  setView(-1, E - 1);
  setCursor(cursor);
  window.vramlabExplorer = {
    events: E,
    settings: settings.map((st) => st.s.label),
    requestedAt,
    allocatedAt: (k, t) => allocatedAt(settings[k], t),
    reservedAt: (k, t) => reservedAt(settings[k], t),
    blocksAt: (k, t) => blocksAt(settings[k], t).length,
    setCursor,
    setView,
    readyMs: performance.now() - t0,
  };
})();
