// verigym view: the sample page, two runs side by side, a training run and its steps, other runs'
// summaries. Texts from runs go in as text nodes only (V.h), never as HTML.
"use strict";
(function () {
  const V = window.V;
  const h = V.h;
  const SVG = "http://www.w3.org/2000/svg";
  const s = (tag, attrs, ...kids) => {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (k.startsWith("on")) el.addEventListener(k.slice(2), v); else el.setAttribute(k, v);
    for (const kid of kids.flat()) if (kid !== null && kid !== undefined) el.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    return el;
  };

  // a token's background: the lower its probability, the redder
  const shade = (lp) => (lp === null || lp === undefined ? "transparent" : `rgba(240, 68, 56, ${Math.min(0.85, 1 - Math.exp(lp)).toFixed(3)})`);
  V.tokens = (tokens, key, extra) => h("div", { className: "text tokens" }, tokens.map((t, i) => {
    const lp = t[key || "logprob"];
    const label = t.text === null || t.text === undefined ? `⟨${t.id}⟩` : t.text;
    const tip = [`token ${t.id}`, `logprob ${lp === null || lp === undefined ? "–" : lp.toFixed(4)}`, extra ? extra(t) : ""].filter(Boolean).join(" · ");
    return h("span", { className: "tok", title: tip, style: `background:${shade(lp)}`, "data-i": i }, label);
  }));

  const json = (x) => h("pre", { className: "json" }, JSON.stringify(x, null, 2));
  const callText = (c) => {
    let args = c.arguments;
    try { args = JSON.stringify(JSON.parse(args)); } catch (e) { /* shown as the model wrote it */ }
    return `→ ${c.name}(${args})  [${c.id}]`;
  };

  function message(m, withTokens) {
    const head = [m.source === "prompt" ? "prompt" : m.source, m.role, m.name ? `name ${m.name}` : "", m.tool_call_id ? `answers ${m.tool_call_id}` : "",
      m.call !== undefined ? `call ${m.call}` : "", m.finish_reason ? `finish ${m.finish_reason}` : "",
      m.usage ? `${m.usage.prompt_tokens} prompt + ${m.usage.completion_tokens} completion tokens` : ""].filter(Boolean).join(" · ");
    const body = withTokens && m.tokens && m.tokens.length ? V.tokens(m.tokens) : h("div", { className: "text" }, m.content);
    return h("div", { className: `msg ${m.role} ${m.source === "branch" ? "branch" : ""}`, id: m.call !== undefined ? `call-${m.call}` : null },
      h("div", { className: "head" }, head), body, (m.tool_calls || []).map((c) => h("div", { className: "call" }, callText(c))));
  }

  V.route(/^\/sample\/(.+)\/(\d+)$/, async ([id, row]) => {
    const x = await V.api("sample", { run: id, row });
    V.where(h("a", { href: "#/" }, "runs"), " / ", h("a", { href: `#/run/${V.enc(id)}` }, id), " / ", `${x.task_id} #${x.sample_index}`);
    const hasTokens = x.messages.some((m) => m.tokens && m.tokens.length);
    let withTokens = hasTokens;
    const convo = h("div", { id: "conversation" });
    const draw = () => convo.replaceChildren(...x.messages.map((m) => message(m, withTokens)));
    draw();
    const verdict = x.error ? ["error", "err"] : x.reward === null ? ["unscored", "err"] : [V.fmt(x.reward), x.reward >= 1 ? "ok" : "bad"];
    V.show(
      h("h1", {}, `${x.task_id} · sample ${x.sample_index}`),
      h("div", { className: "cards" }, V.card("reward", verdict[0], verdict[1]), V.card("stop reason", x.stop_reason),
        V.card("prompt tokens", V.fmt(x.usage.prompt_tokens)), V.card("completion tokens", V.fmt(x.usage.completion_tokens)),
        V.card("wall time", V.secs(x.wall_s)), V.card("model", x.model), x.penalty ? V.card("penalty", V.fmt(x.penalty), "bad") : ""),
      x.error ? h("div", { className: "err-box" }, `${x.error.kind}: ${x.error.message}`) : "",
      x.score_error ? h("div", { className: "err-box" }, `score: ${x.score_error}`) : "",
      h("h2", {}, "Graders"),
      h("table", { id: "grades" }, h("thead", {}, h("tr", {}, h("th", {}, "grader"), h("th", { className: "num" }, "score"), h("th", {}, "detail"))),
        h("tbody", {}, x.grades.map((g) => h("tr", {}, h("td", {}, g.name),
          h("td", { className: `num ${g.error ? "err" : g.score >= 1 ? "ok" : "bad"}` }, g.error ? "error" : V.fmt(g.score)),
          h("td", { className: "text" }, g.error ? g.error : g.detail))))),
      h("h2", {}, "Tools offered"),
      x.tool_schemas ? h("details", {}, h("summary", {}, x.tool_schemas.map((t) => (t.function || t).name).join(", ")), json(x.tool_schemas))
        : h("p", { className: "muted" }, x.tool_schemas_note || "none"),
      x.calls ? [h("h2", {}, "Agent-program calls"),
        h("table", { id: "calls" }, h("thead", {}, h("tr", {}, ["call", "kind", "parent", "dialect", "seconds"].map((c) => h("th", {}, c)))),
          h("tbody", {}, x.calls.map((c) => h("tr", {}, h("td", {}, c.call), h("td", {}, c.kind),
            h("td", {}, c.parent === null ? "–" : h("a", { href: `#call-${c.parent}`, onclick: (e) => { e.preventDefault(); const el = document.getElementById(`call-${c.parent}`); if (el) el.scrollIntoView(); } }, `call ${c.parent}`)),
            h("td", {}, c.dialect || ""), h("td", {}, V.fmt(c.wall_s))))))] : "",
      h("h2", {}, "Conversation, as the model saw it"),
      hasTokens ? h("label", { className: "muted" }, h("input", { type: "checkbox", checked: true, onchange: (e) => { withTokens = e.target.checked; draw(); } }),
        ` per-token logprobs shaded (redder: less likely${x.tokens_decoded ? "" : "; no tokenizer found, tokens shown by id"})`) : "",
      convo,
      Object.keys(x.state || {}).length ? [h("h2", {}, "State"), json(x.state)] : "",
      h("h2", {}, "Sampling"), json(x.sampling));
  });

  // ---- two runs side by side
  V.route(/^\/compare\/([^/]+)\/([^/]+)$/, async ([a, b], params) => {
    const show = params.get("show") || "all";
    const c = await V.api("compare", { a, b, show });
    V.where(h("a", { href: "#/" }, "runs"), " / compare");
    const sign = (d) => (d > 0 ? "delta-pos" : d < 0 ? "delta-neg" : "");
    const link = (run, task) => h("a", { href: "#", onclick: async (e) => {
      e.preventDefault();
      const page = await V.api("samples", { run, task, limit: 1, sort: "task_id" });
      const hit = page.rows.find((r) => r.task_id === task) || page.rows[0];
      if (hit) location.hash = `#/sample/${V.enc(run)}/${hit.row}`;
    } }, V.fmt(run === a ? c.tasks.find((t) => t.task_id === task).a : c.tasks.find((t) => t.task_id === task).b));
    V.show(
      h("h1", {}, "A: ", a, "  vs  B: ", b),
      h("div", { className: "cards" }, V.card("paired tasks", V.fmt(c.paired_tasks)), V.card("mean A", V.fmt(c.mean_a)), V.card("mean B", V.fmt(c.mean_b)),
        V.card("B − A", V.fmt(c.delta), sign(c.delta)), V.card("95% CI (paired bootstrap)", c.ci95 ? `[${V.fmt(c.ci95[0])}, ${V.fmt(c.ci95[1])}]` : "–"),
        V.card("P(B not better)", V.fmt(c.p_b_not_better)), V.card("pass → fail", V.fmt(c.pass_to_fail), c.pass_to_fail ? "bad" : ""),
        V.card("fail → pass", V.fmt(c.fail_to_pass), c.fail_to_pass ? "ok" : ""), V.card("errors A / B", `${c.errors_a} / ${c.errors_b}`)),
      h("p", { className: "muted" }, `A task passes when at least half its scored samples reach reward ${c.threshold}; only in A: ${c.only_a}, only in B: ${c.only_b}.`),
      h("div", { className: "tabs", id: "show" }, [["all", "all tasks"], ["changed", "changed"], ["pass_to_fail", "pass → fail"], ["fail_to_pass", "fail → pass"]].map(([k, label]) =>
        h("button", { className: k === show ? "primary" : "", onclick: () => { location.hash = `#/compare/${V.enc(a)}/${V.enc(b)}?show=${k}`; } }, label))),
      h("table", { id: "compare" }, h("thead", {}, h("tr", {}, h("th", {}, "task"), h("th", { className: "num" }, "A"), h("th", { className: "num" }, "B"), h("th", { className: "num" }, "B − A"), h("th", {}, "verdict"))),
        h("tbody", {}, c.tasks.map((t) => h("tr", {}, h("td", {}, t.task_id), h("td", { className: "num" }, link(a, t.task_id)), h("td", { className: "num" }, link(b, t.task_id)),
          h("td", { className: `num ${sign(t.delta)}` }, V.fmt(t.delta)), h("td", { className: t.change === "pass_to_fail" ? "bad" : t.change ? "ok" : "" }, t.change.replace("_to_", " → ")))))));
  });

  // ---- a training run: curves (the SFT point on the held-out curve); a click on a step opens its groups
  function chart(title, rows, key, opts) {
    const pts = rows.filter((r) => typeof r[key] === "number").map((r) => [r.step, r[key]]);
    const extra = opts.sft !== undefined && opts.sft !== null ? [[opts.sftStep, opts.sft]] : [];
    const all = [...pts, ...extra];
    if (!all.length) return null;
    const W = 320, H = 160, L = 38, B = 20;
    const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
    const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1), y0 = Math.min(...ys, 0), y1 = Math.max(...ys, y0 + 1e-9);
    const X = (v) => L + ((v - x0) / (x1 - x0)) * (W - L - 6), Y = (v) => H - B - ((v - y0) / (y1 - y0)) * (H - B - 8);
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title },
      s("line", { x1: L, y1: H - B, x2: W - 6, y2: H - B, stroke: "#98a2b3" }), s("line", { x1: L, y1: 8, x2: L, y2: H - B, stroke: "#98a2b3" }),
      s("text", { x: L - 4, y: 12, "text-anchor": "end", "font-size": 10 }, V.fmt(y1)), s("text", { x: L - 4, y: H - B, "text-anchor": "end", "font-size": 10 }, V.fmt(y0)),
      s("text", { x: L, y: H - 6, "font-size": 10 }, `step ${x0}`), s("text", { x: W - 6, y: H - 6, "text-anchor": "end", "font-size": 10 }, `${x1}`),
      s("polyline", { points: pts.map(([x, y]) => `${X(x)},${Y(y)}`).join(" "), fill: "none", stroke: "#2f5bd3", "stroke-width": 1.5 }),
      pts.map(([x, y]) => s("circle", { cx: X(x), cy: Y(y), r: opts.steps.has(x) ? 3.5 : 2, fill: opts.steps.has(x) ? "#2f5bd3" : "#98a2b3",
        class: opts.steps.has(x) ? "step" : "", "data-step": x, onclick: () => opts.steps.has(x) && opts.open(x) }, s("title", {}, `step ${x}: ${V.fmt(y)}`))),
      extra.map(([x, y]) => s("g", {}, s("rect", { x: X(x) - 4, y: Y(y) - 4, width: 8, height: 8, fill: "#f79009" }, s("title", {}, `after SFT: ${V.fmt(y)}`)),
        s("text", { x: X(x) + 6, y: Y(y) - 5, "font-size": 10, fill: "#b54708" }, "SFT"))));
    return h("div", { className: "chart", "data-key": key }, h("div", { className: "title" }, title), svg);
  }

  const LABELS = { reward: "reward (train batch)", pass_rate: "pass rate (train batch)", "eval/pass_at_1": "held-out pass@1", entropy: "entropy", kl: "KL to reference",
    length_mean: "response length (tokens)", truncation_rate: "truncation rate", frac_groups_dropped: "groups dropped (flat reward)", grad_norm: "grad norm",
    logprob_diff: "sampler vs trainer |Δ logprob|", clip_frac_high: "clip fraction (high)", step_time_s: "step time (s)" };

  V.route(/^\/train\/([^/]+)$/, async ([id]) => {
    V.where(h("a", { href: "#/" }, "runs"), " / ", id);
    const draw = async () => {
      const t = await V.api("train", { run: id });
      const steps = new Set(t.steps_with_rollouts);
      const open = (n) => { location.hash = `#/train/${V.enc(id)}/step/${n}`; };
      const keys = [...Object.keys(LABELS), ...new Set(t.rows.flatMap((r) => Object.keys(r).filter((k) => k.startsWith("grader/"))))];
      const charts = keys.map((k) => chart(LABELS[k] || k, t.rows, k, { steps, open, sft: k === "eval/pass_at_1" ? t.sft_point : null, sftStep: t.rows.length ? t.rows[0].step : 0 })).filter(Boolean);
      const sum = t.summary || {};
      V.show(h("h1", {}, id),
        h("div", { className: "cards" }, V.card("RL steps logged", V.fmt(t.rows.length)), V.card("held-out pass@1 initial", V.fmt(t.initial_point)),
          V.card("after SFT", V.fmt(t.sft_point)), V.card("after RL", V.fmt(sum.pass_at_1_after_rl ?? sum["eval/pass_at_1"])), V.card("wall time", V.secs(sum.wall_s))),
        h("p", { className: "legend" }, "Larger blue points are steps whose rollouts were kept (logging.rollout_groups); click one to open its groups. The orange square is the held-out pass@1 after SFT, before RL."),
        h("div", { className: "charts" }, charts),
        h("h2", {}, "Steps with kept rollouts"),
        h("p", { id: "steps" }, t.steps_with_rollouts.length ? t.steps_with_rollouts.map((n) => [h("a", { href: `#/train/${V.enc(id)}/step/${n}` }, n), " "]) : h("span", { className: "muted" }, "none (rollouts_sample.jsonl is written by this version's trainer)")));
      return sum;
    };
    const sum = await draw();
    if (!sum || !Object.keys(sum).length) V.poll(draw);
  });

  V.route(/^\/train\/([^/]+)\/step\/(\d+)$/, async ([id, step]) => {
    const x = await V.api("step", { run: id, step });
    V.where(h("a", { href: "#/" }, "runs"), " / ", h("a", { href: `#/train/${V.enc(id)}` }, id), " / ", `step ${step}`);
    const m = x.metrics || {};
    const tip = (t) => `sampler ${t.sampler ?? "–"} · trainer ${t.trainer ?? "–"}${t.sampler !== null && t.trainer !== null ? ` · gap ${Math.abs(t.sampler - t.trainer).toExponential(2)}` : ""}`;
    V.show(h("h1", {}, `${id} · step ${step}`),
      h("div", { className: "cards" }, V.card("policy version", V.fmt(x.policy_version)), V.card("batch reward", V.fmt(m.reward)), V.card("pass rate", V.fmt(m.pass_rate)),
        V.card("|Δ logprob| (batch)", V.fmt(m.logprob_diff)), x.nearest_eval ? V.card(`held-out pass@1 (step ${x.nearest_eval.step})`, V.fmt(x.nearest_eval["eval/pass_at_1"])) : ""),
      h("p", { className: "legend" }, "Tokens are shaded by the sampler's logprob; hover a token for the trainer's logprob of it under the same weights and their gap."),
      x.groups.map((g, gi) => h("div", { className: "group", "data-group": gi }, h("h2", {}, `${g.env} · ${g.task_id}`),
        g.samples[0] && g.samples[0].messages.length ? h("div", { className: "text muted" }, g.samples[0].messages.filter((mm) => mm.role !== "assistant").map((mm) => mm.content).join("\n")) : "",
        h("table", {}, h("thead", {}, h("tr", {}, ["#", "reward", "advantage", "grades", "stop", "gap mean", "gap max", "completion"].map((c) => h("th", {}, c)))),
          h("tbody", {}, g.samples.map((smp, i) => h("tr", {}, h("td", {}, i), h("td", { className: `num ${smp.reward >= 1 ? "ok" : "bad"}` }, V.fmt(smp.reward)),
            h("td", { className: "num" }, V.fmt(smp.advantage)), h("td", {}, Object.entries(smp.grades).map(([k, v]) => `${k} ${V.fmt(v)}`).join(", ")),
            h("td", {}, smp.stop_reason), h("td", { className: "num" }, smp.gap_mean === null ? "–" : smp.gap_mean.toExponential(2)),
            h("td", { className: "num" }, smp.gap_max === null ? "–" : smp.gap_max.toExponential(2)),
            h("td", {}, smp.tokens.length ? V.tokens(smp.tokens, "sampler", tip) : h("div", { className: "text" }, (smp.messages.at(-1) || {}).content || "")))))))),
      x.heldout ? [h("h2", {}, `Held-out samples of the eval after step ${x.heldout.step}`),
        h("table", { id: "heldout" }, h("thead", {}, h("tr", {}, ["env", "task", "reward", "grades", "stop", "prompt", "answer"].map((c) => h("th", {}, c)))),
          h("tbody", {}, x.heldout.samples.map((smp) => h("tr", {}, h("td", {}, smp.env), h("td", {}, `${smp.task_id} #${smp.sample_index}`),
            h("td", { className: `num ${smp.error ? "err" : smp.reward >= 1 ? "ok" : "bad"}` }, smp.error ? "error" : V.fmt(smp.reward)),
            h("td", {}, Object.entries(smp.grades).map(([k, v]) => `${k} ${V.fmt(v)}`).join(", ")), h("td", {}, smp.stop_reason),
            h("td", { className: "text" }, smp.prompt), h("td", { className: "text" }, smp.error || smp.answer)))))] : "");
  });

  // ---- any other run: its summary, labelled
  V.route(/^\/summary\/(.+)$/, async ([id]) => {
    const r = await V.api("run", { run: id });
    V.where(h("a", { href: "#/" }, "runs"), " / ", id);
    V.show(h("h1", {}, `${id} (${r.info.kind})`),
      h("p", {}, r.info.reports.map((n) => h("a", { href: `/api/report?run=${V.enc(id)}&name=${V.enc(n)}`, target: "_blank" }, n, " "))),
      h("table", {}, h("tbody", {}, r.summary.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", { className: "text" }, v))))));
  });
})();
