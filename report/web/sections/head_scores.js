// Section head_scores: previous-token, duplicate-token and induction scores, point x head.
GL.renderers.head_scores = function (el, data, section) {
  const rows = data.points.map((p) => p.point.replace(/\.hook_pattern$/, ""));
  const heads = data.points[0].previous_token.map((_, h) => `H${h}`);
  const row = GL.el("div", { className: "chart-row" });
  el.append(row);
  for (const kind of ["previous_token", "duplicate_token", "induction"]) {
    const cell = GL.el("div", { className: "chart-cell" });
    row.append(cell);
    GL.heatmap(section, cell, { title: kind.replace("_", "-"), rows, cols: heads, max: 1,
      values: data.points.map((p) => p[kind]) });
  }
  el.append(GL.el("p", { className: "command" }, data.command));
};
