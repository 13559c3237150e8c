"""run_with_cache and run_with_hooks: the command line's numbers bit for bit, hooks that change
nothing or one head, gradients against central differences, hooks removed after an error."""

import numpy as np
import pytest

import gradlab
from conftest import gradlab as run_cli

PROMPT = "1 5 6 7 8"


def test_cache_equals_gradlab_activations(runs, tmp_path):
    out = tmp_path / "acts.h5"
    run_cli("activations", "--checkpoint", runs["induction"], "--input", PROMPT, "--out", out)
    inputs = gradlab.read_dataset(out, "/inputs")
    model = gradlab.load(runs["induction"])
    _, cache = model.run_with_cache(inputs)
    assert len(cache) == len(model.hook_points())
    for name, value in cache.items():
        stored = gradlab.read_dataset(out, "/" + name)
        assert value.dtype == stored.dtype and np.array_equal(value.reshape(stored.shape), stored), name


def test_names_filter_stores_only_what_it_names(runs):
    model = gradlab.load(runs["induction"])
    tokens = np.arange(1, 9)
    _, cache = model.run_with_cache(tokens, names_filter="blocks.*.attn.hook_pattern")
    assert sorted(cache) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_z"))
    assert sorted(cache) == ["blocks.0.attn.hook_z", "blocks.1.attn.hook_z"]
    _, cache = model.run_with_cache(tokens, names_filter=["blocks.1.hook_resid_post"])
    assert list(cache) == ["blocks.1.hook_resid_post"]


def test_a_hook_returning_its_input_changes_nothing(runs):
    model = gradlab.load(runs["induction"])
    tokens = np.array([[1, 5, 6, 7, 5, 6, 7, 9]])
    seen = []
    reading = model.run_with_hooks(
        tokens, fwd_hooks=[("blocks.0.attn.hook_z", lambda a, hook: seen.append(hook.layer))])
    returning = model.run_with_hooks(tokens,
                                     fwd_hooks=[("blocks.0.attn.hook_z", lambda a, hook: a.copy())])
    assert seen == [0] and np.array_equal(reading, returning)


def test_zeroing_a_head_moves_logits_by_its_result_through_the_unembedding(runs):
    model = gradlab.load(runs["induction"]).to("float64")  # attention-only, no LayerNorm
    tokens = np.array([[1, 5, 6, 7, 5, 6, 7]])
    last, head = model.cfg["layers"] - 1, 2
    point = f"blocks.{last}.attn."
    logits, cache = model.run_with_cache(tokens, names_filter=point + "hook_result")

    def zero(z, hook):
        z[:, :, head, :] = 0

    ablated = model.run_with_hooks(tokens, fwd_hooks=[(point + "hook_z", zero)])
    unembed = next(v for n, v in model.named_parameters().items() if n.startswith("head.")
                   and n.endswith("weight"))  # [V, C]
    expected = logits - cache[point + "hook_result"][:, :, head, :] @ unembed.T
    assert not np.allclose(ablated, logits)
    np.testing.assert_allclose(ablated, expected, rtol=1e-10, atol=1e-10)


def test_gradients_equal_central_differences(runs):
    model = gradlab.load(runs["induction"]).to("float64")
    tokens = np.array([[1, 5, 6, 7, 5, 6]])
    name = "blocks.0.hook_resid_mid"
    _, cache = model.run_with_cache(tokens, names_filter=name, incl_bwd=True)
    grad = cache[name + "_grad"]
    eps = 1e-6
    for index in [(0, 1, 3), (0, 4, 10), (0, 5, 63)]:
        def nudge(delta):
            def hook(a, _):
                a[index] += delta
            return model.run_with_hooks(tokens, fwd_hooks=[(name, hook)], return_type="loss")
        numeric = (nudge(eps) - nudge(-eps)) / (2 * eps)
        assert grad[index] == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def test_a_raising_hook_leaves_no_hook_behind(runs):
    model = gradlab.load(runs["induction"])
    tokens = np.arange(1, 9)
    clean = model(tokens)

    def broken(a, hook):
        a[...] = 0
        raise ArithmeticError("hook failed on purpose")

    with pytest.raises(ArithmeticError, match="on purpose"):
        with model.hooks(fwd_hooks=[("blocks.*.hook_resid_pre", broken)]):
            model(tokens)
    with pytest.raises(ArithmeticError, match="on purpose"):
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_pattern", broken)])
    assert np.array_equal(model(tokens), clean)


def test_hooks_scope_applies_inside_only(runs):
    model = gradlab.load(runs["induction"])
    tokens = np.arange(1, 9)
    clean = model(tokens)
    with model.hooks(fwd_hooks=[("blocks.1.attn.hook_z", lambda z, h: np.zeros_like(z))]):
        assert not np.array_equal(model(tokens), clean)
    assert np.array_equal(model(tokens), clean)


def test_unknown_point_is_a_key_error_naming_the_closest(runs):
    model = gradlab.load(runs["induction"])
    with pytest.raises(KeyError, match="blocks.0.attn.hook_pattern"):
        model.run_with_cache(np.arange(1, 5), names_filter="blocks.0.attn.hook_patern")
    with pytest.raises(ValueError, match="shape|\\[1,"):
        model.run_with_hooks(np.arange(1, 5),
                             fwd_hooks=[("blocks.0.hook_resid_pre", lambda a, h: a[:, :2])])
