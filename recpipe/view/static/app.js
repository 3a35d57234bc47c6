// recpipe view: the page. Plain JavaScript, no build step, nothing loaded from elsewhere.
// Views are chosen by the URL's hash (#/browse?order=record&start=0, #/record/12,
// #/batch?epoch=0&batch=3, #/health, #/summary), so the back button and links work.
// Every text from the file (keys, labels, error messages) goes in through textContent.
"use strict";

const state = { info: null, view: null, generation: 0 };
const main = document.getElementById("main");

// ---- small helpers -------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name === "className") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

function bytes(n) {
  if (n === null || n === undefined) return "?";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(n < 10 ? 1 : 0) : String(n)) + " " + units[i];
}

function fmt(v) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(+v.toFixed(4));
  if (Array.isArray(v)) return v.map(fmt).join(", ");
  return String(v);
}

function labelText(labels) {
  if (!labels || !labels.length) return "-";
  return labels.length === 1 ? fmt(labels[0]) : "[" + labels.map(fmt).join(", ") + "]";
}

class HttpFailure extends Error {
  constructor(status, body) {
    super((body && body.error) || ("HTTP " + status));
    this.status = status;
    this.body = body || {};
  }
}

async function api(path, options) {
  const response = await fetch(path, options);
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) throw new HttpFailure(response.status, body);
  return { status: response.status, body };
}

async function post(path) {
  return api(path, { method: "POST", headers: { "X-Recpipe-View": "1" } });
}

function errorBox(error) {
  const body = error instanceof HttpFailure ? error.body
    : (error && typeof error === "object" && !(error instanceof Error)) ? error : { error: String(error) };
  const where = [];
  if (body.kind) where.push(body.kind);
  if (body.path) where.push(body.path);
  if (body.offset !== undefined) where.push("byte offset " + body.offset);
  if (body.record !== undefined) where.push("record " + body.record);
  const box = el("div", { className: "error-box", role: "alert" },
    el("div", { className: "message", text: body.error || String(error) }),
    where.length ? el("div", { className: "where", text: where.join(" \u00b7 ") }) : null);
  if (body.record !== undefined && Number.isInteger(body.record)) {
    box.append(el("div", {}, el("a", { href: "#/record/" + body.record, text: "open record " + body.record })));
  }
  return box;
}

function stale(generation) { return generation !== state.generation; }

// Fetch images a few at a time (the server decodes them; a page change drops the rest).
const images = {
  queue: [], running: 0, limit: 6,
  load(url, onload, onerror, generation) {
    this.queue.push({ url, onload, onerror, generation });
    this.pump();
  },
  pump() {
    while (this.running < this.limit && this.queue.length) {
      const job = this.queue.shift();
      if (stale(job.generation)) continue;
      this.running++;
      fetch(job.url).then(async (response) => {
        if (stale(job.generation)) return;
        if (response.ok) {
          const blob = await response.blob();
          if (!stale(job.generation)) job.onload(URL.createObjectURL(blob));
        } else {
          let body = null;
          try { body = await response.json(); } catch (e) { body = { error: "HTTP " + response.status }; }
          job.onerror(new HttpFailure(response.status, body));
        }
      }).catch((e) => { if (!stale(job.generation)) job.onerror(e); })
        .finally(() => { this.running--; this.pump(); });
    }
  },
};

function withToken(url) {
  return url + (url.includes("?") ? "&" : "?") + "v=" + state.info.token;
}

// ---- routing ---------------------------------------------------------------------------------

function parseHash() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query] = hash.split("?");
  const parts = path.split("/").filter(Boolean);
  const params = new URLSearchParams(query || "");
  return { name: parts[0] || "browse", args: parts.slice(1), params };
}

function go(hash) { if (location.hash === hash) route(); else location.hash = hash; }

async function route() {
  const { name, args, params } = parseHash();
  state.generation++;
  const generation = state.generation;
  for (const a of document.querySelectorAll("nav#tabs > a")) {
    const tab = a.dataset.tab;
    a.classList.toggle("active", tab === name || (tab === "browse" && name === "record"));
  }
  clear(main);
  main.dataset.view = name;
  try {
    if (name === "browse") await viewBrowse(params, generation);
    else if (name === "record") await viewRecord(parseInt(args[0], 10), params, generation);
    else if (name === "batch") await viewBatch(params, generation);
    else if (name === "health") await viewHealth(generation);
    else if (name === "summary") await viewSummary(generation);
    else main.append(errorBox("no view named " + name));
  } catch (error) {
    if (!stale(generation)) main.append(errorBox(error));
  }
}

// ---- browse ----------------------------------------------------------------------------------

function pageSize(params) {
  const n = parseInt(params.get("count") || state.info.limits.page_default, 10);
  return Math.max(1, Math.min(state.info.limits.page, n || state.info.limits.page_default));
}

function browseHash(order, start, count, highlight) {
  let hash = "#/browse?order=" + order + "&start=" + Math.max(0, start) + "&count=" + count;
  if (highlight !== undefined && highlight !== null) hash += "&highlight=" + highlight;
  return hash;
}

async function viewBrowse(params, generation) {
  const order = params.get("order") === "label" ? "label" : "record";
  const count = pageSize(params);
  const start = Math.max(0, parseInt(params.get("start") || "0", 10) || 0);
  const highlight = params.get("highlight");
  const byWhat = state.info.layout ? "identity" : "label";

  const side = el("div", { className: "side" });
  const content = el("div", { className: "content" });
  const status = el("span", { className: "muted", id: "page-status" });
  const orderSelect = el("select", { id: "order", "aria-label": "order" },
    el("option", { value: "record", text: "record order" }),
    el("option", { value: "label", text: "by " + byWhat }));
  orderSelect.value = order;
  orderSelect.addEventListener("change", () => go(browseHash(orderSelect.value, 0, count)));
  const sizeSelect = el("select", { id: "count", "aria-label": "records per page" },
    ...[24, 48, 96, 192].filter((n) => n <= state.info.limits.page)
      .map((n) => el("option", { value: n, text: n + " a page" })));
  sizeSelect.value = String(count);
  sizeSelect.addEventListener("change", () => go(browseHash(order, start, parseInt(sizeSelect.value, 10))));
  const prev = el("button", { id: "prev", text: "\u2190 previous", disabled: start === 0,
    onclick: () => go(browseHash(order, start - count, count)) });
  const next = el("button", { id: "next", text: "next \u2192",
    onclick: () => go(browseHash(order, start + count, count)) });
  main.append(el("div", { className: "toolbar" }, orderSelect, sizeSelect, prev, next, status),
    el("div", { className: "layout" }, side, content));
  histogramPanel(side, generation, order === "label");

  let page;
  for (;;) {
    const answer = await api("/api/page?order=" + order + "&start=" + start + "&count=" + count);
    if (stale(generation)) return;
    if (answer.status !== 202) { page = answer.body; break; }
    clear(content).append(scanProgress(answer.body.pending, "Reading every record's " + byWhat + "\u2026"));
    await sleep(500);
    if (stale(generation)) return;
  }
  const last = Math.min(page.total, start + page.records.length);
  status.textContent = page.records.length
    ? (order === "label" ? "by " + page.of + ": " : "records ") + start + "\u2013" + (last - 1) + " of " + page.total
    : "nothing at " + start + " (" + page.total + " in all)";
  next.disabled = last >= page.total;
  const grid = el("div", { className: "grid", id: "grid" });
  clear(content).append(grid);
  let group;
  for (const record of page.records) {
    if (order === "label" && record.group !== group) {
      group = record.group;
      grid.append(el("div", { className: "group", text: page.of + " " + fmt(group) }));
    }
    grid.append(tile(record, generation, highlight !== null && String(record.position) === highlight));
  }
}

function markText(mark) {
  if (mark.source === "quarantine") return "quarantined (" + mark.kind + "): " + mark.reason;
  if (mark.source === "verify") return "verify " + mark.kind + ": " + mark.reason;
  return (mark.kind || "error") + ": " + (mark.reason || mark.error);
}

function tile(record, generation, highlight) {
  const thumb = el("div", { className: "thumb" });
  const meta = el("div", { className: "meta" },
    el("div", {}, el("span", { className: "key", text: "key " + fmt(record.key) }),
      el("span", { className: "muted", text: " \u00b7 #" + record.position })),
    el("div", { text: "label " + labelText(record.label) }),
    el("div", { className: "muted", text: (record.image
      ? record.image.format + " " + fmt(record.image.width) + "\u00d7" + fmt(record.image.height) + " \u00b7 "
      : "") + bytes(record.bytes) }));
  const node = el("a", { className: "tile", href: "#/record/" + record.position,
    "data-position": record.position, "data-key": record.key }, thumb, meta);
  if (highlight) node.classList.add("highlight");
  const readError = record.error && record.error.kind !== "not-image";
  const problems = record.marks.filter((m) => !(readError && m.source === "viewer"));
  if (readError) problems.push({ source: "viewer", ...record.error });
  if (problems.length) {
    node.classList.add("bad");
    node.dataset.error = problems.map(markText).join("; ");
    meta.prepend(el("div", {}, ...problems.map((m) => el("span", { className: "badge", text: m.source }))));
  }
  if (record.role !== "image" || (record.error && record.error.kind === "not-image")) {
    node.classList.add("noimage");
    thumb.append(el("span", { text: record.role !== "image" ? "InsightFace " + record.role + " record" : record.error.error }));
    return node;
  }
  if (record.error) {
    thumb.append(el("div", { className: "error", title: record.error.error, text: record.error.reason }));
    return node;
  }
  images.load(withToken("/thumb/" + record.position + ".jpg?size=128"), (url) => {
    thumb.append(el("img", { src: url, alt: "record " + record.position }));
  }, (error) => {
    node.classList.add("bad");
    const message = (error.body && error.body.error) || String(error);
    node.dataset.error = (node.dataset.error ? node.dataset.error + "; " : "") + message;
    if (!node.querySelector(".badge")) meta.prepend(el("div", {}, el("span", { className: "badge", text: (error.body && error.body.kind) || "error" })));
    thumb.append(el("div", { className: "error", title: message, text: (error.body && error.body.reason) || message }));
  }, generation);
  return node;
}

function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

function scanProgress(s, title) {
  const bar = el("div", {});
  const fraction = s && s.total ? s.done / s.total : 0;
  bar.style.width = Math.round(100 * fraction) + "%";
  return el("div", { className: "panel" }, el("div", { text: title }),
    el("div", { className: "progress" }, bar),
    el("div", { className: "muted", text: s && s.total ? s.done + " of " + s.total + " records, " + fmt(s.seconds) + " s" : "starting" }));
}

// The label histogram (a bounded list: the most common labels, and the size buckets).
async function histogramPanel(parent, generation, start) {
  const panel = el("div", { className: "panel", id: "histogram" });
  parent.append(panel);
  const byWhat = state.info.layout ? "identity" : "label";
  for (;;) {
    const s = (await api("/api/labels" + (start ? "?start=1" : ""))).body;
    if (stale(generation)) return;
    clear(panel).append(el("h3", { text: (state.info.layout ? "Images per identity" : "Label histogram") }));
    if (s.state === "idle") {
      panel.append(el("p", { className: "muted", text: "Reads the " + byWhat + " of all " + s.records + " " + (state.info.layout ? "identity records" : "records") + "." }),
        el("button", { id: "histogram-start", text: "Compute", onclick: () => { clear(parent); histogramPanel(parent, generation, true); } }));
      return;
    }
    if (s.state === "failed") { panel.append(errorBox(s.error)); return; }
    if (s.state === "running") {
      panel.append(scanProgress(s, "reading\u2026"));
      await sleep(500);
      if (stale(generation)) return;
      continue;
    }
    const most = Math.max(1, ...s.histogram.map((h) => h[1]));
    const bars = el("div", { className: "bars" });
    for (const [label, count] of s.histogram) {
      const bar = el("div", { className: "bar" });
      bar.style.width = Math.max(1, Math.round(150 * count / most)) + "px";
      bars.append(el("a", { className: "row", href: "#", title: byWhat + " " + fmt(label) + ": " + count,
        onclick: (e) => { e.preventDefault(); jump("label:" + label); } },
        el("span", { className: "name", text: fmt(label) }), bar, el("span", { className: "count", text: count })));
    }
    panel.append(el("div", { className: "muted", text: s.records + " records, " + s.distinct + " " + (state.info.layout ? "identities" : "distinct labels") + (s.truncated ? " (the " + s.histogram.length + " largest shown)" : "") + (s.unreadable ? ", " + s.unreadable + " unreadable" : "") }), bars);
    if (s.sizes && s.sizes.length) {
      panel.append(el("h3", { text: "records per " + byWhat }),
        el("table", {}, el("tbody", {}, ...s.sizes.map(([low, high, n]) =>
          el("tr", {}, el("th", { text: low === high ? String(low) : low + "\u2013" + high }), el("td", { text: n + " " + byWhat + (n === 1 ? "" : state.info.layout ? "s" : "s") }))))));
    }
    return;
  }
}

// ---- jump --------------------------------------------------------------------------------------

async function jump(text) {
  const count = pageSize(parseHash().params);
  try {
    for (;;) {
      const answer = await api("/api/find?q=" + encodeURIComponent(text));
      if (answer.status === 202) { await sleep(500); continue; }
      const found = answer.body;
      const start = Math.floor(found.index / count) * count;
      go(browseHash(found.order, start, count, found.position));
      return;
    }
  } catch (error) {
    state.generation++;
    clear(main).append(errorBox(error));
    main.dataset.view = "error";
  }
}

document.getElementById("jump").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = document.getElementById("jump-input").value.trim();
  if (text) jump(text);
});

// ---- one record --------------------------------------------------------------------------------

const COLOURS = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#bfef45",
  "#fabed4", "#469990", "#dcbeff", "#9a6324", "#800000", "#aaffc3", "#808000", "#000075"];

async function viewRecord(position, params, generation) {
  if (!Number.isInteger(position)) throw new Error("no record position in the address");
  const record = (await api("/api/record/" + position)).body;
  if (stale(generation)) return;
  const n = state.info.records;
  const nav = el("div", { className: "toolbar" },
    el("button", { id: "record-prev", text: "\u2190 record " + (position - 1), disabled: position === 0, onclick: () => go("#/record/" + (position - 1)) }),
    el("button", { id: "record-next", text: "record " + (position + 1) + " \u2192", disabled: position >= n - 1, onclick: () => go("#/record/" + (position + 1)) }),
    el("a", { href: browseHash("record", Math.floor(position / state.info.limits.page_default) * state.info.limits.page_default, state.info.limits.page_default, position), text: "back to its page" }));
  const details = el("table", { id: "record-details" }, el("tbody", {},
    row("position", position), row("key", record.key), row("role", record.role),
    row("byte offset", record.offset), row("record bytes", record.bytes),
    record.header ? row("IRHeader", "flag " + record.header.flag + ", id " + record.header.id + ", id2 " + record.header.id2) : null,
    row("label", labelText(record.label)),
    record.image ? row("image", record.image.format + " " + fmt(record.image.width) + "\u00d7" + fmt(record.image.height) + ", " + fmt(record.image.channels) + " channels, " + bytes(record.image.bytes)) : null,
    record.image && (record.image.progressive || record.image.cmyk || record.image.grayscale || record.image.exif_orientation)
      ? row("notes", [record.image.progressive && "progressive", record.image.cmyk && "CMYK", record.image.grayscale && "grayscale", record.image.exif_orientation && ("EXIF orientation " + record.image.exif_orientation)].filter(Boolean).join(", ")) : null,
    record.sample !== null ? row("loader sample", record.sample) : null));
  const picture = el("div", { className: "picture", id: "picture" });
  const facts = el("div", { className: "panel" }, el("h2", { text: "Record " + position }), details);
  const problems = record.marks.slice();
  if (record.error) problems.unshift({ source: "read", ...record.error, reason: record.error.error });
  for (const p of problems) facts.append(errorBox({ ...p, error: markText(p), record: undefined }));
  const draws = el("div", { className: "panel", id: "draws-panel" });
  main.append(nav, el("div", { className: "record" }, el("div", { className: "panel" }, picture), facts), draws);
  main.dataset.position = position;
  if (record.role !== "image" || record.error) {
    picture.append(el("div", { className: record.error && record.error.kind !== "not-image" ? "error" : "muted", id: "picture-error",
      text: record.error ? record.error.error : "InsightFace " + record.role + " record: no image" }));
    draws.append(el("p", { className: "muted", text: "No augmentations: the loader does not serve this record as an image." }));
    return;
  }
  const source = record.image ? [record.image.width, record.image.height] : null;
  images.load(withToken("/picture/" + position + ".png?max=" + state.info.limits.picture_default), (url) => {
    const img = el("img", { src: url, alt: "record " + position, id: "picture-img" });
    picture.prepend(img);
  }, (error) => {
    picture.append(el("div", { className: "error", id: "picture-error", text: (error.body && error.body.error) || String(error) }));
  }, generation);
  await drawsPanel(draws, position, source, picture, generation);
}

function row(name, value) { return el("tr", {}, el("th", { text: name }), el("td", { className: "mono", text: fmt(value) })); }

function planLines(plan) {
  const lines = [];
  const box = plan.crop_box.map((v) => Math.round(v));
  lines.push("crop box " + box[0] + "," + box[1] + " \u2192 " + box[2] + "," + box[3] + (plan.resize_crop ? " (resized)" : ""));
  lines.push((plan.mirror ? "flipped" : "not flipped") + (plan.angle !== null ? ", rotated " + plan.angle + "\u00b0" : ""));
  if (plan.colour.length) lines.push(plan.colour.map((c) => c.op + " \u00d7" + c.factor).join(", "));
  if (plan.hls) lines.push("HLS shift " + plan.hls.join(", "));
  if (plan.pca) lines.push("PCA lighting " + plan.pca.join(", "));
  if (plan.contrast !== 1 || plan.illumination !== 0) lines.push("contrast " + plan.contrast + ", illumination " + plan.illumination);
  return lines;
}

async function drawsPanel(panel, position, source, picture, generation) {
  const count = state.info.limits.draws_default;
  panel.append(el("h2", { text: "What the model gets: " + count + " draws of the recipe (epochs 0\u2013" + (count - 1) + ")" }));
  let answer;
  try {
    answer = (await api("/api/draws/" + position + "?n=" + count)).body;
  } catch (error) {
    if (!stale(generation)) panel.append(errorBox(error));
    return;
  }
  if (stale(generation)) return;
  const recipe = state.info.recipe;
  panel.append(el("p", { className: "muted", text: "sample " + answer.sample + ", output " + answer.shape.join("\u00d7") + " " + answer.dtype + " " + answer.layout + (answer.dtype !== "uint8" ? " (normalisation undone for display)" : "") + "; recipe " + JSON.stringify(recipe.augment) }));
  const grid = el("div", { className: "draws", id: "draws" });
  panel.append(grid);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  if (source && source[0] && source[1]) {
    svg.setAttribute("viewBox", "0 0 " + source[0] + " " + source[1]);
    svg.setAttribute("preserveAspectRatio", "none");
    picture.append(svg);
  }
  answer.draws.forEach((draw, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const rect = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    const [x0, y0, x1, y1] = draw.plan.crop_box;
    rect.setAttribute("x", x0); rect.setAttribute("y", y0);
    rect.setAttribute("width", Math.max(0, x1 - x0)); rect.setAttribute("height", Math.max(0, y1 - y0));
    rect.setAttribute("stroke", colour);
    svg.append(rect);
    const frame = el("div", { className: "frame" });
    const swatch = el("span", { className: "swatch" });
    swatch.style.background = colour;
    const card = el("div", { className: "draw", "data-epoch": draw.epoch,
      onmouseenter: () => rect.classList.add("active"), onmouseleave: () => rect.classList.remove("active") },
      frame, el("div", { className: "plan" }, el("div", {}, swatch, el("strong", { text: "epoch " + draw.epoch })),
        ...planLines(draw.plan).map((line) => el("div", { text: line }))));
    grid.append(card);
    images.load(draw.url, (url) => frame.append(el("img", { src: url, alt: "epoch " + draw.epoch })),
      (error) => { card.classList.add("bad"); frame.append(el("div", { className: "error", text: (error.body && error.body.error) || String(error) })); },
      generation);
  });
}

// ---- batches ---------------------------------------------------------------------------------

function batchHash(epoch, batch) { return "#/batch?epoch=" + epoch + "&batch=" + batch; }

async function viewBatch(params, generation) {
  const epoch = Math.max(0, parseInt(params.get("epoch") || "0", 10) || 0);
  const index = Math.max(0, parseInt(params.get("batch") || "0", 10) || 0);
  const epochInput = el("input", { id: "batch-epoch", type: "number", min: 0, value: epoch, "aria-label": "epoch" });
  const batchInput = el("input", { id: "batch-index", type: "number", min: 0, value: index, "aria-label": "batch" });
  const form = el("form", { className: "toolbar", id: "batch-form", onsubmit: (e) => { e.preventDefault(); go(batchHash(epochInput.value, batchInput.value)); } },
    el("label", {}, "epoch ", epochInput), el("label", {}, "batch ", batchInput), el("button", { text: "Show", id: "batch-show" }),
    el("button", { type: "button", text: "\u2190 previous", disabled: index === 0, onclick: () => go(batchHash(epoch, index - 1)) }),
    el("button", { type: "button", id: "batch-next", text: "next \u2192", onclick: () => go(batchHash(epoch, index + 1)) }));
  const recipe = state.info.recipe;
  const out = el("div", { id: "batch-view" });
  main.append(form, el("p", { className: "muted", text: "Batch " + index + " of epoch " + epoch + " as ImageLoader delivers it: batch_size " + recipe.batch_size + ", seed " + recipe.seed + ", shuffle " + recipe.shuffle + ", part " + recipe.part_index + " of " + recipe.num_parts + ", on_error " + recipe.on_error + "; augmentation " + JSON.stringify(recipe.augment) }), out);
  out.append(el("p", { className: "muted", text: "decoding\u2026" }));
  let batch;
  try {
    batch = (await api("/api/batch/" + epoch + "/" + index)).body;
  } catch (error) {
    if (!stale(generation)) clear(out).append(errorBox(error));
    return;
  }
  if (stale(generation)) return;
  clear(out).append(el("p", {}, batch.size + " samples, " + batch.shape.join("\u00d7") + " " + batch.dtype + (batch.pad ? ", the last " + batch.pad + " are padding" : "") + "; " + batch.batches + " batches an epoch. ",
    el("a", { href: batch.npy, id: "batch-npy", text: "images.npy" }), " (the array as delivered)"));
  const grid = el("div", { className: "samples", id: "batch-grid" });
  out.append(grid);
  batch.images.forEach((url, slot) => {
    const frame = el("div", {});
    const card = el("div", { className: "sample", "data-slot": slot, "data-position": batch.positions[slot] },
      frame, el("div", {}, el("a", { href: "#/record/" + batch.positions[slot], text: "#" + batch.positions[slot] }), " key " + fmt(batch.keys[slot])),
      el("div", { className: "muted", text: "label " + fmt(batch.labels[slot]) }));
    if (slot >= batch.size - batch.pad) card.classList.add("pad");
    grid.append(card);
    images.load(url, (blob) => frame.append(el("img", { src: blob, alt: "slot " + slot, "data-src": url })),
      (error) => frame.append(errorBox(error)), generation);
  });
}

// ---- health ------------------------------------------------------------------------------------

function problemTable(entries, id) {
  const body = el("tbody", {});
  for (const e of entries) {
    const where = e.offset !== undefined && e.offset !== null ? String(e.offset) + (e.end !== undefined ? "\u2026" + e.end : "") : "-";
    body.append(el("tr", { "data-position": e.position === null || e.position === undefined ? "" : e.position },
      el("td", {}, e.position === null || e.position === undefined ? "-" : el("a", { href: "#/record/" + e.position, text: "#" + e.position })),
      el("td", { text: e.kind || "-" }), el("td", { className: "mono", text: where }),
      el("td", { className: "mono", text: e.path || "" }), el("td", { className: "error", text: e.reason || e.error || "" })));
  }
  return el("table", { id }, el("thead", {}, el("tr", {}, ...["record", "kind", "byte offset", "path", "error"].map((t) => el("th", { text: t })))), body);
}

async function viewHealth(generation) {
  const health = (await api("/api/health")).body;
  if (stale(generation)) return;
  const quarantine = el("div", { className: "panel", id: "health-quarantine" },
    el("h2", { text: "Quarantined by a loader (" + health.quarantine.length + ")" }));
  quarantine.append(health.quarantine.length ? problemTable(health.quarantine, "quarantine-table")
    : el("p", { className: "muted", text: "No record of this file is in the loaders' quarantine." }));
  const viewer = el("div", { className: "panel", id: "health-viewer" },
    el("h2", { text: "Found bad while viewing (" + health.viewer.length + ")" }));
  viewer.append(health.viewer.length ? problemTable(health.viewer, "viewer-table")
    : el("p", { className: "muted", text: "None yet: records are checked as pages show them." }));
  const verify = el("div", { className: "panel", id: "health-verify" });
  main.append(verify, quarantine, viewer);
  await verifyPanel(verify, health.verify, generation);
}

async function verifyPanel(panel, report, generation) {
  const decode = el("input", { type: "checkbox", id: "verify-decode" });
  const run = el("button", { id: "verify-run", text: "Run verify", onclick: async () => {
    run.disabled = true;
    try { await post("/api/jobs/verify" + (decode.checked ? "?decode=1" : "")); } catch (error) { panel.append(errorBox(error)); }
    route();
  } });
  const status = el("div", { id: "verify-status" });
  panel.append(el("h2", { text: "recpipe verify" }),
    el("p", { className: "muted", text: "Reads every record (resynchronising after damage), checks the index and the .sums checksums; with decode, every image too (" + bytes(state.info.bytes) + ")." }),
    el("div", { className: "toolbar" }, run, el("label", {}, decode, " decode every image")), status);
  for (;;) {
    const job = (await api("/api/jobs/verify")).body;
    if (stale(generation)) return;
    clear(status);
    if (job.state === "running") {
      run.disabled = true;
      const bar = el("div", {});
      bar.style.width = Math.round(100 * (job.bytes_read || 0) / Math.max(1, job.total_bytes)) + "%";
      status.append(el("div", { className: "progress" }, bar), el("div", { className: "muted", text: bytes(job.bytes_read) + " of " + bytes(job.total_bytes) + ", " + job.seconds + " s" }));
      await sleep(700);
      if (stale(generation)) return;
      continue;
    }
    if (job.state === "failed") status.append(errorBox(job.error));
    if (job.state === "done" && !report) { route(); return; }  // the health view takes its problems
    break;
  }
  if (report) {
    const counts = Object.entries(report.counts || {}).map(([k, n]) => k + " " + n).join(", ");
    status.append(el("p", { className: report.ok ? "ok" : "error", id: "verify-result",
      text: (report.ok ? "OK: " : "Problems: ") + report.records + " readable records" + (counts ? "; " + counts : "") + (report.decoded !== null ? "; decoded " + report.decoded : "") }));
    if (report.problems.length) status.append(problemTable(report.problems, "verify-table"));
  }
}

// ---- summary -----------------------------------------------------------------------------------

async function viewSummary(generation) {
  const info = state.info;
  const facts = el("div", { className: "panel" }, el("h2", { text: "File" }), el("table", {}, el("tbody", {},
    row("file", info.url), row("records", info.records), row("bytes", info.bytes + " (" + bytes(info.bytes) + ")"),
    row("index", info.index_url || "none (positions are the keys)"), row(".sums checksums", info.sums ? "yes: every record read is checked" : "none"),
    row("layout", info.layout ? "InsightFace: " + info.layout.images + " images (keys " + info.layout.image_keys.join("..") + "), " + info.layout.identities + " identities" : "plain"),
    row("thumbnail decoder", info.decoder + " (strict: damaged data is an error, never pixels)"),
    row("recipe", JSON.stringify(info.recipe)))));
  const text = el("div", { className: "panel", id: "summary-panel" }, el("h2", { text: "recpipe inspect" }));
  const side = el("div", { className: "side" });
  main.append(el("div", { className: "layout" }, side, el("div", { className: "content" }, facts, text)));
  histogramPanel(side, generation, false);
  if (!info.jobs.includes("summary")) { text.append(el("p", { className: "muted", text: "not available" })); return; }
  let job = (await api("/api/jobs/summary")).body;
  if (job.state === "idle" && info.bytes <= info.limits.auto_summary_bytes) job = (await post("/api/jobs/summary")).body;
  for (;;) {
    if (stale(generation)) return;
    const status = el("div", { id: "summary-status" });
    clear(text).append(el("h2", { text: "recpipe inspect" }), status);
    if (job.state === "idle") {
      status.append(el("p", { className: "muted", text: "Reads the whole file (" + bytes(info.bytes) + ")." }),
        el("button", { id: "summary-run", text: "Summarise", onclick: async () => { await post("/api/jobs/summary"); route(); } }));
      return;
    }
    if (job.state === "running") {
      status.append(el("p", { className: "muted", text: "reading the whole file\u2026 " + job.seconds + " s" }));
      await sleep(700);
      job = (await api("/api/jobs/summary")).body;
      continue;
    }
    if (job.state === "failed") { status.append(errorBox(job.error)); return; }
    status.append(el("pre", { id: "summary-text", text: job.result.text || job.result.errors }));
    return;
  }
}

// ---- start -------------------------------------------------------------------------------------

async function start() {
  try {
    state.info = (await api("/api/info")).body;
  } catch (error) {
    clear(main).append(errorBox(error));
    return;
  }
  const info = state.info;
  document.getElementById("file").textContent = info.url;
  document.title = "recpipe view: " + info.url.split("/").pop();
  document.getElementById("facts").textContent = info.records + " records \u00b7 " + bytes(info.bytes) +
    (info.layout ? " \u00b7 InsightFace layout: " + info.layout.images + " images, " + info.layout.identities + " identities" : "") +
    (info.sums ? " \u00b7 checksums" : "") + " \u00b7 batch_size " + info.recipe.batch_size + ", seed " + info.recipe.seed + ", shuffle " + info.recipe.shuffle;
  window.addEventListener("hashchange", route);
  route();
}

start();
