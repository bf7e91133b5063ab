// The attention viewer's page (served by autograder/learner/viewer.py). It sends the sentence to the
// local server, which measures the learner's own module in the sandbox, and draws the answer:
// one grid per head, the masked future left empty, leaks outlined, the quadratic growth.
// Colours come from autograder/render/attention_png.py (via the settings blob), so the page and the
// PNG export show the same picture.
"use strict";

const settings = JSON.parse(document.getElementById("settings").textContent);
const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

function t(key, params = {}) {
  const template = settings.strings[key] ?? key;
  return template.replace(/\{(\w+)\}/g, (whole, name) => (name in params ? String(params[name]) : whole));
}

function tokenCount(text) {
  // The server's tokens: characters after NFC normalisation (code points, not UTF-16 units).
  return Array.from(text.normalize("NFC")).length;
}

// ---------------------------------------------------------------- colours

const stops = settings.colors.stops.map((hex) => [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16)));

function shade(weight) {
  // Linear interpolation between evenly spaced stops, as matplotlib's from_list colormap.
  const x = Math.min(1, Math.max(0, weight)) * (stops.length - 1);
  const k = Math.min(stops.length - 2, Math.floor(x));
  const f = x - k;
  const rgb = stops[k].map((c, n) => Math.round(c + f * (stops[k + 1][n] - c)));
  return `rgb(${rgb.join(", ")})`;
}

// ---------------------------------------------------------------- drawing

function cellSize(T) {
  return Math.max(7, Math.min(30, Math.floor(300 / T)));
}

function drawHead(data, h) {
  const T = data.tokens.length;
  const size = cellSize(T);
  const weights = data.weights[h];
  const leaks = data.leaks[h];
  const figure = document.createElement("figure");
  figure.className = "head";
  const caption = document.createElement("figcaption");
  caption.textContent = t("viewer.head", { head: h });
  figure.append(caption);

  const table = document.createElement("table");
  table.className = "attention";
  table.dataset.head = String(h);
  table.dataset.size = String(T);
  table.style.setProperty("--cell", `${size}px`);
  table.style.setProperty("--border", settings.colors.border);
  table.style.setProperty("--leak", settings.colors.leak);
  table.style.setProperty("--nan", settings.colors.nan);
  table.style.setProperty("--masked", settings.colors.masked);
  const head = table.createTHead().insertRow();
  const corner = document.createElement("th");
  corner.className = "corner";
  corner.title = t("viewer.corner");
  corner.textContent = "i\\j";
  head.append(corner);
  for (let j = 0; j < T; j++) {
    const th = document.createElement("th");
    th.className = "key";
    th.scope = "col";
    th.textContent = data.labels[j];
    head.append(th);
  }
  const body = table.createTBody();
  const numbers = size >= 26;
  for (let i = 0; i < T; i++) {
    const row = body.insertRow();
    const th = document.createElement("th");
    th.className = "query";
    th.scope = "row";
    th.textContent = data.labels[i];
    row.append(th);
    for (let j = 0; j < T; j++) {
      const td = row.insertCell();
      const w = weights[i][j];
      td.className = "cell";
      td.dataset.i = String(i);
      td.dataset.j = String(j);
      if (j === i) td.classList.add("diag");
      if (w === null) {
        td.classList.add("nan");
        td.dataset.weight = "nan";
        td.textContent = "?";
        td.title = t("viewer.cell_nan", { query: data.labels[i], key: data.labels[j] });
        continue;
      }
      td.dataset.weight = String(w);
      const leak = leaks[i][j] === 1;
      if (j > i && w === 0 && !leak) {
        td.classList.add("masked");  // the future, correctly given nothing: left empty
        td.title = t("viewer.cell_masked", { query: data.labels[i], key: data.labels[j] });
        continue;
      }
      td.style.backgroundColor = shade(w);
      if (w > 0.5) td.classList.add("dark");
      if (leak) td.classList.add("leak");
      const shown = w.toFixed(2);
      td.title = t(leak ? "viewer.cell_leak" : "viewer.cell", { query: data.labels[i], key: data.labels[j], weight: w.toPrecision(3) });
      if (numbers) td.textContent = shown.startsWith("0.") ? shown.slice(1) : shown;
    }
  }
  figure.append(table);
  return figure;
}

function drawMessages(parts) {
  const box = $("messages");
  box.replaceChildren();
  for (const part of parts || []) {
    const node = document.createElement(part.kind === "text" ? "p" : "pre");
    node.className = `message ${part.kind}`;
    node.textContent = part.text;
    box.append(node);
  }
}

function drawFused(data) {
  const box = $("fused-info");
  box.replaceChildren();
  box.hidden = !data.fused;
  if (!data.fused) return;
  const sdpa = document.createElement("p");
  sdpa.id = "sdpa";
  sdpa.textContent = data.fused.sdpa_called
    ? t(data.fused.sdpa_causal ? "viewer.sdpa_causal" : "viewer.sdpa_not_causal")
    : t("viewer.sdpa_missing");
  const parity = document.createElement("p");
  parity.id = "parity";
  parity.textContent = data.fused.parity;
  box.append(sdpa, parity);
}

function render(data, text, mode) {
  const status = $("status");
  status.dataset.status = data.status;
  // What the picture is of: the text and mode it answers (a newer request may be on its way).
  status.dataset.text = text;
  status.dataset.mode = mode;
  status.textContent = t(`viewer.status_${data.status}`);
  drawMessages(data.messages);
  drawFused(data);
  const heads = $("heads");
  heads.replaceChildren();
  const drawn = Array.isArray(data.weights);
  if (drawn) {
    data.weights.forEach((_, h) => heads.append(drawHead(data, h)));
  }
  $("legend").hidden = !drawn;
  $("legend").textContent = t("viewer.legend");
  const link = $("export");
  link.hidden = !drawn;
  if (drawn) {
    link.href = `/export.png?${new URLSearchParams({ text, mode })}`;
  }
  drawGrowth(data.tokens ? data.tokens.length : tokenCount(text));
}

// ---------------------------------------------------------------- quadratic growth

function drawGrowth(T) {
  const max = settings.maxTokens;
  const heads = settings.heads;
  $("growth-text").textContent = T > 0
    ? t("viewer.growth_text", { T, per_head: T * T, heads, total: heads * T * T, causal: (T * (T + 1)) / 2,
        double: 2 * T, doubled: 4 * T * T })
    : t("viewer.growth_empty");

  const svg = $("growth-chart");
  svg.replaceChildren();
  const [x0, y0, w, h] = [44, 12, 280, 150];
  const px = (n) => x0 + (w * (n - 1)) / (max - 1);
  const py = (v) => y0 + h - (h * v) / (max * max);
  const line = (f, cls) => {
    const path = document.createElementNS(SVG, "path");
    let d = "";
    for (let n = 1; n <= max; n++) d += `${n === 1 ? "M" : "L"}${px(n).toFixed(1)},${py(f(n)).toFixed(1)}`;
    path.setAttribute("d", d);
    path.setAttribute("class", cls);
    svg.append(path);
  };
  const label = (x, y, text, cls = "axis-label") => {
    const node = document.createElementNS(SVG, "text");
    node.setAttribute("x", x);
    node.setAttribute("y", y);
    node.setAttribute("class", cls);
    node.textContent = text;
    svg.append(node);
  };
  const axes = document.createElementNS(SVG, "path");
  axes.setAttribute("d", `M${x0},${y0}V${y0 + h}H${x0 + w}`);
  axes.setAttribute("class", "axes");
  svg.append(axes);
  line((n) => n * n, "curve");
  line((n) => (n * (n + 1)) / 2, "curve causal");
  label(x0 - 4, y0 + 8, String(max * max), "axis-label end");
  label(x0 - 4, y0 + h, "0", "axis-label end");
  label(x0, y0 + h + 16, "1");
  label(x0 + w, y0 + h + 16, String(max), "axis-label end");
  label(x0 + w / 2, y0 + h + 16, t("viewer.growth_axis"), "axis-label middle");
  svg.setAttribute("aria-label", t("viewer.growth_chart"));
  if (T >= 1 && T <= max) {
    const dot = document.createElementNS(SVG, "circle");
    dot.setAttribute("cx", px(T));
    dot.setAttribute("cy", py(T * T));
    dot.setAttribute("r", 4);
    dot.setAttribute("class", "current");
    svg.append(dot);
    label(Math.min(px(T) + 6, x0 + w - 70), Math.max(py(T * T) - 6, y0 + 10), `T=${T}: ${T * T}`, "axis-label current");
  }

  const table = $("growth-table");
  table.replaceChildren();
  const header = table.createTHead().insertRow();
  for (const key of ["viewer.growth_col_T", "viewer.growth_col_entries", "viewer.growth_col_causal", "viewer.growth_col_all_heads"]) {
    const th = document.createElement("th");
    th.textContent = t(key);
    header.append(th);
  }
  const body = table.createTBody();
  const sizes = [...new Set([1, 2, 4, 8, 16, 32, 64, T].filter((n) => n >= 1 && n <= max))].sort((a, b) => a - b);
  for (const n of sizes) {
    const row = body.insertRow();
    if (n === T) row.className = "current";
    for (const value of [n, n * n, (n * (n + 1)) / 2, heads * n * n]) row.insertCell().textContent = String(value);
  }
}

// ---------------------------------------------------------------- requests

let inFlight = false;
let again = false;
let timer = null;

function markSettled() {
  // data-settled="1": no request running, queued or scheduled; what is drawn is final.
  document.body.dataset.settled = !inFlight && !again && timer === null ? "1" : "0";
}

function currentMode() {
  return document.querySelector('input[name="mode"]:checked').value;
}

function updateCounter() {
  const n = tokenCount($("sentence").value);
  const counter = $("counter");
  counter.textContent = t("viewer.counter", { count: n, max: settings.maxTokens });
  counter.classList.toggle("over", n > settings.maxTokens);
}

async function request() {
  // One request at a time; typing meanwhile sends the latest text once the answer is in.
  clearTimeout(timer);
  timer = null;
  if (inFlight) {
    again = true;
    markSettled();
    return;
  }
  const text = $("sentence").value;
  const mode = currentMode();
  $("mode-note").textContent = t(`viewer.note_${mode}`);
  if (text.length === 0) {
    $("status").dataset.status = "idle";
    $("status").dataset.text = "";
    $("status").dataset.mode = mode;
    $("status").textContent = t("viewer.status_idle");
    drawMessages([]);
    $("heads").replaceChildren();
    $("fused-info").hidden = true;
    $("legend").hidden = true;
    $("export").hidden = true;
    drawGrowth(0);
    markSettled();
    return;
  }
  inFlight = true;
  markSettled();
  $("status").dataset.status = "busy";
  $("status").textContent = t("viewer.status_busy");
  try {
    const response = await fetch("/api/attention", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text, mode }),
    });
    const data = await response.json();
    render(data, text, mode);
  } catch (error) {
    render({ status: "refused", messages: [{ kind: "text", text: t("viewer.server_gone") }] }, text, mode);
  } finally {
    inFlight = false;
    if (again) {
      again = false;
      request();
    }
    markSettled();
  }
}

function schedule() {
  updateCounter();
  clearTimeout(timer);
  timer = setTimeout(request, 250);
  markSettled();
}

function start() {
  for (const node of document.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n, settings.facts);
  for (const node of document.querySelectorAll("[data-i18n-placeholder]")) node.placeholder = t(node.dataset.i18nPlaceholder);
  $("sentence").addEventListener("input", schedule);
  for (const radio of document.querySelectorAll('input[name="mode"]')) radio.addEventListener("change", request);
  $("form").addEventListener("submit", (event) => {
    event.preventDefault();
    request();
  });
  $("status").textContent = t("viewer.status_idle");
  $("mode-note").textContent = t(`viewer.note_${currentMode()}`);
  updateCounter();
  drawGrowth(0);
  markSettled();
  document.body.dataset.ready = "1";
}

start();
