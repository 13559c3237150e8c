"""gradlab.load and the model: every kind of checkpoint, its configuration, writable
parameters, the loss, text, saving."""

import numpy as np
import pytest

import gradlab


def test_decoder_forward_and_loss(runs):
    model = gradlab.load(runs["induction"])
    assert model.cfg["task"] == "induction" and model.cfg["layers"] == 2
    tokens = np.array([[1, 5, 6, 7, 5, 6, 7], [2, 8, 9, 10, 8, 9, 10]], dtype=np.int32)
    logits = model(tokens)
    assert logits.shape == (2, 7, model.cfg["vocab-size"] if "vocab-size" in model.cfg
                            else logits.shape[2])
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
        -1, keepdims=True)) - logits.max(-1, keepdims=True)
    expected = -np.mean([log_probs[b, t, tokens[b, t + 1]] for b in range(2) for t in range(6)])
    assert model(tokens, return_type="loss") == pytest.approx(expected, rel=1e-5)
    assert np.array_equal(model(tokens[0]), logits[:1])  # one sequence [T]


def test_editing_a_parameter_view_changes_the_model(runs):
    model = gradlab.load(runs["induction"])
    tokens = np.arange(1, 9)
    before = model(tokens)
    params = model.named_parameters()
    assert "blocks.0.attn.q_proj.weight" in params or any("attn" in n for n in params)
    for view in params.values():
        view *= 0.5
    assert not np.array_equal(model(tokens), before)
    for view in params.values():
        view *= 2.0
    assert np.array_equal(model(tokens), before)  # halving and doubling are exact


def test_encoder_decoder_reads_a_source(runs):
    model = gradlab.load(runs["seq2seq"])
    logits = model(np.array([[0, 3, 4]]), source=np.array([[3, 4, 5, 6, 2]]))
    assert logits.shape[:2] == (1, 3)
    assert any(name.startswith("decoder.") for name in model.hook_points())


def test_text_model_tokens_and_generation(runs):
    model = gradlab.load(runs["text"])
    tokens = model.to_tokens("the cat")
    assert model.to_string(tokens) == "the cat"
    assert model(tokens).shape == (1, 7, model.tokenizer.size)
    first = model.generate("the ", max_new_tokens=12, seed=3)
    assert len(first) == 12 and first == model.generate("the ", max_new_tokens=12, seed=3)


def test_save_refuses_to_overwrite_and_round_trips(runs, tmp_path):
    model = gradlab.load(runs["induction"])
    for view in model.named_parameters().values():
        view += 0.25
    path = tmp_path / "edited.h5"
    model.save(path)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        model.save(path)
    model.save(path, overwrite=True)
    tokens = np.arange(1, 9)
    assert np.array_equal(gradlab.load(path)(tokens), model(tokens))
