// verigym view: the page's core (helpers, routing, the run list and the sample table). No framework,
// no build step: every element is made with createElement and every text a run holds is put in as a
// text node (never as HTML), so a model's "<script>" is shown, not run.
"use strict";

const V = (window.V = {});

V.h = function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "className") el.className = v;
    else if (k === "style") el.style.cssText = v; // through the CSSOM: the page's CSP forbids style attributes
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
};
const h = V.h;

V.fmt = function fmt(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  if (typeof x !== "number") return String(x);
  if (Number.isInteger(x)) return x.toLocaleString("en-US");
  return x.toPrecision(digits || 3).replace(/\.?0+$/, (m) => (m.startsWith(".") ? "" : m));
};
V.secs = (s) => (s === null || s === undefined ? "–" : s < 1 ? `${(s * 1000).toFixed(0)} ms` : s < 120 ? `${s.toFixed(1)} s` : `${(s / 60).toFixed(1)} min`);
V.enc = encodeURIComponent;

V.api = async function api(path, params) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined && v !== "") qs.set(k, v);
  const res = await fetch(`/api/${path}?${qs}`);
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
  return body;
};

V.main = () => document.getElementById("main");
V.show = function show(...kids) {
  const main = V.main();
  main.replaceChildren(...kids.flat());
};
V.fail = (err) => V.show(h("div", { className: "err-box" }, String(err.message || err)));
V.where = (...parts) => document.getElementById("where").replaceChildren(...parts);

let timer = null;
V.poll = function poll(fn, ms) {
  if (timer) clearInterval(timer);
  timer = fn ? setInterval(fn, ms || 2000) : null;
  V.polling = Boolean(fn);
  document.getElementById("live").textContent = fn ? `live: refreshing every ${(ms || 2000) / 1000} s` : "";
};

V.card = (label, value, cls) => h("div", { className: "card" }, h("div", { className: "label" }, label), h("div", { className: `value ${cls || ""}` }, value));

// ---- routing: #/  #/run/ID?query  #/sample/ID/ROW  #/compare/A/B  #/train/ID  #/train/ID/step/N
V.routes = [];
V.route = (re, fn) => V.routes.push([re, fn]);
async function dispatch() {
  V.poll(null);
  const hash = location.hash.slice(1) || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  for (const [re, fn] of V.routes) {
    const m = path.match(re);
    if (m) {
      try {
        await fn(m.slice(1).map(decodeURIComponent), params);
      } catch (err) {
        V.fail(err);
      }
      return;
    }
  }
  V.fail(new Error(`no page ${hash}`));
}
window.addEventListener("hashchange", dispatch);
window.addEventListener("DOMContentLoaded", dispatch);

// ---- the run list
const passK = (p) => Object.entries(p || {}).filter(([, v]) => v !== null).map(([k, v]) => `@${k} ${V.fmt(v)}`).join("  ");

V.route(/^\/$/, async () => {
  V.where("runs");
  const table = h("tbody");
  const picked = new Set();
  const compare = h("button", { className: "primary", disabled: true, onclick: () => {
    const [a, b] = [...picked];
    location.hash = `#/compare/${V.enc(a)}/${V.enc(b)}`;
  } }, "Compare the two ticked runs");
  const fill = (data) => {
    table.replaceChildren(...data.runs.map((r) => {
      const link = r.view === "train" ? `#/train/${V.enc(r.id)}` : r.view === "eval" ? `#/run/${V.enc(r.id)}` : `#/summary/${V.enc(r.id)}`;
      const tick = r.view === "eval"
        ? h("input", { type: "checkbox", checked: picked.has(r.id), onchange: (e) => {
            if (e.target.checked) picked.add(r.id); else picked.delete(r.id);
            compare.disabled = picked.size !== 2;
          } })
        : "";
      return h("tr", { "data-run": r.id },
        h("td", {}, tick),
        h("td", {}, h("a", { href: link }, r.id)),
        h("td", {}, r.kind, r.live ? h("span", { className: "err" }, " (live)") : "", r.problem ? h("div", { className: "err" }, r.problem) : ""),
        h("td", {}, r.model || "–"), h("td", {}, r.env || "–"), h("td", {}, r.date || "–"),
        h("td", { className: "num" }, V.fmt(r.n)), h("td", { className: "num" }, V.fmt(r.reward)),
        h("td", {}, passK(r.pass_at_k)), h("td", { className: `num ${r.errors ? "err" : ""}` }, V.fmt(r.errors)),
        h("td", { className: "num" }, V.fmt(r.tokens)), h("td", { className: "num" }, V.secs(r.wall_s)));
    }));
  };
  const data = await V.api("runs");
  fill(data);
  V.show(
    h("h1", {}, "Runs"), h("p", { className: "muted" }, data.root),
    data.runs.length ? "" : h("p", { className: "muted" }, "No run folders here yet (eval, train, suite, select, compare, profile)."),
    h("table", { id: "runs" }, h("thead", {}, h("tr", {}, ["", "run", "kind", "model", "env", "date", "n", "reward", "pass@k", "errors", "tokens", "wall time"].map((c) => h("th", {}, c)))), table),
    h("div", { className: "pager" }, compare, h("span", { className: "muted" }, "tick two eval runs on the same tasks")),
  );
  V.poll(async () => fill(await V.api("runs")));
});

// ---- an eval run: summary cards, filters, the sample table
const FILTERS = [
  ["reward_min", "reward ≥", "short"], ["reward_max", "reward ≤", "short"],
  ["grader", "grader", "select"], ["grader_min", "grade ≥", "short"], ["grader_max", "grade ≤", "short"],
  ["error", "error", "select"], ["stop", "stop reason", "select"], ["task", "task id contains", ""],
  ["tokens_min", "tokens ≥", "short"], ["tokens_max", "tokens ≤", "short"],
  ["wall_min", "seconds ≥", "short"], ["wall_max", "seconds ≤", "short"], ["text", "text", ""],
];

V.route(/^\/run\/(.+)$/, async ([id], params) => {
  const run = await V.api("run", { run: id });
  const info = run.info;
  V.where(h("a", { href: "#/" }, "runs"), " / ", id);
  const state = Object.fromEntries(params);
  state.limit = state.limit || "50";
  const options = { grader: ["", ...run.facets.graders], error: ["", "none", "any", ...run.facets.errors], stop: ["", ...run.facets.stops] };
  const inputs = {};
  const form = h("form", { className: "filters", id: "filters", onsubmit: (e) => { e.preventDefault(); apply(0); } },
    FILTERS.map(([name, label, kind]) => {
      const input = kind === "select"
        ? h("select", { name }, options[name].map((o) => h("option", { value: o, selected: state[name] === o }, o || "any")))
        : h("input", { name, className: kind, value: state[name] || "", size: kind ? 6 : 16 });
      inputs[name] = input;
      return h("label", {}, label, input);
    }),
    h("button", { className: "primary", type: "submit" }, "Filter"),
    h("button", { type: "button", onclick: () => { location.hash = `#/run/${V.enc(id)}`; } }, "Clear"));
  const graders = run.facets.graders;
  const columns = [["task_id", "task"], ["sample_index", "#"], ["reward", "reward"], ...graders.map((g) => [`grade:${g}`, g]),
    ["error", "error"], ["stop", "stop"], ["completion_tokens", "tokens"], ["wall_s", "seconds"]];
  const head = h("tr", {}, columns.map(([key, label]) => h("th", {
    className: `sortable ${state.sort === key ? "sorted" : ""} ${state.sort === key && state.desc !== "1" ? "asc" : ""}`,
    onclick: () => { state.desc = state.sort === key && state.desc !== "1" ? "1" : ""; state.sort = key === "stop" ? "row" : key; apply(0); },
  }, label)));
  const body = h("tbody");
  const status = h("span", { className: "muted", id: "matched" });
  const prev = h("button", { onclick: () => apply(Math.max(0, Number(state.offset || 0) - Number(state.limit))) }, "← previous");
  const next = h("button", { onclick: () => apply(Number(state.offset || 0) + Number(state.limit)) }, "next →");
  function apply(offset) {
    for (const [name, input] of Object.entries(inputs)) state[name] = input.value;
    state.offset = String(offset);
    const qs = new URLSearchParams(Object.entries(state).filter(([, v]) => v));
    location.hash = `#/run/${V.enc(id)}?${qs}`;
  }
  async function load() {
    const page = await V.api("samples", { run: id, ...state });
    const off = Number(state.offset || 0);
    status.textContent = `${V.fmt(page.matched)} of ${V.fmt(page.total)} samples match · showing ${page.matched ? off + 1 : 0}–${off + page.rows.length}` +
      (page.indexing ? ` · indexing the run: ${Math.round(page.indexed * 100)}% read` : "");
    if (page.indexing && !V.polling) V.poll(load, 1000);
    else if (!page.indexing && !info.live && V.polling) V.poll(null);
    prev.disabled = off === 0;
    next.disabled = off + page.rows.length >= page.matched;
    body.replaceChildren(...page.rows.map((r) => h("tr", { className: "click", onclick: () => { location.hash = `#/sample/${V.enc(id)}/${r.row}`; } },
      h("td", {}, r.task_id), h("td", { className: "num" }, r.sample_index),
      h("td", { className: `num ${r.reward === null ? "err" : r.reward >= (info.threshold || 1) ? "ok" : "bad"}` }, r.reward === null ? "error" : V.fmt(r.reward)),
      graders.map((g) => h("td", { className: "num" }, V.fmt(r.grades[g]))),
      h("td", { className: "err" }, r.error || ""), h("td", {}, r.stop_reason),
      h("td", { className: "num" }, r.completion_tokens), h("td", { className: "num" }, V.secs(r.wall_s)))));
    return page;
  }
  const cards = h("div", { className: "cards" });
  const fillCards = (i) => cards.replaceChildren(
    V.card("model", i.model || "–"), V.card("env", i.env || "–"), V.card("samples", V.fmt(i.n)),
    V.card("mean reward", V.fmt(i.reward)), ...Object.entries(i.pass_at_k || {}).slice(0, 4).map(([k, v]) => V.card(`pass@${k}`, V.fmt(v))),
    V.card("errors", V.fmt(i.errors), i.errors ? "err" : ""), V.card("tokens", V.fmt(i.tokens)), V.card("wall time", V.secs(i.wall_s)));
  fillCards(info);
  V.show(h("h1", {}, id), cards,
    h("p", {}, info.reports.map((n) => h("a", { href: `/api/report?run=${V.enc(id)}&name=${V.enc(n)}`, target: "_blank" }, n, " ")),
      run.bad_lines ? h("span", { className: "err" }, ` ${run.bad_lines} unreadable lines skipped`) : ""),
    form, h("div", { className: "pager" }, prev, next, status),
    h("table", { id: "samples" }, h("thead", {}, head), body));
  await load();
  if (info.live) V.poll(async () => { const r = await V.api("run", { run: id }); fillCards(r.info); await load(); });
});
