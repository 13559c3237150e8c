"""model.intervene: the command line's --intervene specs on Python's runs, undone on leaving the
block (an exception too): a zeroed point, a resampled one, a replaced parameter restored bit for
bit, and the command line's errors."""

import numpy as np
import pytest

import gradlab

TOKENS = np.array([[1, 5, 6, 7, 5, 6, 7, 9]])
POINT = "blocks.0.hook_resid_pre"


def test_zero_changes_the_runs_inside_the_block_only(runs):
    model = gradlab.load(runs["induction"])
    intact = model(TOKENS)
    with model.intervene(POINT + "=zero"):
        _, cache = model.run_with_cache(TOKENS, names_filter=POINT)
        assert not cache[POINT].any()
        assert not np.allclose(model(TOKENS), intact)
    assert np.array_equal(model(TOKENS), intact)


def test_resample_takes_a_held_out_sequences_activation(runs):
    model = gradlab.load(runs["induction"])
    with model.intervene([POINT + "=resample"]):
        _, first = model.run_with_cache(TOKENS, names_filter=POINT)
        _, other = model.run_with_cache(TOKENS[:, ::-1].copy(), names_filter=POINT)
    _, intact = model.run_with_cache(TOKENS, names_filter=POINT)
    # Both prompts read held-out sequence 1 there, whatever their own tokens.
    assert np.array_equal(first[POINT], other[POINT])
    assert not np.allclose(first[POINT], intact[POINT])


def test_a_parameter_is_restored_on_exit_and_on_an_exception(runs):
    model = gradlab.load(runs["induction"])
    loaded = {n: p.copy() for n, p in model.named_parameters().items()}
    # Two parameters of one shape: the first replaced by the second's values, read from the
    # checkpoint itself (its parameters are the datasets /model/NAME).
    name, donor = next((a, b) for a in loaded for b in loaded
                       if a != b and loaded[a].shape == loaded[b].shape
                       and not np.array_equal(loaded[a], loaded[b]))
    intact = model(TOKENS)
    spec = f"{name}=value:{runs['induction']}#model/{donor}"
    with model.intervene(spec):
        assert np.array_equal(model.named_parameters()[name], loaded[donor])
        assert not np.allclose(model(TOKENS), intact)
    with pytest.raises(RuntimeError, match="inside"):
        with model.intervene(spec):
            raise RuntimeError("inside")
    for n, p in model.named_parameters().items():
        assert np.array_equal(p, loaded[n]), n
    assert np.array_equal(model(TOKENS), intact)


def test_bad_specs_raise_the_command_lines_errors(runs):
    model = gradlab.load(runs["induction"])
    with pytest.raises(ValueError, match="unknown kind 'halve'"):
        with model.intervene(POINT + "=halve"):
            pass
    with pytest.raises(ValueError, match="neither a hook point nor a parameter"):
        with model.intervene("blocks.0.hook_resid_pro=zero"):
            pass
