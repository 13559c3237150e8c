// Section model_card: the run's configuration and the model's parameters and hook points.
GL.renderers.model_card = function (el, data) {
  // Three key = value pairs a row: a run's forty-odd settings in a screen's height.
  const perRow = 3, rows = [];
  for (let i = 0; i < data.config.length; i += perRow) rows.push(data.config.slice(i, i + perRow).flat());
  el.append(GL.el("h3", null, "configuration"),
    GL.table(Array.from({ length: perRow }, () => ["key", "value"]).flat(), rows, "config"));
  if (data.missing_model) {
    el.append(GL.el("p", { className: "missing" }, data.missing_model));
    return;
  }
  el.append(GL.el("h3", null, `parameters (${data.total_parameters.toLocaleString("en")}; checkpoint of step ${data.checkpoint_step})`),
    GL.table(["parameter", "shape", "axes", "count"],
      data.parameters.map((p) => [p.name, `[${p.shape.join(", ")}]`, p.letters, p.count.toLocaleString("en")]),
      "parameters"));
  if (data.hook_points) {
    el.append(GL.el("details", null, GL.el("summary", null, `hook points (${data.hook_points.length})`),
      GL.table(["point", "shape"], data.hook_points.map((p) => [p.name, p.letters]))));
  }
};
