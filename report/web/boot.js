// The page's start: reads the data, draws each section with its renderer, and on
// "#selfcheck" checks the page (every chart has data, a token hover changes the attention view)
// and writes the result into <pre id="gradlab-selfcheck">, which the browser tests read
// (opened_ms: from the navigation's start to the drawn page).
(function () {
  "use strict";
  const started = performance.now();
  const root = document.getElementById("gradlab-report");
  const source = document.getElementById("gradlab-data");
  if (!root || !source) return;
  const data = JSON.parse(source.textContent);
  document.title = `gradlab report: ${data.title}`;
  root.append(GL.el("h1", null, `gradlab report: ${data.title}`));
  if (data.run) root.append(GL.el("p", { className: "run" }, data.run));
  if (data.live) root.append(GL.el("p", { className: "live" }, "training: this page reloads itself"));
  const nav = GL.el("nav", null);
  root.append(nav);
  const drawn = [];
  data.sections.forEach((s, i) => {
    const body = GL.el("div", { className: "section-body" });
    const box = GL.el("section", { id: `section-${s.id}` }, GL.el("h2", null, s.title), body);
    root.append(box);
    nav.append(GL.el("a", { href: `#section-${s.id}` }, s.title), " ");
    if (s.missing) {
      body.append(GL.el("p", { className: "missing" }, s.missing));
      return;
    }
    const render = GL.renderers[s.id];
    if (!render) {
      GL.errors.push(`no renderer for section ${s.id}`);
      return;
    }
    try {
      render(body, s.data, s.id);
      drawn.push(s.id);
    } catch (e) {
      GL.errors.push(`${s.id}: ${e && e.stack ? e.stack : e}`);
      body.append(GL.el("p", { className: "missing" }, `could not draw: ${e}`));
    }
    void i;
  });
  const renderMs = performance.now() - started;
  if (data.live) setTimeout(() => location.reload(), 5000);
  if (location.hash !== "#selfcheck") return;

  const problems = [...GL.errors];
  for (const id of drawn) {
    const charts = GL.charts.filter((c) => c.section === id);
    const tables = document.querySelectorAll(`#section-${id} table`).length;
    if (charts.length === 0 && tables === 0) problems.push(`${id}: nothing drawn`);
    for (const { chart } of charts) {
      const points = chart.data.datasets.reduce((n, d) => n + d.data.length, 0);
      if (points === 0) problems.push(`${id}: an empty chart`);
      if (!chart.canvas || chart.canvas.width === 0) problems.push(`${id}: a chart of no size`);
    }
  }
  const hovers = GL.hoverChecks.map((check) => check());
  for (const h of hovers) if (!h.ok) problems.push(`${h.section}: a token hover did not change the view`);
  const result = { ok: problems.length === 0, problems, drawn,
    missing: data.sections.filter((s) => s.missing).map((s) => s.id),
    charts: GL.charts.length, hovers: hovers.length, render_ms: Math.round(renderMs),
    opened_ms: Math.round(performance.now()) };
  document.body.append(GL.el("pre", { id: "gradlab-selfcheck" }, JSON.stringify(result)));
})();
