// Section fourier: a modular-addition run's embedding norm per frequency (key frequencies
// highlighted), its neuron clusters, its losses, and the restricted/excluded curves of the run's
// fourier.csv beside train and test.
GL.renderers.fourier = function (el, data, section) {
  const K = data.embedding_norms.length - 1;
  const frequencies = Array.from({ length: K }, (_, i) => i + 1);
  const key = new Set(data.key_frequencies);
  el.append(GL.el("p", null,
    `modulus ${data.modulus}, best checkpoint (step ${data.step}); key frequencies: the fewest ` +
    `holding ${data.share} of the embedding's non-constant squared norm`));
  const row = GL.el("div", { className: "chart-row" });
  el.append(row);
  const spectrum = GL.el("div", { className: "chart-cell" });
  row.append(spectrum);
  GL.bars(section, spectrum, { title: "embedding norm per frequency (key frequencies dark)",
    vertical: true, labels: frequencies.map(String), values: data.embedding_norms.slice(1),
    colours: frequencies.map((k) => (key.has(k) ? "#2166ac" : "#9ecae1")),
    valueLabel: "norm", labelAxis: "frequency" });
  const clustered = frequencies.filter((k) => data.cluster_counts[k] > 0);
  const clusters = GL.el("div", { className: "chart-cell" });
  row.append(clusters);
  GL.bars(section, clusters, {
    title: `neurons per frequency cluster (${data.neurons} neurons, ` +
      `${GL.format(100 * data.clustered_fraction, 3)}% clustered at ${data.neuron_threshold})`,
    labels: [...clustered.map((k) => `frequency ${k}`), "none"],
    values: [...clustered.map((k) => data.cluster_counts[k]), data.cluster_counts[0]],
    valueLabel: "neurons" });
  el.append(GL.table(["key frequency", "share", "neurons"],
    data.key_frequencies.map((k, i) => [k, GL.format(data.key_shares[i], 3), data.cluster_counts[k]])));
  const l = data.losses;
  el.append(GL.table(["train", "test", "restricted", "excluded"],
    [[l.train, l.test, l.restricted, l.excluded].map((v) => GL.format(v))]));
  if (!data.curve) {
    el.append(GL.el("p", { className: "missing" },
      `the curves over the run's checkpoints: not computed: run ${data.curve_command}`));
    return;
  }
  const c = data.curve;
  GL.lines(section, el, { title: "loss over the run's checkpoints (key frequencies of the newest)",
    x: c.step, xLabel: "step", yLabel: "loss (nats)", logY: true,
    series: ["train_loss", "test_loss", "restricted_loss", "excluded_loss"]
      .map((k) => ({ label: k.replace("_loss", ""), y: c[k] })) });
};
