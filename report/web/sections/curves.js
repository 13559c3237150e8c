// Section curves: loss, accuracy and learning rate against the step, with a log-x toggle.
GL.renderers.curves = function (el, data, section) {
  const c = data.columns, step = c.step || [];
  const specs = [
    { title: "loss", yLabel: "loss", keys: ["train_loss", "eval_loss"], logY: true },
    { title: "held-out accuracy", yLabel: "fraction", keys: ["token_accuracy", "exact_match"] },
    { title: "learning rate", yLabel: "lr", keys: ["lr"] },
  ];
  const toggle = GL.el("input", { type: "checkbox" });
  el.append(GL.el("label", { className: "toggle" }, toggle, " log-scale steps"));
  const grid = GL.el("div", { className: "chart-row" });
  el.append(grid);
  const charts = [];
  for (const spec of specs) {
    const series = spec.keys.filter((k) => c[k] && c[k].some((v) => v !== null))
      .map((k) => ({ label: k, y: c[k] }));
    if (series.length === 0) continue;
    const cell = GL.el("div", { className: "chart-cell" });
    grid.append(cell);
    const positive = series.every((s) => s.y.every((v) => v === null || v > 0));
    charts.push(GL.lines(section, cell, { ...spec, logY: spec.logY && positive, x: step, xLabel: "step", series }));
  }
  toggle.addEventListener("change", () => {
    for (const chart of charts) {
      chart.options.scales.x.type = toggle.checked ? "logarithmic" : "linear";
      chart.update();
    }
  });
};
