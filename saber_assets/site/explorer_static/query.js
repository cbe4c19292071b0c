// A query's page: the systems on it, why one beats another here, and the candidates, each
// expanding to its own judgments. Data: window.QUERY (written into the page). No network.
"use strict";
(function () {
  const Q = window.QUERY;
  const { el, rendered, fmt, select, head } = window.SaberUI;
  // a clamped statement that fits needs no fade: only the ones cut short keep it
  const unclamp = (root) => { for (const e of root.querySelectorAll(".clamp")) if (e.scrollHeight <= e.clientHeight + 1) e.classList.remove("clamp"); };
  const C = Q.candidates, K = Q.top;
  const params = new URLSearchParams(location.search);
  const settings = Object.keys(Q.systems);
  const state = { setting: params.get("setting") || settings[0], a: params.get("a") || "", b: params.get("b") || "", open: new Set(), system: "" };
  if (!settings.includes(state.setting)) state.setting = settings[0];
  const best = Math.max(...C.map((c) => c.grade));
  const gain = (g) => 2 ** g - 1;
  const candLabel = (k) => el("span", { class: "cand" }, C[k].page ? el("a", { href: C[k].page }, C[k].id) : C[k].id, ` (${fmt(C[k].grade, 2)})`);
  const runs = () => Q.systems[state.setting] || {};
  // where each candidate stands in a system's ranking (1-based)
  const rankOf = (order) => { const r = new Array(C.length); order.forEach((k, i) => { r[k] = i + 1; }); return r; };

  function systems() {
    const box = document.querySelector("#systems .app");
    if (!settings.length) { box.replaceChildren(el("p", {}, "No retriever was run on this query.")); return; }
    const rows = Object.entries(runs()).sort((x, y) => (y[1] ? y[1].ndcg : -1) - (x[1] ? x[1].ndcg : -1));
    const body = el("tbody", {}, ...rows.map(([name, r]) => {
      if (!r) return el("tr", {}, el("td", {}, name), el("td", { colspan: "3" }, "failed on this query"));
      const rank = rankOf(r.order);
      const bestRank = Math.min(...C.map((c, k) => (c.grade === best ? rank[k] : Infinity)));
      const first = r.order[0];
      const open = state.system === name;
      const toggle = () => { state.system = open ? "" : name; systems(); };
      const row = el("tr", { class: "system-row" + (open ? " open" : ""), "data-system": name, tabindex: "0", "aria-expanded": String(open),
        onclick: (e) => { if (!e.target.closest("a")) toggle(); }, onkeydown: (e) => { if (e.key === "Enter") toggle(); } },
        el("td", {}, (open ? "▾ " : "▸ ") + name), el("td", { class: "num" }, fmt(r.ndcg, 4)),
        el("td", { class: "num" }, bestRank), el("td", {}, candLabel(first), rendered(C[first].html, "statement clamp")));
      if (!open) return row;
      // its top 10: what it put where, with the grades the tournament gave them
      const top = el("ol", { class: "top-list" }, ...r.order.slice(0, K).map((k) => el("li", {}, candLabel(k))));
      const frag = document.createDocumentFragment();
      frag.append(row, el("tr", { class: "system-top" }, el("td", { colspan: "4" }, el("b", {}, `${name}'s top ${K}`), top)));
      return frag;
    }));
    box.replaceChildren(
      el("div", { class: "controls" }, select("Setting", "q-setting", settings.map((s) => [s, s]), state.setting,
        (e) => { state.setting = e.target.value; systems(); why(); })),
      el("table", { id: "systems-table" }, head(["system", "nDCG@10", "rank of the best candidate", "what it put first (grade)"]), body),
      el("p", { class: "note" }, `The best candidate: the highest grade (${fmt(best, 2)}); its rank is where the system put it, among ${C.length}. ` +
        `Click a system for its top ${K}.`));
  }

  function why() {
    const box = document.querySelector("#why .app");
    const names = Object.keys(runs()).filter((n) => runs()[n]);
    if (names.length < 2) { box.replaceChildren(el("p", {}, "Fewer than two systems ran on this query.")); return; }
    const byScore = [...names].sort((x, y) => runs()[y].ndcg - runs()[x].ndcg);
    if (!names.includes(state.a)) state.a = byScore[0];
    if (!names.includes(state.b) || state.b === state.a) state.b = byScore.find((n) => n !== state.a);
    const A = runs()[state.a], B = runs()[state.b];
    const ra = rankOf(A.order), rb = rankOf(B.order);
    // a candidate's share of DCG@10 in a ranking: gain / log2(rank + 1), inside the top 10
    const part = (rank, k) => (rank <= K ? gain(C[k].grade) / Math.log2(rank + 1) / (Q.ideal_dcg || 1) : 0);
    const shown = [...new Set([...A.order.slice(0, K), ...B.order.slice(0, K)])]
      .map((k) => ({ k, d: part(ra[k], k) - part(rb[k], k) }))
      .sort((x, y) => y.d - x.d);
    const above = shown.filter((r) => ra[r.k] < rb[r.k]);
    const body = el("tbody", {}, ...shown.map((r) => el("tr", { class: ra[r.k] < rb[r.k] ? "a-above" : ra[r.k] > rb[r.k] ? "b-above" : "" },
      el("td", {}, candLabel(r.k)), el("td", { class: "num" }, fmt(C[r.k].grade, 2)), el("td", { class: "num" }, ra[r.k]),
      el("td", { class: "num" }, rb[r.k]), el("td", { class: "num" }, (r.d >= 0 ? "+" : "") + fmt(r.d, 4)),
      el("td", {}, rendered(C[r.k].html, "statement clamp")))));
    const names2 = names.map((n) => [n, n]);
    box.replaceChildren(
      el("div", { class: "controls" },
        select("A", "why-a", names2, state.a, (e) => { state.a = e.target.value; why(); }),
        select("B", "why-b", names2, state.b, (e) => { state.b = e.target.value; why(); })),
      el("p", { id: "why-summary" }, `${state.a} ${fmt(A.ndcg, 4)} against ${state.b} ${fmt(B.ndcg, 4)} (Δ ${fmt(A.ndcg - B.ndcg, 4)}). ` +
        `${state.a} ranks ${above.length} of the ${shown.length} candidates in either top ${K} above ${state.b}` +
        (above.length ? `, with mean grade ${fmt(above.reduce((s, r) => s + C[r.k].grade, 0) / above.length, 2)}` : "") + "."),
      el("table", { id: "why-table" }, head(["candidate", "grade", `rank by ${state.a}`, `rank by ${state.b}`, "share of ΔnDCG", "statement"]), body),
      el("p", { class: "note" }, `Share of ΔnDCG: the candidate's gain (2^grade − 1) over log2(rank + 1), inside the top ${K}, for A minus for B, over the ideal DCG; ` +
        "the shares sum to the difference (up to the averaging of tied scores)."));
  }

  // Each candidate's judgments: [round, a, b, shown first, winner, P(first), answer, order check's winner]
  const games = C.map(() => []);
  for (const j of Q.judgments) { if (j[1] >= 0) games[j[1]].push(j); if (j[2] >= 0) games[j[2]].push(j); }
  // wins and losses over its decided games (a failed judgment decides nothing)
  const won = games.map((g, k) => g.filter((j) => j[4] === k).length);
  const lost = games.map((g, k) => g.filter((j) => j[4] >= 0 && j[4] !== k).length);

  function judgmentsOf(k) {
    const rows = games[k].map((j) => {
      const other = j[1] === k ? j[2] : j[1];
      const result = j[4] < 0 ? "no decision" : j[4] === k ? "won" : "lost";
      const check = j[7] == null ? "" : j[7] === j[4] ? "same winner" : "winner changed";
      return el("tr", { class: "judgment " + result.replace(" ", "-") }, el("td", { class: "num" }, j[0]),
        el("td", {}, other >= 0 ? candLabel(other) : "?", other >= 0 ? rendered(C[other].html, "statement") : ""),
        el("td", {}, j[3] === k ? "this one" : "the opponent"), el("td", {}, result), el("td", { class: "num" }, fmt(j[5], 2)),
        el("td", {}, check), el("td", { class: "raw" }, j[6] || ""));
    });
    return el("table", { class: "judgments" }, head(["round", "opponent (grade)", "shown first", "this candidate", "P(first)", "asked again, other order", "judge's answer"]), el("tbody", {}, ...rows));
  }

  function candidates() {
    const box = document.querySelector("#candidates .app");
    const groups = [...new Set(C.map((c) => c.group))];
    const order = ["topic_only", "summary_only", "both"].filter((g) => groups.includes(g)).concat(groups.filter((g) => !["topic_only", "summary_only", "both"].includes(g)));
    box.replaceChildren(...order.map((g) => {
      const ks = C.map((_, k) => k).filter((k) => C[k].group === g).sort((x, y) => C[y].grade - C[x].grade);
      const body = el("tbody");
      for (const k of ks) {
        const c = C[k];
        const open = state.open.has(k);
        const toggle = () => { if (state.open.has(k)) state.open.delete(k); else state.open.add(k); candidates(); };
        body.append(el("tr", { class: "cand-row" + (open ? " open" : ""), "data-candidate": c.id, tabindex: "0", "aria-expanded": String(open),
          onclick: (e) => { if (!e.target.closest("a")) toggle(); }, onkeydown: (e) => { if (e.key === "Enter") toggle(); } },
          el("td", {}, (open ? "▾ " : "▸ "), c.page ? el("a", { href: c.page }, c.id) : c.id), el("td", { class: "num" }, fmt(c.strength, 3)),
          el("td", { class: "num" }, fmt(c.grade, 2)),
          el("td", { class: "num interval" }, c.interval ? `[${fmt(c.interval[0], 2)}, ${fmt(c.interval[1], 2)}]` : "n/a"),
          el("td", { class: "num wins" }, `${won[k]}–${lost[k]}`),
          el("td", {}, rendered(c.html, open ? "statement" : "statement clamp"))));
        if (open) body.append(el("tr", { class: "cand-judgments" }, el("td", { colspan: "6" },
          games[k].length ? judgmentsOf(k) : el("p", {}, "No judgment stored for this candidate."))));
      }
      return el("div", { class: "group" }, el("h3", {}, `${g == null ? "(no group)" : g.replace("_", "-")} (${ks.length})`),
        el("table", { class: "cands" }, head(["candidate", "BT strength", "grade", "95% interval", "wins–losses", "statement"]), body));
    }));
  }

  systems();
  why();
  candidates();
  new MutationObserver(() => unclamp(document.querySelector("main"))).observe(document.querySelector("main"), { childList: true, subtree: true });
  unclamp(document.querySelector("main"));
  document.body.dataset.ready = "1";
})();
