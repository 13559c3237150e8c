"""gradlab.vis: each notebook view's HTML holds the report's bundle and its data, user text is
escaped by the report's one escaping, and bad shapes are named."""

import base64
import json
import re

import numpy as np
import pytest

import gradlab

HOSTILE = ["</script><script>alert(1)</script>", "<!--", "\"'", "&amp;", "\u2028", "é"]


def parts(view):
    """(data, script) of a view's HTML; asserts the HTML is one box, its data and one script."""
    html = view._repr_html_()
    found = re.fullmatch(
        r'<div class="gradlab" id="(gradlab-view-\w+)"></div>\n<style>\n(.*?)</style>\n'
        r'<script type="application/json" id="\1-data">(.*?)</script>\n<script>\n(.*)</script>\n',
        html, re.S)
    assert found, html[:300]
    assert html.count("</script") == 2, "a closing tag inside the data or the bundle"
    assert ".gradlab table" in found.group(2)
    data_text, script = found.group(3), found.group(4)
    for forbidden in "<>&\u2028":
        assert forbidden not in data_text
    assert "Chart" in script and "GL.attentionView" in script
    assert f'GL.views["{view.kind}"]' in script
    return json.loads(data_text), script


def test_attention_holds_the_pattern_and_escapes_hostile_tokens():
    pattern = np.random.default_rng(0).random((1, 2, len(HOSTILE), len(HOSTILE)), dtype=np.float32)
    data, _ = parts(gradlab.vis.attention(HOSTILE, pattern))
    assert data["tokens"]["inputs"] == HOSTILE  # escaped, not changed
    point = data["points"][0]
    assert point["shape"] == [2, len(HOSTILE), len(HOSTILE)] and point["heads"] == 2
    decoded = np.frombuffer(base64.b64decode(point["pattern"]), dtype="<f4")
    np.testing.assert_array_equal(decoded, pattern.ravel())


def test_attention_reads_a_cache_pattern(runs):
    model = gradlab.load(runs["induction"])
    tokens = np.array([[3, 1, 4, 1, 5, 3, 1, 4]])
    _, cache = model.run_with_cache(tokens)
    pattern = cache["blocks.1.attn.hook_pattern"]
    data, _ = parts(gradlab.vis.attention([str(t) for t in tokens[0]], pattern))
    decoded = np.frombuffer(base64.b64decode(data["points"][0]["pattern"]), dtype="<f4")
    np.testing.assert_allclose(decoded, np.asarray(pattern).ravel())
    with pytest.raises(ValueError, match=r"shape \[1, \d+, 8, 8\] for 7 tokens"):
        gradlab.vis.attention(["a"] * 7, pattern)


def test_heatmap_holds_values_labels_and_title():
    values = np.array([[1.0, -2.0, np.nan], [0.5, 0.0, 3.0]])
    data, _ = parts(gradlab.vis.heatmap(values, HOSTILE[:3], ["L0", HOSTILE[0]], title=HOSTILE[1]))
    assert data["values"] == [[1.0, -2.0, None], [0.5, 0.0, 3.0]]
    assert data["cols"] == HOSTILE[:3] and data["rows"] == ["L0", HOSTILE[0]]
    assert data["title"] == HOSTILE[1] and data["diverging"] is True
    with pytest.raises(ValueError, match=r"values of shape \[2, 3\] for 3 y labels and 3 x labels"):
        gradlab.vis.heatmap(values, ["a", "b", "c"], ["x", "y", "z"])


def test_curves_read_the_runs_metrics(runs, tmp_path):
    data, _ = parts(gradlab.vis.curves(runs["induction"].parent))
    columns = data["columns"]
    assert columns["step"] == [10.0, 20.0, 30.0]
    assert len(columns["eval_loss"]) == 3 and all(v > 0 for v in columns["eval_loss"])
    with pytest.raises(FileNotFoundError, match="metrics.csv: no such file"):
        gradlab.vis.curves(tmp_path)


def test_the_escaping_is_the_reports():
    hostile = {"t": "</script><!--\u2028&é"}
    text = gradlab._native.embedded_json(json.dumps(hostile))
    assert text == '{"t":"\\u003c/script\\u003e\\u003c!--\\u2028\\u0026\\u00e9"}'
    assert json.loads(text) == hostile
