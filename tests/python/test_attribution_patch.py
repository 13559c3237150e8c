"""gradlab.attribution_patch: exact where the metric is linear in a point (the logits, the last
residual stream of the attention-only model without a norm), the directional derivative of central
differences elsewhere, and a metric whose gradient is not the logits' shape refused."""

import numpy as np
import pytest

import gradlab

CLEAN = np.array([1, 5, 6, 7, 8, 5, 6, 7])
CORRUPT = np.array([1, 5, 9, 7, 8, 5, 6, 7])


def difference(logits):
    """The logit of token 6 minus that of 9 after the second 5, and its gradient."""
    gradient = np.zeros_like(logits)
    gradient[0, 5, 6], gradient[0, 5, 9] = 1, -1
    return float(np.sum(logits * gradient)), gradient


def test_exact_where_the_metric_is_linear(runs):
    model = gradlab.load(runs["induction"]).to("float64")
    names = ["hook_logits", "blocks.1.hook_resid_post"]
    estimated = gradlab.attribution_patch(model, CLEAN, CORRUPT, names, difference,
                                          per_position=True)
    exact = gradlab.patch(model, CLEAN, CORRUPT, names, lambda l: difference(l)[0],
                          per_position=True)
    assert estimated["sites"] == exact["sites"]
    assert estimated["clean"] == pytest.approx(exact["clean"], abs=1e-12)
    assert estimated["corrupt"] == pytest.approx(exact["corrupt"], abs=1e-12)
    np.testing.assert_allclose(estimated["estimated"], exact["patched"], rtol=0, atol=1e-12)
    assert np.sum(np.abs(exact["patched"] - exact["corrupt"]) > 1e-6) >= 2


def test_a_head_is_the_central_difference_along_its_part(runs):
    model = gradlab.load(runs["induction"]).to("float64")
    point = "blocks.0.attn.hook_z"
    r = gradlab.attribution_patch(model, CLEAN, CORRUPT, point, difference)
    _, cache = model.run_with_cache(CLEAN, names_filter=point)
    for index, (_, head, _) in enumerate(r["sites"]):

        def shifted(step):
            def shift(z, hook):
                out = z.copy()
                out[:, :, head] += step * (cache[point][:, :, head] - z[:, :, head])
                return out

            return difference(model.run_with_hooks(CORRUPT, fwd_hooks=[(point, shift)]))[0]

        h = 1e-5
        derivative = (shifted(h) - shifted(-h)) / (2 * h)
        assert r["estimated"][index] - r["corrupt"] == pytest.approx(derivative, abs=1e-7), head


def test_a_gradient_of_another_shape_is_a_value_error(runs):
    model = gradlab.load(runs["induction"])
    with pytest.raises(ValueError, match="gradient has shape"):
        gradlab.attribution_patch(model, CLEAN, CORRUPT, "hook_logits",
                                  lambda logits: (0.0, np.zeros(3)))
