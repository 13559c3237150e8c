"""Backward hooks through Python: a doubled gradient doubles exactly the parameter gradients
upstream of its point, a reading hook sees the cache's _grad, in-place edits, hooks() blocks, and
a raising hook's exception reaching the caller with nothing left behind."""

import numpy as np
import pytest

import gradlab

TOKENS = np.array([[1, 5, 6, 7, 8, 5, 6, 7], [1, 9, 3, 4, 2, 9, 3, 4]])


def gradients_of(model, bwd_hooks):
    model.run_with_hooks(TOKENS, bwd_hooks=bwd_hooks, return_type="loss")
    return {name: grad.copy() for name, grad in model.named_gradients().items()}


def passes_on(grad, hook):
    return None


def test_doubling_a_gradient_doubles_exactly_the_parameters_upstream(runs):
    model = gradlab.load(runs["induction"]).to("float64")
    clean = gradients_of(model, [("hook_logits", passes_on)])
    doubled = gradients_of(model, [("blocks.1.hook_resid_pre", lambda grad, hook: grad * 2)])
    sides = {True: 0, False: 0}
    for name, grad in clean.items():
        upstream = name.startswith(("embed.", "blocks.0."))
        assert np.array_equal(doubled[name], grad * 2 if upstream else grad), name
        sides[upstream] += bool(np.any(grad != 0))
    assert sides[True] > 0 and sides[False] > 0  # the comparisons could fail


def test_a_reading_hook_sees_the_cached_gradient(runs):
    model = gradlab.load(runs["induction"]).to("float64")
    for point in ("blocks.0.hook_resid_mid", "blocks.1.attn.hook_pattern", "blocks.0.attn.hook_z"):
        _, cache = model.run_with_cache(TOKENS, names_filter=point, incl_bwd=True)
        seen = []

        def read(grad, hook):
            seen.append((hook.name, grad.copy()))

        model.run_with_hooks(TOKENS, bwd_hooks=[(point, read)])
        assert [name for name, _ in seen] == [point]
        cached = cache[point + "_grad"]
        assert seen[0][1].dtype == cached.dtype and np.array_equal(seen[0][1], cached), point
        assert np.any(cached != 0)


def test_an_edit_in_place_flows_on_like_a_replacement(runs):
    model = gradlab.load(runs["induction"]).to("float64")
    point = "blocks.1.attn.hook_z"

    def zero_head(grad, hook):
        grad[:, :, 2, :] = 0

    def zeroed(grad, hook):
        out = grad.copy()
        out[:, :, 2, :] = 0
        return out

    clean = gradients_of(model, [(point, passes_on)])
    edited = gradients_of(model, [(point, zero_head)])
    replaced = gradients_of(model, [(point, zeroed)])
    assert all(np.array_equal(edited[name], replaced[name]) for name in clean)
    assert any(not np.array_equal(edited[name], clean[name]) for name in clean)


def test_hooks_block_runs_the_backward_pass_inside_only(runs):
    model = gradlab.load(runs["induction"])
    seen = []
    with model.hooks(bwd_hooks=[("blocks.*.hook_resid_pre", lambda g, h: seen.append(h.layer))]):
        loss = model(TOKENS, return_type="loss")
        model.run_with_cache(TOKENS, names_filter="hook_logits")  # no backward: not fired
    assert seen == [1, 0]  # on the way back: the later point first
    assert model(TOKENS, return_type="loss") == loss
    assert seen == [1, 0]


def test_a_raising_backward_hook_reaches_the_caller_and_leaves_nothing(runs):
    model = gradlab.load(runs["induction"]).to("float64")
    clean_logits = model(TOKENS)
    clean = gradients_of(model, [("hook_logits", passes_on)])

    def broken(grad, hook):
        grad[...] = np.nan
        raise ArithmeticError(f"backward hook on {hook.name} failed on purpose")

    with pytest.raises(ArithmeticError, match="blocks.0.hook_resid_mid failed on purpose"):
        model.run_with_hooks(TOKENS, bwd_hooks=[("blocks.0.hook_resid_mid", broken)])
    assert all(not np.any(g) for g in model.named_gradients().values())
    with pytest.raises(ArithmeticError, match="on purpose"):
        with model.hooks(bwd_hooks=[("blocks.1.attn.hook_pattern", broken)]):
            model(TOKENS)
    assert np.array_equal(model(TOKENS), clean_logits)
    again = gradients_of(model, [("hook_logits", passes_on)])
    assert all(np.array_equal(again[name], grad) for name, grad in clean.items())


def test_backward_hook_errors(runs):
    model = gradlab.load(runs["induction"])
    with pytest.raises(ValueError, match=r"backward hook on blocks.0.hook_resid_mid.*\[1,"):
        model.run_with_hooks(TOKENS, bwd_hooks=[("blocks.0.hook_resid_mid",
                                                 lambda g, h: g[:1])])
    with pytest.raises(KeyError, match="closest: blocks.0.hook_resid_mid"):
        model.run_with_hooks(TOKENS, bwd_hooks=[("blocks.0.hook_resid_mdi", passes_on)])
    with pytest.raises(KeyError, match="closest: blocks.0.hook_resid_mid"):
        with model.hooks(bwd_hooks=[("blocks.0.hook_resid_mdi", passes_on)]):
            pass
