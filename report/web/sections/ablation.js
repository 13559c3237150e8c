// Section ablation: the held-out loss's rise with each head (or feed-forward) knocked out.
GL.renderers.ablation = function (el, data, section) {
  const layerOf = (point) => point.replace(/\.(attn\.hook_z|hook_mlp_out)$/, "");
  const rows = [...new Set(data.parts.map((p) => layerOf(p.point)))];
  const maxHead = Math.max(-1, ...data.parts.map((p) => p.head));
  const cols = [...Array.from({ length: maxHead + 1 }, (_, h) => `H${h}`), "ffn"];
  const values = rows.map(() => cols.map(() => null));
  const parts = rows.map(() => cols.map(() => null));
  for (const p of data.parts) {
    const r = rows.indexOf(layerOf(p.point)), c = p.head >= 0 ? p.head : cols.length - 1;
    values[r][c] = p.loss - data.intact.loss;
    parts[r][c] = p;
  }
  el.append(GL.el("p", null,
    `${data.mode} ablation on the held-out set; intact loss ${GL.format(data.intact.loss)}, ` +
    `token accuracy ${GL.format(data.intact.token_accuracy)}`));
  GL.heatmap(section, el, { title: "held-out loss increase", rows, cols, values, diverging: true,
    tooltip: (r, c, v) => {
      const p = parts[r][c];
      return `${p.point}${p.head >= 0 ? ` head ${p.head}` : ""}: loss ${GL.format(p.loss)} (+${GL.format(v)}), ` +
        `accuracy ${GL.format(p.token_accuracy)}`;
    } });
  el.append(GL.el("p", { className: "command" }, data.command));
};
