// The explorer's script pages: the leaderboard (sort, filter, tie groups, provenance), the query
// browser, the comparison of two systems (a Chart.js scatter) and what changed since the
// previous build. Data: window.SABER (data/site.js). No network.
"use strict";
(function () {
  const S = window.SABER;
  const app = document.getElementById("app");
  const { el, rendered, fmt, select, head } = window.SaberUI;
  const params = new URLSearchParams(location.search);
  const query = (p) => "queries.html?" + new URLSearchParams(Object.entries(p).filter(([, v]) => v)).toString();
  const pageOf = Object.fromEntries(S.queries.map((q) => [q.id, q.page]));
  const qlink = (id) => (pageOf[id] ? el("a", { href: pageOf[id] }, id) : id);
  const settingsOf = () => Object.keys(S.ndcg);
  const systemsOf = (setting) => Object.keys(S.ndcg[setting] || {}).sort();

  function board() {
    const B = S.board, m = B.metric, C = B.columns, I = C.interval;  // C: the board's column names
    const settings = [...new Set(B.rows.map((r) => r.setting))];
    const kinds = [...new Set(B.rows.map((r) => r.kind))];
    const joint = B.rows.some((r) => r[I.low_joint] != null);  // the benchmark carried its judgments
    const short = new Set(B.coverage.filter((c) => c.queries < c.quota).map((c) => c.domain));
    const state = { setting: params.get("setting") || settings[0], domain: "", kind: "", sort: m, desc: true, open: null };
    const cols = () => [
      ["tie_group", "tie group"], ["retriever", "retriever"], ["kind", "kind"],
      [state.domain ? C.domain_mean[state.domain] : m, state.domain ? `${state.domain} nDCG` : m], ["ci", "95% CI"],
      ...(joint && !state.domain ? [["ndcg_corrected", "+ judge: corrected"], [I.low_joint, "95% CI, + judge"], ["judge_noise_share", "judge share"]] : []),
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
      const headRow = el("tr", {}, ...cols().map(([k, label]) => el("th", { scope: "col" },
        el("button", { type: "button", onclick: () => { state.desc = state.sort === k ? !state.desc : true; state.sort = k; draw(); } },
          label + (state.sort === k ? (state.desc ? " ▼" : " ▲") : "")))));
      const body = el("tbody");
      for (const r of rows) {
        const tr = el("tr", { class: "board-row" + (r.tie_group % 2 ? " tie-odd" : ""), tabindex: "0",
          onclick: (e) => { if (e.target.closest("a")) return; state.open = state.open === r.row_id ? null : r.row_id; draw(); },
          onkeydown: (e) => { if (e.key === "Enter" && !e.target.closest("a")) { state.open = state.open === r.row_id ? null : r.row_id; draw(); } } });
        const score = state.domain ? r[C.domain_mean[state.domain]] : r[m];
        const n = state.domain ? r[C.domain_queries[state.domain]] : r.queries;
        // the cell opens the queries it averages, sorted by this system's score on each
        const cell = el("a", { class: "score-link", title: "the queries this cell averages, by this system's score",
          href: query({ setting: state.setting, domain: state.domain, system: r.retriever }) }, `${fmt(score)} (n=${n ?? "?"})`);
        // a decision at its Holm threshold is shown as open, not as a tie or a win
        tr.append(el("td", {}, `T${r.tie_group}` + (r.undecided ? ` · undecided with ${r.undecided}` : "")), el("td", {}, r.retriever),
          el("td", {}, r.kind + (r.same_scores_as ? ` (scores every query as ${r.same_scores_as})` : "")),
          el("td", { class: "num" }, cell),
          el("td", {}, state.domain ? (r[C.domain_ci[state.domain]] || "") : `[${fmt(r[I.low], 3)}, ${fmt(r[I.high], 3)}]`),
          ...(joint && !state.domain ? [el("td", { class: "num" }, fmt(r.ndcg_corrected, 3)),
            el("td", {}, `[${fmt(r[I.low_joint], 3)}, ${fmt(r[I.high_joint], 3)}]`),
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
          "(Holm-corrected) from the group's first row. n = the queries a cell averages; a score opens them in the query browser. " +
          "Click a row for its provenance." +
          (joint ? " “+ judge”: intervals over the queries and the judgments that graded them (the grades redrawn from " +
            "each query's Bradley–Terry fit), centred on the “corrected” score: a noisy judge pulls every score down, and the " +
            "correction undoes that pull, so the interval can sit above the raw score; “judge share”: the share of that interval's " +
            "variance the judge's noise adds, ± two Monte-Carlo standard errors." : "")),
        el("div", { class: "controls" },
          select("Setting", "setting", settings.map((s) => [s, s]), state.setting, (e) => { state.setting = e.target.value; draw(); }),
          select("Domain", "domain", domainOpts, state.domain, (e) => { state.domain = e.target.value; state.sort = state.domain ? C.domain_mean[state.domain] : m; draw(); }),
          select("Kind", "kind", [["", "all"], ...kinds.map((k) => [k, k])], state.kind, (e) => { state.kind = e.target.value; draw(); })),
        el("div", { class: "scroll" }, el("table", { id: "board" }, el("thead", {}, headRow), body)),
        el("h2", {}, "Domains"),
        el("ul", {}, ...B.coverage.map((c) => el("li", { class: c.queries < c.quota ? "short" : "" },
          el("a", { href: query({ domain: c.domain }) }, c.domain),
          `: ${c.queries} of ${c.quota} queries (${c.problems} problems, ${c.annotated} annotated, ${c.viable} viable) — ${c.status}`))),
        el("h2", {}, "Downloads"),
        el("ul", {}, ...Object.entries(S.downloads).map(([label, href]) => el("li", {}, el("a", { href }, label)))));
    }
    draw();
  }

  // Per query and setting: the systems' mean and standard deviation of nDCG@10.
  function spread(setting) {
    const cols = Object.values(S.ndcg[setting] || {});
    return S.queries.map((_, k) => {
      const v = cols.map((c) => c[k]).filter((x) => typeof x === "number");
      if (!v.length) return [null, null];
      const mean = v.reduce((s, x) => s + x, 0) / v.length;
      const sd = v.length > 1 ? Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / (v.length - 1)) : 0;
      return [mean, sd];
    });
  }

  function queries() {
    const settings = settingsOf();
    const state = {
      q: params.get("q") || "", domain: params.get("domain") || "", setting: params.get("setting") || settings[0] || "",
      system: params.get("system") || "", sort: params.get("sort") || (params.get("system") ? "system" : "mean"),
      desc: params.get("desc") !== "0", limit: 500,
    };
    if (!settings.includes(state.setting)) state.setting = settings[0] || "";
    const domains = S.board.domains;
    let stats = spread(state.setting);
    const value = (k, key) => {
      const q = S.queries[k];
      switch (key) {
        case "id": return q.id;
        case "stratum": return q.stratum;
        case "mean": return stats[k][0];
        case "spread": return stats[k][1];
        case "system": return ((S.ndcg[state.setting] || {})[state.system] || [])[k];
        case "width": return q.width;
        case "bias": return q.decided ? q.first_won / q.decided : null;
        case "judgments": return q.judgments;
      }
      return null;
    };
    const controls = el("div", { class: "controls" });
    const summary = el("p", { id: "browser-summary", class: "note" });
    const table = el("table", { id: "queries" });
    const search = el("input", { id: "search", type: "search", size: "40", value: state.q,
      placeholder: "an id or a phrase of the statement", "aria-label": "search queries" });
    search.addEventListener("input", () => { state.q = search.value; draw(); });
    controls.append(el("label", { for: "search" }, "Search "), search,
      select("Domain", "browser-domain", [["", "all"], ...domains.map((d) => [d, d])], state.domain, (e) => { state.domain = e.target.value; draw(); }),
      select("Setting", "browser-setting", settings.map((s) => [s, s]), state.setting, (e) => { state.setting = e.target.value; stats = spread(state.setting); fillSystems(); draw(); }),
      el("span", { id: "system-choice" }));
    function fillSystems() {
      const systems = systemsOf(state.setting);
      if (state.system && !systems.includes(state.system)) state.system = "";
      document.getElementById("system-choice")?.replaceChildren(
        select("System", "browser-system", [["", "none"], ...systems.map((s) => [s, s])], state.system,
          (e) => { state.system = e.target.value; state.sort = state.system ? "system" : "mean"; state.desc = true; draw(); }));
    }
    const cols = () => [["id", "query"], ["stratum", "domains"], [null, "statement"], ["mean", "mean nDCG@10"],
      ["spread", "spread (sd)"], ...(state.system ? [["system", `${state.system} nDCG@10`]] : []),
      ["width", "judge's uncertainty"], ["bias", "first shown won"], ["judgments", "judgments"]];
    function draw() {
      const words = state.q.trim().toLowerCase().split(/\s+/).join(" ");
      let rows = S.queries.map((_, k) => k).filter((k) => {
        const q = S.queries[k];
        if (state.domain && !q.domains.includes(state.domain)) return false;
        return !words || q.id.toLowerCase().includes(words) || q.text.includes(words);
      });
      const key = state.sort;
      rows.sort((a, b) => {
        const x = value(a, key), y = value(b, key);
        if (x == null || y == null) return (x == null) - (y == null);  // blanks last
        const c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
        return state.desc ? -c : c;
      });
      const params2 = { q: state.q, domain: state.domain, setting: state.setting, system: state.system, sort: state.sort, desc: state.desc ? "" : "0" };
      history.replaceState(null, "", query(params2));
      const shown = rows.slice(0, state.limit);
      summary.textContent = `${rows.length} of ${S.queries.length} queries` + (rows.length > shown.length ? ` (the first ${shown.length} shown: narrow the search)` : "") +
        `. nDCG@10 in setting ${state.setting}; judge's uncertainty: ${S.width_rule}; first shown won: the share of the decided judgments the candidate shown first won (0.5: no lean).`;
      const headRow = el("tr", {}, ...cols().map(([k, label]) => el("th", { scope: "col" }, k == null ? label :
        el("button", { type: "button", onclick: () => { state.desc = state.sort === k ? !state.desc : k !== "id" && k !== "stratum"; state.sort = k; draw(); } },
          label + (state.sort === k ? (state.desc ? " ▼" : " ▲") : "")))));
      const body = el("tbody");
      for (const k of shown) {
        const q = S.queries[k];
        const bias = value(k, "bias");
        // the whole row opens the query (its id is the link a keyboard reaches)
        body.append(el("tr", { class: "query-row", "data-id": q.id, onclick: (e) => { if (!e.target.closest("a")) location.href = q.page; } },
          el("td", {}, el("a", { href: q.page }, q.id)), el("td", {}, q.stratum),
          el("td", { class: "snippet" }, rendered(q.snippet)),
          el("td", { class: "num" }, fmt(stats[k][0], 3)), el("td", { class: "num" }, fmt(stats[k][1], 3)),
          ...(state.system ? [el("td", { class: "num" }, fmt(value(k, "system"), 3))] : []),
          el("td", { class: "num" }, q.width == null ? "n/a" : fmt(q.width, 2)),
          el("td", { class: "num", title: q.rechecked ? `${q.flipped} of ${q.rechecked} pairs asked again in the other order changed winner` : "" },
            bias == null ? "" : `${fmt(bias, 2)} (${q.decided})`),
          el("td", { class: "num" }, q.judgments)));
      }
      table.replaceChildren(el("thead", {}, headRow), body);
    }
    app.replaceChildren(el("h1", {}, "Queries"), controls, summary, el("div", { class: "scroll" }, table));
    fillSystems();
    draw();
  }

  const PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"];

  function compare() {
    const settings = settingsOf();
    const state = { setting: params.get("setting") || settings[0] };
    if (!settings.includes(state.setting)) state.setting = settings[0];
    const names0 = systemsOf(state.setting);
    state.a = params.get("a") || names0[0];
    state.b = params.get("b") || names0[1] || names0[0];
    let chart = null;
    function draw() {
      const names = systemsOf(state.setting);
      const col = (name) => (S.ndcg[state.setting] || {})[name] || [];
      const A = col(state.a), B = col(state.b);
      const rows = S.queries.map((q, k) => ({ q, a: A[k], b: B[k] }))
        .filter((r) => typeof r.a === "number" && typeof r.b === "number").map((r) => ({ ...r, d: r.a - r.b }));
      const test = S.tests.find((t) => t.setting === state.setting && ((t.a === state.a && t.b === state.b) || (t.a === state.b && t.b === state.a)));
      const mean = rows.reduce((s, r) => s + r.d, 0) / Math.max(rows.length, 1);
      const byDomain = {};
      for (const r of rows) for (const d of r.q.domains) (byDomain[d] = byDomain[d] || []).push(r.d);
      const canvas = el("canvas", { id: "scatter", role: "img",
        "aria-label": `nDCG@10 of ${state.a} against ${state.b}, one point per query` });
      const sorted = [...rows].sort((x, y) => Math.abs(y.d) - Math.abs(x.d));
      app.replaceChildren(
        el("h1", {}, "Compare two systems"),
        el("div", { class: "controls" },
          select("System A", "a", names.map((n) => [n, n]), state.a, (e) => { state.a = e.target.value; draw(); }),
          select("System B", "b", names.map((n) => [n, n]), state.b, (e) => { state.b = e.target.value; draw(); }),
          select("Setting", "cmp-setting", settings.map((s) => [s, s]), state.setting, (e) => { state.setting = e.target.value; draw(); })),
        el("p", { id: "verdict" }, `${rows.length} queries; mean ΔnDCG (A − B) ${fmt(mean)}; ` +
          (test ? `paired randomization test p = ${fmt(test.p_randomization_holm, 4)} (Holm)` +
            (test.better ? `, ${test.better} is better` : ", not separable") : "no paired test for this pair")),
        el("div", { class: "chart-box" }, canvas),
        el("p", { class: "note" }, `Each point is a query: ${state.a}'s nDCG@10 across, ${state.b}'s up; above the diagonal B does better; a query in two domains takes its first one's colour. ` +
          "Click a point to open the query."),
        el("h2", {}, "Per domain"),
        el("table", { id: "per-domain" }, head(["domain", "queries", "mean Δ"]),
          el("tbody", {}, ...Object.entries(byDomain).map(([d, v]) => el("tr", {}, el("td", {}, d), el("td", { class: "num" }, v.length),
            el("td", { class: "num" }, fmt(v.reduce((s, x) => s + x, 0) / v.length)))))),
        el("h2", {}, "Queries where they differ most"),
        el("table", { id: "deltas" }, head(["query", "A", "B", "Δ"]),
          el("tbody", {}, ...sorted.slice(0, 100).map((r) => el("tr", {},
            el("td", {}, el("a", { href: r.q.page }, r.q.id)),
            el("td", { class: "num" }, fmt(r.a)), el("td", { class: "num" }, fmt(r.b)), el("td", { class: "num" }, fmt(r.d)))))));
      if (chart) chart.destroy();
      if (!window.Chart) { canvas.replaceWith(el("p", { class: "short" }, "The chart library did not load (assets/vendor/chart.umd.min.js).")); return; }
      const domains = S.board.domains.length ? S.board.domains : [...new Set(rows.map((r) => r.q.domains[0]))];
      const sets = domains.map((d, i) => ({
        label: d, backgroundColor: PALETTE[i % PALETTE.length], pointRadius: 4, pointHoverRadius: 6,
        data: rows.filter((r) => r.q.domains[0] === d).map((r) => ({ x: r.a, y: r.b, id: r.q.id, page: r.q.page })),
      })).filter((s) => s.data.length);
      sets.push({ type: "line", label: "A = B", data: [{ x: 0, y: 0 }, { x: 1, y: 1 }], borderColor: "#999",
        borderDash: [4, 4], pointRadius: 0, borderWidth: 1 });
      chart = new window.Chart(canvas, {
        type: "scatter", data: { datasets: sets },
        options: {
          animation: false, responsive: true, maintainAspectRatio: true, aspectRatio: 1.3,
          scales: { x: { min: 0, max: 1, title: { display: true, text: `${state.a} nDCG@10` } },
                    y: { min: 0, max: 1, title: { display: true, text: `${state.b} nDCG@10` } } },
          plugins: { tooltip: { callbacks: { label: (c) => c.raw.id ? `${c.raw.id}: ${fmt(c.raw.x, 3)} vs ${fmt(c.raw.y, 3)}` : "A = B" } } },
          onHover: (e, found) => { e.native.target.style.cursor = found.some((f) => sets[f.datasetIndex].data[f.index].page) ? "pointer" : "default"; },
          onClick: (e, found) => {
            const hit = found.map((f) => sets[f.datasetIndex].data[f.index]).find((p) => p.page);
            if (hit) location.href = hit.page;
          },
        },
      });
    }
    draw();
  }

  function diff() {
    const D = S.diff;
    const section = (title, ...kids) => el("section", {}, el("h2", {}, title), ...kids);
    const list = (items, link) => el("ul", {}, ...items.slice(0, 200).map((q) => el("li", {}, link ? qlink(q) : q)));
    const facts = Object.entries(D.facts);
    app.replaceChildren(
      el("h1", {}, "What changed since the previous build"),
      el("p", { class: "note" }, `Previous: ${D.old}. Now: ${D.new}.`),
      el("p", { id: "diff-summary" }, D.nothing_moved ? "Nothing moved: the same queries, grades and board." :
        `${D.queries_added.length} queries added, ${D.queries_removed.length} removed; ${D.moved_count} of ${D.compared} grades moved; ` +
        D.settings.map((s) => `${s.setting}: Kendall τ ${s.tau == null ? "n/a" : fmt(s.tau, 3)}, ${s.flipped.length} pairs flipped`).join("; ") + "."),
      section("Why: the build's facts that changed", facts.length ? el("table", { id: "facts" },
        el("tbody", {}, ...facts.map(([k, [a, b]]) => el("tr", {}, el("th", { scope: "row" }, k),
          el("td", {}, JSON.stringify(a)), el("td", {}, "→"), el("td", {}, JSON.stringify(b))))))
        : el("p", {}, "None of seed, corpus, judge, thresholds, quotas, tournament or ratings changed.")),
      section("Queries", el("p", {}, `${D.queries_added.length} added, ${D.queries_removed.length} removed.`),
        ...(D.queries_added.length ? [el("h3", {}, "Added"), list(D.queries_added, true)] : []),
        ...(D.queries_removed.length ? [el("h3", {}, "Removed"), list(D.queries_removed, false)] : [])),
      section("Grades", el("p", {}, `${D.moved_count} of ${D.compared} (query, candidate) grades in both builds moved; ` +
          `${D.candidates_added} candidates drawn only now, ${D.candidates_removed} only before.`),
        el("table", { id: "by-group" }, head(["group", "compared", "moved", "mean |Δ|", "largest |Δ|"]),
          el("tbody", {}, ...D.by_group.map((g) => el("tr", {}, el("td", {}, g.group), el("td", { class: "num" }, g.compared),
            el("td", { class: "num" }, g.moved), el("td", { class: "num" }, fmt(g.mean_abs_delta, 3)), el("td", { class: "num" }, fmt(g.max_abs_delta, 3)))))),
        el("h3", {}, "Largest moves"),
        el("table", { id: "moved" }, head(["query", "candidate", "group", "before", "now", "Δ"]),
          el("tbody", {}, ...D.moved.slice(0, 50).map((m) => el("tr", {}, el("td", {}, qlink(m.query_id)), el("td", {}, m.candidate_id), el("td", {}, m.group || ""),
            el("td", { class: "num" }, fmt(m.old, 3)), el("td", { class: "num" }, fmt(m.new, 3)), el("td", { class: "num" }, fmt(m.delta, 3))))))),
      section("The board", ...D.settings.map((s) => el("div", { class: "setting-diff" },
        el("h3", {}, `${s.setting}: Kendall τ ${s.tau == null ? "n/a" : fmt(s.tau, 3)} over ${s.systems} systems`),
        s.flipped.length ? el("table", { class: "flipped" }, head(["pair", "before", "now"]),
          el("tbody", {}, ...s.flipped.map((f) => el("tr", {},
            el("td", {}, el("a", { href: `compare.html?${new URLSearchParams({ a: f.a, b: f.b, setting: s.setting })}` }, `${f.a} vs ${f.b}`)),
            el("td", { class: "num" }, `${fmt(f.old_a)} vs ${fmt(f.old_b)}`), el("td", { class: "num" }, `${fmt(f.new_a)} vs ${fmt(f.new_b)}`)))))
          : el("p", {}, "No pair of systems changed order."),
        ...(s.only_old.length || s.only_new.length ? [el("p", {}, `Only before: ${s.only_old.join(", ") || "none"}; only now: ${s.only_new.join(", ") || "none"}.`)] : [])))));
  }

  const pages = { board, queries, compare, diff };
  (pages[document.body.dataset.page] || board)();
})();
