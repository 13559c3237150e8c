// Section logit_lens: p(target) after each block at each position, top token on hover.
GL.renderers.logit_lens = function (el, data, section) {
  const T = data.tokens.length;
  const cols = data.tokens.map((t, i) => `${i}: ${t}`);
  const values = data.layers.map((_, l) => data.target_probability.slice(l * T, (l + 1) * T));
  GL.heatmap(section, el, { title: "p(target) through the layers", rows: data.layers, cols, values,
    max: 1, xLabel: "position: input token", yLabel: "residual after",
    tooltip: (l, t, v) => `${data.layers[l]}, position ${t}: p(${data.targets[t]}) = ${GL.format(v, 3)}; ` +
      `top ${data.top_token[l * T + t]} (${GL.format(data.top_probability[l * T + t], 3)})` });
};
