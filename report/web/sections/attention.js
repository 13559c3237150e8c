// Section attention: every layer's and head's pattern on the report's prompt (attention.js).
GL.renderers.attention = function (el, data, section) {
  el.append(GL.el("p", null, `prompt: ${data.origin}`));
  GL.attentionView(section, el, data);
};
