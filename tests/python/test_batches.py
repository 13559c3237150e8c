"""The batch entry of the Python instruments: prompts of several lengths in batches of one
length, and an instrument's mean over them equal to the mean of the prompts run one by one."""

import numpy as np
import pytest

import gradlab

TEXTS = ["the cat", "the mat", "sat", "on the log", "the dog"]


def answer_logits(model):
    """The logits at each row's last position: [R, V]."""
    return lambda tokens: np.asarray(model(tokens))[:, -1, :]


def test_batches_group_by_length_and_keep_the_prompts_order(runs):
    model = gradlab.load(runs["text"])
    found = list(gradlab.batches(model, TEXTS, batch_size=2))
    assert [list(indices) for indices, _ in found] == [[0, 1], [4], [2], [3]]
    for indices, tokens in found:
        for row, index in enumerate(indices):
            assert list(tokens[row]) == list(model.to_tokens(TEXTS[index])[0])


@pytest.mark.parametrize("batch_size", [1, 2, 32])
def test_the_mean_over_prompts_is_the_mean_of_single_runs(runs, batch_size):
    model = gradlab.load(runs["text"]).to("float64")
    single = np.mean([answer_logits(model)(model.to_tokens(text))[0] for text in TEXTS], axis=0)
    mean = gradlab.mean_over(model, TEXTS, answer_logits(model), batch_size=batch_size)
    np.testing.assert_allclose(mean, single, rtol=0, atol=1e-12)


def test_bad_prompts_and_instruments_are_named(runs):
    model = gradlab.load(runs["text"])
    with pytest.raises(ValueError, match="no prompts"):
        list(gradlab.batches(model, []))
    with pytest.raises(ValueError, match="prompt 1 is not a non-empty list"):
        list(gradlab.batches(model, [[1, 2], []]))
    with pytest.raises(ValueError, match="batch_size 0"):
        list(gradlab.batches(model, TEXTS, batch_size=0))
    whole = lambda tokens: np.asarray(model(tokens))  # [R, T, V]: T differs between batches
    with pytest.raises(ValueError, match="prompt 2 gives rows of"):
        gradlab.mean_over(model, TEXTS, whole)
