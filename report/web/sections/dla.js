// Section dla: each part's direct contribution to the answer's logit.
GL.renderers.dla = function (el, data, section) {
  el.append(GL.el("p", null,
    `logit of ${data.answer} at position ${data.position}: ${GL.format(data.logit)} (the parts' sum)`));
  GL.bars(section, el, { title: "direct logit attribution", labels: data.labels,
    values: data.contributions, valueLabel: "logit" });
};
