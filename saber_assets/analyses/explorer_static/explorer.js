// The explorer's two script pages: the leaderboard (sort, filter, tie groups, provenance) and
// the comparison of two systems. Data: window.SABER (data/site.js). No library, no network.
"use strict";
(function () {
  const S = window.SABER;
  const app = document.getElementById("app");
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? "" : String(k)));
    return e;
  };
  const fmt = (v, d = 4) => (typeof v === "number" ? v.toFixed(d) : v == null ? "" : String(v));
  const select = (label, id, options, value, onchange) => {
    const s = el("select", { id, onchange });
    for (const [v, text] of options) {
      const o = el("option", { value: v }, text);
      if (v === value) o.selected = true;
      s.append(o);
    }
    return el("label", { for: id }, label + " ", s);
  };
  const params = new URLSearchParams(location.search);

  function board() {
    const B = S.board, m = B.metric;
    const settings = [...new Set(B.rows.map((r) => r.setting))];
    const kinds = [...new Set(B.rows.map((r) => r.kind))];
    const joint = B.rows.some((r) => r.ci_low_joint != null);  // the benchmark carried its judgments
    const short = new Set(B.coverage.filter((c) => c.queries < c.quota).map((c) => c.domain));
    const state = { setting: params.get("setting") || settings[0], domain: "", kind: "", sort: m, desc: true, open: null };
    const cols = () => [
      ["tie_group", "tie group"], ["retriever", "retriever"], ["kind", "kind"],
      [state.domain || m, state.domain ? `${state.domain} nDCG` : m], ["ci", "95% CI"],
      ...(joint && !state.domain ? [["ndcg_corrected", "+ judge: corrected"], ["ci_low_joint", "95% CI, + judge"], ["judge_noise_share", "judge share"]] : []),
      ["rank_ci", "rank (95%)"], ...(joint ? [["rank_ci_joint", "rank, + judge"]] : []),
      ["failed", "failed"], ["contaminated_share", "contaminated"],
    ];
    function draw() {
      const key = state.sort;
      let rows = B.rows.filter((r) => r.setting === state.setting && (!state.kind || r.kind === state.kind));
      rows.sort((a, b) => {
        const x = a[key], y = b[key];
        const c = typeof x === "number" && typeof y === "number" ? x - y : String(x ?? "").localeCompare(String(y ?? ""));
        return state.desc ? -c : c;
      });
      const head = el("tr", {}, ...cols().map(([k, label]) => el("th", { scope: "col" },
        el("button", { type: "button", onclick: () => { state.desc = state.sort === k ? !state.desc : true; state.sort = k; draw(); } },
          label + (state.sort === k ? (state.desc ? " ▼" : " ▲") : "")))));
      const body = el("tbody");
      for (const r of rows) {
        const tr = el("tr", { class: "board-row" + (r.tie_group % 2 ? " tie-odd" : ""), tabindex: "0",
          onclick: () => { state.open = state.open === r.row_id ? null : r.row_id; draw(); },
          onkeydown: (e) => { if (e.key === "Enter") { state.open = state.open === r.row_id ? null : r.row_id; draw(); } } });
        const score = state.domain ? r[state.domain] : r[m];
        const n = state.domain ? r[`${state.domain} queries`] : r.queries;
        tr.append(el("td", {}, `T${r.tie_group}`), el("td", {}, r.retriever),
          el("td", {}, r.kind + (r.same_scores_as ? ` (scores every query as ${r.same_scores_as})` : "")),
          el("td", { class: "num" }, `${fmt(score)} (n=${n ?? "?"})`),
          el("td", {}, state.domain ? (r[`${state.domain} ci`] || "") : `[${fmt(r.ci_low, 3)}, ${fmt(r.ci_high, 3)}]`),
          ...(joint && !state.domain ? [el("td", { class: "num" }, fmt(r.ndcg_corrected, 3)),
            el("td", {}, `[${fmt(r.ci_low_joint, 3)}, ${fmt(r.ci_high_joint, 3)}]`),
            el("td", { class: "num" }, r.judge_share_text || "")] : []),
          el("td", {}, r.rank_ci || ""), ...(joint ? [el("td", {}, r.rank_ci_joint || "")] : []),
          el("td", { class: "num" }, r.failed ?? 0),
          el("td", { class: r.contaminated_share > 0 ? "contaminated" : "" },
            r.contaminated_share == null ? "not checked" : r.contaminated_share > 0 ? `⚠ ${fmt(r.contaminated_share, 3)}` : "clean"));
        body.append(tr);
        if (state.open === r.row_id) {
          const facts = ["model", "model_revision", "backend", "row_id", "origin", "code_version", "beats"]
            .filter((k) => r[k] != null).map((k) => `${k}: ${r[k]}`).join(" · ");
          body.append(el("tr", { class: "details" }, el("td", { colspan: String(cols().length) }, "Provenance — " + facts)));
        }
      }
      const domainOpts = [["", "overall"], ...B.domains.map((d) => [d, d + (short.has(d) ? " (below quota)" : "")])];
      app.replaceChildren(
        el("h1", {}, `Leaderboard ${S.name ? "— " + S.name : ""}`),
        el("p", { class: "note" }, "Rows in one tie group (T1, T2, …) are not separated by the paired randomization test " +
          "(Holm-corrected) from the group's first row. n = the queries a cell averages. Click a row for its provenance." +
          (joint ? " “+ judge”: intervals over the queries and the judgments that graded them (the grades redrawn from " +
            "each query's Bradley–Terry fit), centred on the “corrected” score: a noisy judge pulls every score down, and the " +
            "correction undoes that pull, so the interval can sit above the raw score; “judge share”: the share of that interval's " +
            "variance the judge's noise adds, ± two Monte-Carlo standard errors." : "")),
        el("div", { class: "controls" },
          select("Setting", "setting", settings.map((s) => [s, s]), state.setting, (e) => { state.setting = e.target.value; draw(); }),
          select("Domain", "domain", domainOpts, state.domain, (e) => { state.domain = e.target.value; state.sort = state.domain || m; draw(); }),
          select("Kind", "kind", [["", "all"], ...kinds.map((k) => [k, k])], state.kind, (e) => { state.kind = e.target.value; draw(); })),
        el("div", { class: "scroll" }, el("table", { id: "board" }, el("thead", {}, head), body)),
        el("h2", {}, "Domains"),
        el("ul", {}, ...B.coverage.map((c) => el("li", { class: c.queries < c.quota ? "short" : "" },
          `${c.domain}: ${c.queries} of ${c.quota} queries (${c.problems} problems, ${c.annotated} annotated, ${c.viable} viable) — ${c.status}`))),
        el("h2", {}, "Downloads"),
        el("ul", {}, ...Object.entries(S.downloads).map(([label, href]) => el("li", {}, el("a", { href }, label)))));
      const focused = document.getElementById(state.focus || "");
      if (focused) focused.focus();
    }
    draw();
  }

  function compare() {
    const names = [...new Set(S.ndcg.map((r) => r.retriever))].sort();
    const settings = [...new Set(S.ndcg.map((r) => r.setting))];
    const state = { a: params.get("a") || names[0], b: params.get("b") || names[1] || names[0], setting: params.get("setting") || settings[0] };
    const page = Object.fromEntries(S.queries.map((q) => [q.id, q]));
    function draw() {
      const of = (name) => new Map(S.ndcg.filter((r) => r.retriever === name && r.setting === state.setting).map((r) => [r.query_id, r.ndcg]));
      const A = of(state.a), B = of(state.b);
      const rows = [...A.keys()].filter((q) => B.has(q)).map((q) => ({ q, a: A.get(q), b: B.get(q), d: A.get(q) - B.get(q) }));
      rows.sort((x, y) => Math.abs(y.d) - Math.abs(x.d));
      const test = S.tests.find((t) => t.setting === state.setting && ((t.a === state.a && t.b === state.b) || (t.a === state.b && t.b === state.a)));
      const mean = rows.reduce((s, r) => s + r.d, 0) / Math.max(rows.length, 1);
      const byDomain = {};
      for (const r of rows) for (const d of (page[r.q] || {}).domains || []) (byDomain[d] = byDomain[d] || []).push(r.d);
      app.replaceChildren(
        el("h1", {}, "Compare two systems"),
        el("div", { class: "controls" },
          select("System A", "a", names.map((n) => [n, n]), state.a, (e) => { state.a = e.target.value; draw(); }),
          select("System B", "b", names.map((n) => [n, n]), state.b, (e) => { state.b = e.target.value; draw(); }),
          select("Setting", "cmp-setting", settings.map((s) => [s, s]), state.setting, (e) => { state.setting = e.target.value; draw(); })),
        el("p", { id: "verdict" }, `${rows.length} queries; mean ΔnDCG (A − B) ${fmt(mean)}; ` +
          (test ? `paired randomization test p = ${fmt(test.p_randomization_holm, 4)} (Holm)` +
            (test.better ? `, ${test.better} is better` : ", not separable") : "no paired test for this pair")),
        el("h2", {}, "Per domain"),
        el("table", { id: "per-domain" }, el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "domain"), el("th", { scope: "col" }, "queries"), el("th", { scope: "col" }, "mean Δ"))),
          el("tbody", {}, ...Object.entries(byDomain).map(([d, v]) => el("tr", {}, el("td", {}, d), el("td", { class: "num" }, v.length),
            el("td", { class: "num" }, fmt(v.reduce((s, x) => s + x, 0) / v.length)))))),
        el("h2", {}, "Queries where they differ most"),
        el("table", { id: "deltas" }, el("thead", {}, el("tr", {}, ...["query", "A", "B", "Δ"].map((h) => el("th", { scope: "col" }, h)))),
          el("tbody", {}, ...rows.slice(0, 100).map((r) => el("tr", {},
            el("td", {}, page[r.q] ? el("a", { href: page[r.q].page }, r.q) : r.q),
            el("td", { class: "num" }, fmt(r.a)), el("td", { class: "num" }, fmt(r.b)), el("td", { class: "num" }, fmt(r.d)))))));
    }
    draw();
  }

  if (document.body.dataset.page === "board") board(); else compare();
})();
