// The attention view, in the manner of CircuitsVis: a point and head selector, the tokens as a
// row (hover one: above, where it attends; below, what attends to it) and the head's whole
// pattern as a heatmap. Shared by the report's attention section and gradlab.vis.attention.
(function () {
  "use strict";

  // data: {tokens: {inputs: [T], source: [S]}, points: [{name, heads, queries, keys, shape:
  // [H, Tq, Tk], pattern: base64 float32}]}
  GL.attentionView = function (section, parent, data) {
    const points = data.points.map((p) => ({ ...p, weights: GL.floats(p.pattern) }));
    const state = { point: 0, head: 0, token: null };
    const pointSelect = GL.el("select", { className: "point-select" },
      points.map((p, i) => GL.el("option", { value: String(i) }, p.name)));
    const headBar = GL.el("div", { className: "head-bar" });
    const intoRow = GL.el("div", { className: "tokens" });
    const fromRow = GL.el("div", { className: "tokens" });
    const caption = GL.el("div", { className: "caption" });
    const grid = GL.el("div", { className: "pattern-grid" });
    parent.append(
      GL.el("div", { className: "attention-controls" }, "point ", pointSelect, " head ", headBar),
      caption,
      GL.el("div", { className: "token-label" }, "the hovered query attends to (row of the pattern):"),
      intoRow,
      GL.el("div", { className: "token-label" }, "keys: hover one to see which queries attend to it (column):"),
      fromRow,
      grid);

    const current = () => points[state.point];
    const tokensOf = (which) => data.tokens[which] || [];
    const weight = (p, h, q, k) => p.weights[(h * p.shape[1] + q) * p.shape[2] + k];

    function tokenSpans(row, tokens, onHover) {
      row.replaceChildren(...tokens.map((t, i) => {
        const span = GL.el("span", { className: "token", title: `position ${i}` }, t === "" ? "\u00a0" : t);
        span.dataset.position = String(i);
        span.addEventListener("mouseenter", () => onHover(i));
        return span;
      }));
    }

    // Colours the rows for the hovered query (state.token.query) or key (state.token.key).
    function paint() {
      const p = current(), h = state.head;
      const queries = intoRow.children, keys = fromRow.children;
      for (const s of queries) s.style.backgroundColor = "";
      for (const s of keys) s.style.backgroundColor = "";
      if (!state.token) {
        caption.textContent = "hover a token";
        return;
      }
      if (state.token.query !== undefined) {
        const q = state.token.query;
        for (let k = 0; k < keys.length; ++k) keys[k].style.backgroundColor = GL.sequential(weight(p, h, q, k), 1);
        queries[q].style.outline = "2px solid #d62728";
        caption.textContent = `query ${q} (${tokensOf(p.queries)[q]}) attends to the keys below`;
      } else {
        const k = state.token.key;
        for (let q = 0; q < queries.length; ++q) queries[q].style.backgroundColor = GL.sequential(weight(p, h, q, k), 1);
        keys[k].style.outline = "2px solid #d62728";
        caption.textContent = `key ${k} (${tokensOf(p.keys)[k]}) is attended to by the queries above`;
      }
    }

    function hover(token) {
      for (const s of [...intoRow.children, ...fromRow.children]) s.style.outline = "";
      state.token = token;
      paint();
    }

    let chart = null;
    function drawGrid() {
      const p = current(), h = state.head;
      const qt = tokensOf(p.queries), kt = tokensOf(p.keys);
      const values = [];
      for (let q = 0; q < p.shape[1]; ++q) {
        const row = [];
        for (let k = 0; k < p.shape[2]; ++k) row.push(weight(p, h, q, k));
        values.push(row);
      }
      if (chart) chart.destroy();
      GL.charts = GL.charts.filter((c) => c.chart !== chart);
      grid.replaceChildren();
      chart = GL.heatmap(section, grid, {
        rows: qt.map((t, i) => `${i}: ${t}`), cols: kt.map((t, i) => `${i}: ${t}`), values, max: 1,
        title: `${p.name}, head ${h}`, xLabel: "key", yLabel: "query",
        tooltip: (q, k, v) => `query ${q} (${qt[q]}) -> key ${k} (${kt[k]}): ${GL.format(v, 3)}`,
      });
    }

    function selectPoint(i) {
      state.point = i;
      state.head = Math.min(state.head, points[i].heads - 1);
      headBar.replaceChildren(...Array.from({ length: points[i].heads }, (_, h) => {
        const button = GL.el("button", { className: h === state.head ? "head selected" : "head" }, String(h));
        button.addEventListener("click", () => selectHead(h));
        return button;
      }));
      const p = current();
      tokenSpans(intoRow, tokensOf(p.queries), (q) => hover({ query: q }));
      tokenSpans(fromRow, tokensOf(p.keys), (k) => hover({ key: k }));
      state.token = null;
      paint();
      drawGrid();
    }

    function selectHead(h) {
      state.head = h;
      [...headBar.children].forEach((b, i) => (b.className = i === h ? "head selected" : "head"));
      paint();
      drawGrid();
    }

    pointSelect.addEventListener("change", () => selectPoint(Number(pointSelect.value)));
    selectPoint(0);

    // The self-check: hovering a query must recolour the keys.
    GL.hoverChecks.push(() => {
      const colours = () => [...fromRow.children].map((s) => s.style.backgroundColor).join("|");
      const before = colours();
      const last = intoRow.children[intoRow.children.length - 1];
      last.dispatchEvent(new MouseEvent("mouseenter"));
      const after = colours();
      return { section, ok: after !== before && after.replace(/\|/g, "") !== "" };
    });
  };
})();
