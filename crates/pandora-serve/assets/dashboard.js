// The Pandora dashboard: draws the studies of a `pandora serve` storage from its JSON API as SVG,
// polling while a study runs. No library; see crates/pandora-serve/src/dashboard.rs and
// docs/serve.md ("Dashboard").
//
// Safety rule of this file: user-controlled strings (study, parameter and worker names, choices,
// failure reasons) enter the page only as text nodes (`text`, `textContent`) or attribute values
// (`setAttribute`), never as markup. A test of the crate fails if markup-parsing calls appear.
"use strict";

const POLL_MS = 3000;
const PAGE = 1000;
const SVG_NS = "http://www.w3.org/2000/svg";
const TOKEN_KEY = "pandora-token";

// ---------------------------------------------------------------- DOM helpers

function text(s) {
  return document.createTextNode(String(s));
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  return fill(e, attrs, children);
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  return fill(e, attrs, children);
}

function fill(e, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === "object" ? c : text(c));
  }
  return e;
}

function clear(e) {
  while (e.firstChild) e.removeChild(e.firstChild);
  return e;
}

// ---------------------------------------------------------------- numbers

function isNum(v) {
  return typeof v === "number" && Number.isFinite(v);
}

function fmt(v) {
  if (!isNum(v)) return "–";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(3).replace(/\.?0+e/, "e");
  return String(Number(v.toPrecision(5)));
}

// ---------------------------------------------------------------- the API

class Unauthorized extends Error {}

async function api(path) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const r = await fetch(path, { headers, cache: "no-store" });
  if (r.status === 401) throw new Unauthorized("the server needs a token");
  if (!r.ok) {
    let msg = r.status + " " + r.statusText;
    try {
      const body = await r.json();
      if (body && body.error && body.error.message) msg = body.error.message;
    } catch (_) { /* not JSON */ }
    throw new Error(msg);
  }
  return r.json();
}

function studyPath(name) {
  return "/api/studies/" + encodeURIComponent(name);
}

async function allTrials(name) {
  let trials = [];
  for (let offset = 0; ; offset += PAGE) {
    const page = await api(studyPath(name) + "/trials?offset=" + offset + "&limit=" + PAGE);
    trials = trials.concat(page.trials);
    if (page.trials.length === 0 || trials.length >= page.total) return trials;
  }
}

// ---------------------------------------------------------------- scales and ticks

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

// A scale of `values` onto [a, b] in pixels: linear, linear with whole-number ticks ("int", for
// counts), logarithmic (positive values only) or categorical (`cats`, the labels in order).
function scale(values, a, b, kind, cats) {
  if (kind === "cat") {
    const n = Math.max(cats.length, 1);
    const at = (i) => a + ((i + 0.5) / n) * (b - a);
    return { at, ticks: cats.map((c, i) => [at(i), c]) };
  }
  const log = kind === "log";
  const vs = values.filter((v) => isNum(v) && (!log || v > 0)).map((v) => (log ? Math.log10(v) : v));
  let lo = vs.length ? Math.min(...vs) : 0;
  let hi = vs.length ? Math.max(...vs) : 1;
  if (hi === lo) {
    const pad = log ? 0.5 : Math.abs(lo) * 0.1 || 1;
    lo -= pad;
    hi += pad;
  } else {
    const pad = (hi - lo) * 0.05;
    lo -= pad;
    hi += pad;
  }
  const px = (u) => a + ((u - lo) / (hi - lo)) * (b - a);
  if (log) {
    // 1, 2 and 5 times the powers of ten in range (1 and 3, or only 1, over more decades).
    const mults = hi - lo > 2 ? [1] : hi - lo > 1 ? [1, 3] : [1, 2, 5];
    const ticks = [];
    for (let k = Math.floor(lo); k <= Math.ceil(hi); k++) {
      for (const m of mults) {
        const u = k + Math.log10(m);
        if (u >= lo && u <= hi) ticks.push([px(u), fmt(m * Math.pow(10, k))]);
      }
    }
    return { at: (v) => (v > 0 ? px(Math.log10(v)) : null), ticks };
  }
  let ticks = niceTicks(lo, hi, 5);
  if (kind === "int") {
    // Counts (trials, steps): whole numbers only, every one when fewer than two remain.
    ticks = ticks.filter((t) => Number.isInteger(t));
    if (ticks.length < 2) {
      ticks = [];
      for (let t = Math.ceil(lo); t <= Math.floor(hi); t++) ticks.push(t);
    }
  }
  return { at: (v) => (isNum(v) ? px(v) : null), ticks: ticks.map((t) => [px(t), fmt(t)]) };
}

// ---------------------------------------------------------------- charts

const W = 460;
const H = 250;
const M = { l: 62, r: 14, t: 36, b: 40 };

// An SVG chart. `spec`: {id, title, x: {label, kind, cats}, y: {label, kind}, series: [{name,
// kind: "line"|"step"|"dots"|"bars", cls, points: [{x, y, tip, cls}]}], diagonal: bool, legend:
// [{name, cls}]}. A series' `cls` replaces its colour by position; `legend` replaces the legend of
// the series. The element carries `data-plot` (the id) and `data-points` (points drawn), which
// the browser test reads.
function chart(spec) {
  const all = spec.series.flatMap((s) => s.points);
  const xs = all.map((p) => p.x);
  const ys = all.map((p) => p.y);
  if (spec.diagonal) {
    xs.push(...ys);
    ys.push(...xs);
  }
  const sx = scale(xs, M.l, W - M.r, spec.x.kind, spec.x.cats || []);
  const sy = scale(spec.series.some((s) => s.kind === "bars") && spec.y.kind !== "log" ? ys.concat([0]) : ys,
    H - M.b, M.t, spec.y.kind, []);
  const root = svg("svg", {
    class: "plot", "data-plot": spec.id, "data-points": all.length,
    width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img",
  });
  root.appendChild(svg("title", {}, spec.title));
  root.appendChild(svg("text", { class: "title", x: M.l, y: 14 }, spec.title));
  axes(root, sx, sy, spec);
  if (spec.diagonal) diagonal(root, sx, sy, xs);
  spec.series.forEach((s, i) => drawSeries(root, s, s.cls || "s" + (i % 4), sx, sy));
  if (!all.length) {
    root.appendChild(svg("text", { class: "empty", x: (M.l + W - M.r) / 2, y: (M.t + H - M.b) / 2,
      "text-anchor": "middle" }, "nothing to show yet"));
  }
  legend(root, spec.legend || spec.series);
  return root;
}

function axes(root, sx, sy, spec) {
  const g = svg("g", {});
  for (const [y, label] of sy.ticks) {
    if (y < M.t - 1 || y > H - M.b + 1) continue;
    g.appendChild(svg("line", { class: "grid", x1: M.l, x2: W - M.r, y1: y, y2: y }));
    g.appendChild(svg("text", { x: M.l - 6, y: y + 4, "text-anchor": "end" }, label));
  }
  const every = Math.ceil(sx.ticks.length / 8);
  sx.ticks.forEach(([x, label], i) => {
    if (x < M.l - 1 || x > W - M.r + 1 || i % every) return;
    g.appendChild(svg("line", { class: "axis", x1: x, x2: x, y1: H - M.b, y2: H - M.b + 4 }));
    const short = String(label).length > 12 ? String(label).slice(0, 11) + "…" : label;
    g.appendChild(svg("text", { x, y: H - M.b + 16, "text-anchor": "middle" }, short));
  });
  g.appendChild(svg("line", { class: "axis", x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b }));
  g.appendChild(svg("line", { class: "axis", x1: M.l, x2: M.l, y1: M.t, y2: H - M.b }));
  g.appendChild(svg("text", { x: (M.l + W - M.r) / 2, y: H - 6, "text-anchor": "middle" }, spec.x.label));
  const yl = svg("text", { x: 0, y: 0, "text-anchor": "middle",
    transform: "translate(13 " + (M.t + H - M.b) / 2 + ") rotate(-90)" }, spec.y.label);
  g.appendChild(yl);
  root.appendChild(g);
}

function diagonal(root, sx, sy, vs) {
  const ok = vs.filter((v) => isNum(v) && v > 0);
  if (!ok.length) return;
  const lo = Math.min(...ok);
  const hi = Math.max(...ok);
  root.appendChild(svg("line", { class: "ref", x1: sx.at(lo), y1: sy.at(lo), x2: sx.at(hi), y2: sy.at(hi) }));
}

function drawSeries(root, s, cls, sx, sy) {
  const pts = s.points
    .map((p) => ({ ...p, px: sx.at(p.x), py: sy.at(p.y) }))
    .filter((p) => isNum(p.px) && isNum(p.py));
  const g = svg("g", { class: "series", "data-series": s.name });
  if (s.kind === "line" || s.kind === "step") {
    let d = "";
    pts.forEach((p, i) => {
      if (i === 0) d += "M" + p.px + " " + p.py;
      else if (s.kind === "step") d += "H" + p.px + "V" + p.py;
      else d += "L" + p.px + " " + p.py;
    });
    if (d) g.appendChild(svg("path", { class: "line " + cls, d }));
  }
  if (s.kind === "bars") {
    const bw = Math.max(1, Math.min(14, ((W - M.l - M.r) / Math.max(pts.length, 1)) * 0.7));
    const base = sy.at(0) ?? H - M.b;
    for (const p of pts) {
      const top = Math.min(p.py, base);
      g.appendChild(svg("rect", { class: p.cls || cls, x: p.px - bw / 2, y: top, width: bw,
        height: Math.max(Math.abs(base - p.py), 1) }, svg("title", {}, p.tip || "")));
    }
  }
  if (s.kind === "dots" || s.kind === "step" || s.kind === "line") {
    const r = s.kind === "dots" ? 3.2 : 2.2;
    for (const p of pts) {
      g.appendChild(svg("circle", { class: "dot " + (p.cls || cls), cx: p.px, cy: p.py, r },
        svg("title", {}, p.tip || "")));
    }
  }
  root.appendChild(g);
}

function legend(root, series) {
  if (series.length < 2) return;
  const g = svg("g", { class: "legend" });
  let x = W - M.r;
  for (let i = series.length - 1; i >= 0; i--) {
    const label = series[i].name;
    x -= 7 * label.length + 22;
    g.appendChild(svg("rect", { class: series[i].cls || "s" + (i % 4), x, y: 19, width: 10, height: 10 }));
    g.appendChild(svg("text", { x: x + 14, y: 28 }, label));
  }
  root.appendChild(g);
}

// ---------------------------------------------------------------- what the panels show

function better(dir, a, b) {
  return dir === "minimize" ? a < b : a > b;
}

function finishedInOrder(trials) {
  return trials
    .filter((t) => isNum(t.finished_at))
    .sort((a, b) => a.finished_at - b.finished_at || a.number - b.number);
}

function tipOf(t, extra) {
  return "trial " + t.number + " (" + t.state + ")" + (extra ? ": " + extra : "");
}

function bestVsCost(setup, trials) {
  let spent = 0;
  let best = null;
  const pts = [];
  for (const t of finishedInOrder(trials)) {
    if (isNum(t.cost)) spent += t.cost;
    if (t.state === "complete" && isNum(t.objective)) {
      if (best === null || better(setup.direction, t.objective, best)) best = t.objective;
      pts.push({ x: spent, y: best, tip: tipOf(t, "best " + fmt(best) + " after cost " + fmt(spent)) });
    }
  }
  return chart({
    id: "best-vs-cost", title: "Best value against cumulative cost",
    x: { label: "cumulative cost", kind: "lin" }, y: { label: "best " + setup.direction.replace("imize", "imum") },
    series: [{ name: "best so far", kind: "step", points: pts }],
  });
}

function costPerTrial(trials) {
  const pts = trials.filter((t) => isNum(t.cost)).map((t) => ({
    x: t.number, y: t.cost, cls: t.state === "failed" ? "failed" : null, tip: tipOf(t, "cost " + fmt(t.cost)),
  }));
  return chart({
    id: "cost-per-trial", title: "Cost per trial (failed in red)",
    x: { label: "trial", kind: "int" }, y: { label: "cost", kind: "lin" },
    series: [{ name: "cost", kind: "bars", points: pts }],
  });
}

// The budget left after each outcome told, in the order told: every step of a trial with steps
// (paused and running trials spend too), every finished trial without steps.
function budgetRemaining(setup, trials) {
  const total = setup.budget.total;
  const events = [];
  for (const t of trials) {
    const counts = setup.budget.count_initial || t.decision.phase !== "initial";
    const steps = Array.isArray(t.steps) ? t.steps : [];
    if (steps.length) {
      for (const s of steps) {
        events.push({ at: s.at, number: t.number, cost: counts ? s.cost : 0, t, what: "step " + s.step });
      }
    } else if (isNum(t.finished_at)) {
      events.push({ at: t.finished_at, number: t.number, cost: counts && isNum(t.cost) ? t.cost : 0, t, what: "" });
    }
  }
  events.sort((a, b) => a.at - b.at || a.number - b.number);
  let spent = 0;
  const pts = [{ x: 0, y: total, tip: "budget " + fmt(total) }];
  events.forEach((e, i) => {
    spent += e.cost;
    const what = (e.what ? e.what + ", " : "") + "remaining " + fmt(total - spent);
    pts.push({ x: i + 1, y: total - spent, tip: tipOf(e.t, what) });
  });
  const stepped = trials.some((t) => Array.isArray(t.steps) && t.steps.length > 0);
  return chart({
    id: "budget-remaining", title: "Budget remaining",
    x: { label: stepped ? "outcomes told (steps and trials)" : "trials finished", kind: "int" },
    y: { label: "cost units left", kind: "lin" },
    series: [{ name: "remaining", kind: "line", points: pts }],
  });
}

function lambdaChart(trials) {
  const pts = trials.filter((t) => isNum(t.decision.lambda) && t.decision.lambda > 0)
    .map((t) => ({ x: t.number, y: t.decision.lambda, tip: tipOf(t, "λ " + fmt(t.decision.lambda)) }));
  return chart({
    id: "lambda", title: "λ of each decision",
    x: { label: "trial", kind: "int" }, y: { label: "λ (log scale)", kind: "log" },
    series: [{ name: "λ", kind: "line", points: pts }],
  });
}

function stoppingChart(trials) {
  const checks = trials.filter((t) => t.decision.stopping).map((t) => [t, t.decision.stopping]);
  const value = checks.filter(([, s]) => isNum(s.value)).map(([t, s]) => ({
    x: t.number, y: s.value, tip: tipOf(t, (s.statistic || "statistic") + " " + fmt(s.value) + (s.fired ? " (fired)" : "")),
  }));
  const threshold = checks.filter(([, s]) => isNum(s.threshold)).map(([t, s]) => ({
    x: t.number, y: s.threshold, tip: tipOf(t, "threshold " + fmt(s.threshold)),
  }));
  const name = (checks.find(([, s]) => s.statistic) || [null, { statistic: "statistic" }])[1].statistic;
  return chart({
    id: "stopping", title: "Stopping statistic against its threshold",
    x: { label: "trial", kind: "int" }, y: { label: name, kind: "lin" },
    series: [
      { name: name, kind: "line", points: value },
      { name: "threshold (log λ)", kind: "line", points: threshold },
    ],
  });
}

function costModel(trials) {
  const pts = trials.filter((t) => isNum(t.decision.predicted_cost) && isNum(t.cost) && t.cost > 0)
    .map((t) => ({ x: t.decision.predicted_cost, y: t.cost,
      tip: tipOf(t, "predicted " + fmt(t.decision.predicted_cost) + ", observed " + fmt(t.cost)) }));
  return chart({
    id: "cost-model", title: "Cost model: predicted against observed",
    x: { label: "predicted cost (log)", kind: "log" }, y: { label: "observed cost (log)", kind: "log" },
    series: [{ name: "trials", kind: "dots", points: pts }], diagonal: true,
  });
}

// The states a trial with steps can be in, in the order the legend lists them.
const STEP_STATES = ["running", "paused", "complete", "failed", "abandoned"];

// Learning curves of a study with steps: one line per trial, the value told at each step,
// coloured by the trial's state (running, paused, complete, failed).
function learningCurves(setup, trials) {
  const stepped = trials.filter((t) => Array.isArray(t.steps) && t.steps.length > 0);
  const series = stepped.map((t) => ({
    name: "trial " + t.number, kind: "line", cls: "st-" + t.state,
    points: t.steps.filter((s) => isNum(s.value)).map((s) => ({
      x: s.step, y: s.value, tip: tipOf(t, "step " + s.step + ", value " + fmt(s.value) + ", cost " + fmt(s.cost)),
    })),
  }));
  const shown = STEP_STATES.filter((st) => stepped.some((t) => t.state === st));
  return chart({
    id: "learning-curves", title: "Learning curves (value per step)",
    x: { label: "step (of " + setup.fidelity.max_steps + ")", kind: "int" },
    y: { label: "value (" + setup.direction + ")", kind: "lin" },
    series, legend: shown.length > 1 ? shown.map((st) => ({ name: st, cls: "st-" + st })) : [],
  });
}

// One row per trial with steps: its state, the steps told, the step its run goes to and the last
// value; paused trials wait for an ask to resume them.
function stepTable(setup, trials) {
  const head = el("tr", {}, ["#", "state", "steps told", "run to step", "last value", "worker"]
    .map((h) => el("th", {}, h)));
  const rows = trials.filter((t) => isNum(t.step_to)).map((t) => {
    const steps = t.steps || [];
    const last = steps.length ? steps[steps.length - 1].value : null;
    return el("tr", { "data-number": t.number, "data-state": t.state, class: "st-" + t.state },
      el("td", {}, String(t.number)), el("td", { class: "text" }, t.state),
      el("td", {}, steps.length + " of " + setup.fidelity.max_steps), el("td", {}, String(t.step_to)),
      el("td", {}, fmt(last)), el("td", { class: "text" }, t.worker || ""));
  });
  return el("div", { class: "tablewrap" },
    el("table", { class: "trials", id: "step-table" }, el("thead", {}, head), el("tbody", {}, rows)));
}

function paramKey(v) {
  return typeof v === "string" ? v : JSON.stringify(v);
}

function paramChart(setup, p, trials) {
  const done = trials.filter((t) => t.state === "complete" && isNum(t.objective) && t.params);
  const choices = p.type === "categorical" ? p.choices : p.type === "ordinal" ? p.values : null;
  const cats = choices ? choices.map(paramKey) : null;
  const pts = done.map((t) => {
    const v = t.params[p.name];
    const x = cats ? cats.indexOf(paramKey(v)) : v;
    return { x, y: t.objective, tip: tipOf(t, p.name + " = " + paramKey(v) + ", objective " + fmt(t.objective)) };
  }).filter((q) => (cats ? q.x >= 0 : isNum(q.x)));
  return chart({
    id: "param", title: p.name,
    x: { label: p.name + (p.log ? " (log)" : ""), kind: cats ? "cat" : p.log ? "log" : "lin", cats },
    y: { label: "objective", kind: "lin" },
    series: [{ name: "trials", kind: "dots", points: pts }],
  });
}

// ---------------------------------------------------------------- the trial table

const sort = { key: "number", desc: false };

function columns(setup) {
  const d = (f) => (t) => f(t.decision || {});
  const cols = [
    ["number", "#", (t) => t.number],
    ["state", "state", (t) => t.state],
    ["objective", "objective", (t) => t.objective],
    ["cost", "cost", (t) => t.cost],
    ["predicted_cost", "predicted cost", d((x) => x.predicted_cost)],
    ["phase", "phase", d((x) => x.phase)],
    ["acquisition_value", "acquisition", d((x) => x.acquisition_value)],
    ["lambda", "λ", d((x) => x.lambda)],
    ["stat", "stopping stat.", d((x) => x.stopping && x.stopping.value)],
    ["seconds", "decision s", d((x) => x.seconds)],
    ["worker", "worker", (t) => t.worker],
  ];
  for (const p of setup.space) {
    cols.push(["param:" + p.name, p.name, (t) => (t.params ? t.params[p.name] : null)]);
  }
  cols.push(["error", "error", (t) => t.error]);
  return cols;
}

function compare(a, b) {
  const na = a === null || a === undefined;
  const nb = b === null || b === undefined;
  if (na || nb) return na === nb ? 0 : na ? 1 : -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return paramKey(a).localeCompare(paramKey(b));
}

function trialTable(setup, trials, bestNumber, redraw) {
  const cols = columns(setup);
  const col = cols.find((c) => c[0] === sort.key) || cols[0];
  const rows = trials.slice().sort((a, b) => {
    const c = compare(col[2](a), col[2](b));
    const nulls = col[2](a) === null || col[2](a) === undefined || col[2](b) === null || col[2](b) === undefined;
    return (sort.desc && !nulls ? -c : c) || a.number - b.number;
  });
  const head = el("tr", {}, cols.map(([key, label]) => {
    const th = el("th", { "data-key": key, class: key === sort.key ? (sort.desc ? "sorted-desc" : "sorted-asc") : null }, label);
    th.addEventListener("click", () => {
      sort.desc = sort.key === key ? !sort.desc : false;
      sort.key = key;
      redraw();
    });
    return th;
  }));
  const body = rows.map((t) => el("tr", {
    "data-number": t.number, class: t.number === bestNumber ? "best" : t.state === "failed" ? "failed" : null,
  }, cols.map(([key, , get]) => {
    const v = get(t);
    const num = typeof v === "number";
    return el("td", { class: num ? null : "text" }, num ? (key === "number" ? String(v) : fmt(v)) : v === null || v === undefined ? "" : paramKey(v));
  })));
  return el("div", { class: "tablewrap" }, el("table", { class: "trials", id: "trial-table" }, el("thead", {}, head), el("tbody", {}, body)));
}

// ---------------------------------------------------------------- the pages

function fact(id, label, value, raw) {
  return el("div", { class: "fact" }, el("span", { class: "k" }, label),
    el("span", { class: "v", id, "data-value": raw === undefined ? null : raw }, value));
}

function panel(id, title, content, note, wide) {
  return el("section", { class: "panel" + (wide ? " wide" : ""), "data-panel": id },
    el("h2", {}, title), content, note ? el("p", { class: "note" }, note) : null);
}

function costModelNote(setup, trials) {
  const n = trials.filter((t) => isNum(t.decision.predicted_cost)).length;
  if (n > 0) {
    return "Each dot is a trial: the cost its decision expected (the log-cost GP's E[c] for reported " +
      "or runtime costs, the formula for known costs) against the cost observed; the dashed line is equality.";
  }
  return "No decision of this study records a predicted cost (cost kind \"" + setup.cost +
    "\": the initial design and random steps predict none under reported or runtime costs, " +
    "and uniform costs are 1 by definition).";
}

function studyFacts(setup, status, trials) {
  const s = status.status;
  const n = trials.length;
  const best = s.best;
  const total = setup.budget.total;
  const facts = [
    fact("trial-count", "trials", String(n), n),
    fact("complete-count", "complete", String(s.complete), s.complete),
    fact("running-count", "running", String(s.running), s.running),
    fact("failed-count", "failed", String(s.failed), s.failed),
    fact("best-value", "best (" + setup.direction + ")", best ? fmt(best.objective) : "–", best ? best.objective : null),
    fact("best-trial", "best trial", best ? "#" + best.number : "–", best ? best.number : null),
    fact("total-cost", "total cost", fmt(s.total_cost), s.total_cost),
    fact("budget-left", "budget remaining", isNum(total) ? fmt(total - s.budget_spent) + " of " + fmt(total) : "no total",
      isNum(total) ? total - s.budget_spent : null),
    fact("lambda-now", "λ", fmt(s.lambda), s.lambda),
  ];
  if (setup.fidelity) {
    facts.splice(4, 0, fact("paused-count", "paused", String(s.paused), s.paused));
  }
  if (s.stopping) {
    facts.push(fact("stopping-now", "stopping " + s.stopping.rule, fmt(s.stopping.value) + " vs " + fmt(s.stopping.threshold)));
  }
  return el("div", { class: "facts" }, facts);
}

function studyPage(name, setup, status, trials, redraw) {
  const s = status.status;
  const bestNumber = s.best ? s.best.number : null;
  const title = el("h1", { id: "study-name" }, name);
  const sub = el("p", { class: "reason", id: "stop-reason" },
    setup.direction + " · " + setup.objective + " objective · acquisition " + setup.acquisition +
    " · " + setup.cost + " costs" + (s.stop_reason ? " · finished: " + s.stop_reason : " · running"));
  const budget = isNum(setup.budget.total) ? budgetRemaining(setup, trials)
    : el("p", { class: "note" }, "No budget total is configured" +
      (setup.budget.max_trials ? " (max_trials = " + setup.budget.max_trials + ")." : "."));
  const panels = el("div", { class: "panels" },
    panel("best", "Progress", bestVsCost(setup, trials),
      "The best objective so far (" + setup.direction + ") against the cost spent, trials in the order they finished."),
    panel("cost", "Costs", el("div", {}, costPerTrial(trials), budget),
      setup.budget.count_initial ? null : "The initial design's cost does not count toward the budget (count_initial = false)."),
    panel("lambda", "λ and stopping", el("div", {}, lambdaChart(trials), stoppingChart(trials)),
      setup.stopping ? "The rule stops when its statistic stays below the threshold log λ." : "No stopping rule is configured; λ is the acquisition's (PBGI, PBGI-D or a Gittins CVS policy)."),
    panel("cost-model", "Cost model", costModel(trials), costModelNote(setup, trials)),
    setup.fidelity ? panel("steps", "Steps", el("div", {}, learningCurves(setup, trials), stepTable(setup, trials)),
      "Each line is a trial's value at each step it has run (" + setup.fidelity.steps_per_ask +
      " per ask, " + setup.fidelity.max_steps + " for a complete run), coloured by its state: " +
      "a paused trial waits for an ask to resume it from its checkpoint.", true) : null,
    panel("params", "Parameters against the objective",
      el("div", { class: "params" }, setup.space.map((p) => paramChart(setup, p, trials))), null, true),
    panel("trials", "Trials", trialTable(setup, trials, bestNumber, redraw),
      "Click a column to sort; the best trial is green.", true));
  return [title, sub, studyFacts(setup, status, trials), panels];
}

async function studyView(name) {
  document.title = name + " · Pandora";
  const setup = await api(studyPath(name) + "/setup");
  let last = null;
  let seen = "";
  const draw = () => {
    if (!last) return;
    const y = window.scrollY;
    const main = clear(document.getElementById("main"));
    studyPage(name, setup, last.status, last.trials, draw).forEach((e) => main.appendChild(e));
    window.scrollTo(0, y);
  };
  await poll(async () => {
    const status = await api(studyPath(name));
    const trials = await allTrials(name);
    const key = JSON.stringify(status.status) + "|" + trials.length + "|" +
      trials.map((t) => t.state + (t.finished_at || "") + ":" + (t.steps ? t.steps.length : 0)).join(",");
    document.getElementById("storage").textContent = status.storage;
    if (key !== seen) {
      seen = key;
      last = { status, trials };
      draw();
    }
  });
}

async function listView() {
  await poll(async () => {
    const list = await api("/api/studies");
    document.getElementById("storage").textContent = list.storage;
    const rows = [];
    for (const name of list.studies) {
      const s = (await api(studyPath(name))).status;
      const link = el("a", { href: "?study=" + encodeURIComponent(name) }, name);
      rows.push(el("tr", { "data-study": name },
        el("td", { class: "text" }, link), el("td", {}, String(s.complete)), el("td", {}, String(s.running)),
        el("td", {}, String(s.failed)), el("td", {}, s.best ? fmt(s.best.objective) : "–"),
        el("td", {}, fmt(s.total_cost)), el("td", { class: "text" }, s.stop_reason || "running")));
    }
    const head = el("tr", {}, ["study", "complete", "running", "failed", "best", "total cost", "state"]
      .map((h, i) => el("th", { class: i === 0 || i === 6 ? "text" : null }, h)));
    const main = clear(document.getElementById("main"));
    main.appendChild(el("h1", {}, "Studies"));
    main.appendChild(list.studies.length
      ? el("table", { class: "studies", id: "study-list" }, el("thead", {}, head), el("tbody", {}, rows))
      : el("p", {}, "No study in this storage yet (create one with POST /api/studies or pandora run)."));
  });
}

// Runs `step` now and every POLL_MS while the tab is visible; a failure shows in the banner and
// polling goes on (the server may be restarting).
async function poll(step) {
  const problem = document.getElementById("problem");
  const once = async () => {
    if (!document.hidden) {
      try {
        await step();
        problem.hidden = true;
        document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
      } catch (e) {
        if (e instanceof Unauthorized) {
          askToken();
          return;
        }
        problem.hidden = false;
        problem.textContent = "Not updated: " + e.message;
      }
    }
    setTimeout(once, POLL_MS);
  };
  await once();
}

function askToken() {
  const input = el("input", { type: "password", id: "token", size: 40, autocomplete: "off" });
  const form = el("form", { id: "token-form" }, el("label", { for: "token" }, "Bearer token: "), input,
    el("button", { type: "submit" }, "Use"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    location.reload();
  });
  const main = clear(document.getElementById("main"));
  main.appendChild(el("p", {}, "This server needs its bearer token (kept in this tab only)."));
  main.appendChild(form);
}

function start() {
  const name = new URLSearchParams(location.search).get("study");
  const view = name === null ? listView() : studyView(name);
  view.catch((e) => {
    if (e instanceof Unauthorized) return askToken();
    const problem = document.getElementById("problem");
    problem.hidden = false;
    problem.textContent = "Could not load: " + e.message;
  });
}

document.addEventListener("DOMContentLoaded", start);
