// gradlab report: the page's core. GL holds the section renderers (sections/<id>.js), the
// helpers they draw with (Chart.js line, bar and matrix charts; DOM built with textContent, so
// that no user text is ever parsed as HTML) and the page's self-check (boot.js).
var GL = (function () {
  "use strict";
  const GL = { renderers: {}, errors: [], charts: [], hoverChecks: [] };
  window.addEventListener("error", (e) => GL.errors.push(String(e.message || e)));

  // An element: attrs are properties (className, title...), children nodes or text.
  GL.el = function (tag, attrs, ...children) {
    const node = document.createElement(tag);
    Object.assign(node, attrs || {});
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  };

  // base64 float32 (little-endian) -> Float32Array: the C++ side's base64_floats.
  GL.floats = function (text) {
    const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
    return new Float32Array(bytes.buffer);
  };

  GL.format = (v, digits) =>
    v === null || v === undefined || Number.isNaN(v) ? "n/a" : Number(v).toPrecision(digits || 4);

  // Colours: sequential white -> blue for [0, max], diverging red <- white -> blue around 0.
  GL.sequential = (v, max) => {
    const t = max > 0 ? Math.min(1, Math.max(0, v / max)) : 0;
    return `rgba(33, 102, 172, ${t.toFixed(3)})`;
  };
  GL.diverging = (v, max) => {
    const t = max > 0 ? Math.min(1, Math.abs(v) / max) : 0;
    return v >= 0 ? `rgba(33, 102, 172, ${t.toFixed(3)})` : `rgba(178, 24, 43, ${t.toFixed(3)})`;
  };

  function register(section, chart) {
    GL.charts.push({ section, chart });
    return chart;
  }

  // A canvas in a sized box: Chart.js draws responsively into its parent.
  function canvasIn(parent, height, width) {
    const canvas = GL.el("canvas");
    const box = GL.el("div", { className: "chart" }, canvas);
    box.style.height = `${height}px`;
    if (width) box.style.width = `${width}px`;
    parent.append(box);
    return canvas;
  }

  const baseOptions = () => ({
    animation: false,
    responsive: true,
    maintainAspectRatio: false,
    plugins: { legend: { display: true } },
  });

  // Lines against a shared x: series [{label, y: [...]}]; returns the chart.
  GL.lines = function (section, parent, spec) {
    const options = baseOptions();
    options.parsing = false;
    options.scales = {
      x: { type: spec.logX ? "logarithmic" : "linear", title: { display: true, text: spec.xLabel } },
      y: { type: spec.logY ? "logarithmic" : "linear", title: { display: true, text: spec.yLabel } },
    };
    options.plugins.title = { display: !!spec.title, text: spec.title };
    const datasets = spec.series.map((s, i) => ({
      label: s.label,
      data: spec.x
        .map((x, j) => ({ x, y: s.y[j] }))
        .filter((p) => p.y !== null && p.x !== null && (!spec.logX || p.x > 0)),
      borderColor: GL.palette[i % GL.palette.length],
      backgroundColor: GL.palette[i % GL.palette.length],
      pointRadius: 2,
      borderWidth: 1.5,
    }));
    return register(section, new Chart(canvasIn(parent, spec.height || 260), {
      type: "line", data: { datasets }, options }));
  };

  GL.palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];

  // Bars: labels [N], values [N]; horizontal, or vertical (spec.vertical) for many short labels
  // such as frequencies; spec.colours [N] overrides the sign's colour.
  GL.bars = function (section, parent, spec) {
    const options = baseOptions();
    const value = spec.vertical ? "y" : "x";
    options.indexAxis = spec.vertical ? "x" : "y";
    options.plugins.legend.display = false;
    options.plugins.title = { display: !!spec.title, text: spec.title };
    options.scales = { [value]: { title: { display: true, text: spec.valueLabel } } };
    // Every bar keeps its label (Chart.js would skip some where they look crowded).
    options.scales[options.indexAxis] = { ticks: { autoSkip: false },
      title: { display: !!spec.labelAxis, text: spec.labelAxis } };
    // A title and an axis title above and below the bars: 80 px besides the bars' own.
    const height = spec.vertical ? 260 : 80 + 18 * spec.labels.length;
    return register(section, new Chart(canvasIn(parent, height), {
      type: "bar",
      data: {
        labels: spec.labels,
        datasets: [{
          data: spec.values,
          backgroundColor: spec.colours || spec.values.map((v) => (v >= 0 ? "#2166ac" : "#b2182b")),
        }],
      },
      options,
    }));
  };

  // A heatmap (chartjs-chart-matrix): rows [R], cols [C], values [R][C] (null: no cell);
  // tooltip(r, c) gives the hover text.
  GL.heatmap = function (section, parent, spec) {
    const data = [];
    let max = 0;
    spec.values.forEach((row, r) =>
      row.forEach((v, c) => {
        if (v === null || v === undefined) return;
        data.push({ x: spec.cols[c], y: spec.rows[r], v, r, c });
        max = Math.max(max, Math.abs(v));
      }));
    if (spec.max !== undefined) max = spec.max;
    const colour = spec.diverging ? GL.diverging : GL.sequential;
    const options = baseOptions();
    options.plugins.legend.display = false;
    options.plugins.title = { display: !!spec.title, text: spec.title };
    options.plugins.tooltip = {
      callbacks: {
        title: () => "",
        label: (ctx) => spec.tooltip ? spec.tooltip(ctx.raw.r, ctx.raw.c, ctx.raw.v)
                                     : `${spec.rows[ctx.raw.r]}, ${spec.cols[ctx.raw.c]}: ${GL.format(ctx.raw.v)}`,
      },
    };
    options.scales = {
      x: { type: "category", labels: spec.cols, offset: true, grid: { display: false },
           title: { display: !!spec.xLabel, text: spec.xLabel } },
      y: { type: "category", labels: spec.rows, offset: true, grid: { display: false },
           title: { display: !!spec.yLabel, text: spec.yLabel } },
    };
    const cell = 26;
    const height = 70 + cell * spec.rows.length;
    const width = Math.min(1100, 160 + cell * Math.max(spec.cols.length, 4));
    return register(section, new Chart(canvasIn(parent, height, width), {
      type: "matrix",
      data: {
        datasets: [{
          data,
          backgroundColor: (ctx) => colour(ctx.raw ? ctx.raw.v : 0, max),
          borderColor: "rgba(0,0,0,0.15)",
          borderWidth: 1,
          width: ({ chart }) => (chart.chartArea || {}).width / spec.cols.length - 2,
          height: ({ chart }) => (chart.chartArea || {}).height / spec.rows.length - 2,
        }],
      },
      options,
    }));
  };

  // A table of rows of cells (text), with a header row.
  GL.table = function (header, rows, className) {
    return GL.el("table", { className: className || "" },
      GL.el("thead", null, GL.el("tr", null, header.map((h) => GL.el("th", null, h)))),
      GL.el("tbody", null, rows.map((row) => GL.el("tr", null, row.map((c) => GL.el("td", null, c))))));
  };

  // The notebook views (python/gradlab/vis.py): each draws one of the report's views into el.
  GL.views = {
    attention: (el, data) => GL.attentionView("attention", el, data),
    heatmap: (el, data) => GL.heatmap("heatmap", el, data),
    curves: (el, data) => GL.renderers.curves(el, data, "curves"),
  };

  return GL;
})();
