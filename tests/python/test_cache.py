"""The cache's residual-stream helpers: each against the raw cache entries, the parts summing to
the stream and through the frozen final norm and W_U to the logits (1e-12 in float64, 1e-5 in
float32), the fold_ln view's same numbers, and a post-norm model refused."""

import numpy as np
import pytest

import gradlab
from conftest import gradlab as run_cli

TOKENS = np.array([[1, 5, 6, 7, 5, 6, 7], [2, 3, 4, 2, 3, 4, 2]])
SOURCE = np.array([[1, 2, 3, 4, 1], [4, 3, 2, 1, 2]])


def cached(runs, name, dtype="float64"):
    model = gradlab.load(runs[name]).to(dtype)
    if name == "text":
        tokens = np.array([model.to_tokens("the cat sat")[0], model.to_tokens("on the mat.")[0]])
        logits, cache = model.run_with_cache(tokens)
    elif name == "seq2seq":
        logits, cache = model.run_with_cache(TOKENS[:, :4] % 5, source=SOURCE % 5)
    else:
        logits, cache = model.run_with_cache(TOKENS)
    return model, logits, cache


def relative(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def final_point(name, model):
    stack = "decoder" if name == "seq2seq" else "blocks"
    return f"{stack}.{model.cfg['layers'] - 1}.hook_resid_post"


@pytest.mark.parametrize("name", ["induction", "seq2seq", "text"])
@pytest.mark.parametrize("dtype,tolerance", [("float64", 1e-12), ("float32", 1e-5)])
def test_the_parts_sum_to_the_stream_and_through_the_norm_to_the_logits(runs, name, dtype,
                                                                        tolerance):
    model, logits, cache = cached(runs, name, dtype)
    parts = cache.decompose_resid()
    assert parts.dtype == np.dtype(dtype)
    assert relative(parts.sum(0), cache[final_point(name, model)]) < tolerance
    normed, labels = cache.decompose_resid(apply_ln=True, return_labels=True)
    bias = cache.unembed_bias()
    vocab = logits.shape[-1]
    summed = np.stack([cache.logit_attrs(normed, v).sum(0) for v in range(vocab)], -1)
    if bias is not None:
        summed = summed + bias
    assert relative(summed, logits) < tolerance
    assert (labels[-1] == "ln_final_bias") == (name != "induction")  # induction: no norm


def test_a_logit_difference_at_a_position(runs):
    model, logits, cache = cached(runs, "text")
    normed = cache.decompose_resid(apply_ln=True)
    answer, other = np.array([3, 4]), np.array([1, 1])
    attrs = cache.logit_attrs(normed, answer, incorrect_tokens=other, pos_slice=-1)  # [N, B]
    assert attrs.shape == (normed.shape[0], 2)
    bias = cache.unembed_bias()
    rows = np.arange(2)
    expected = logits[rows, -1, answer] - logits[rows, -1, other]
    got = attrs.sum(0) + bias[answer] - bias[other]
    assert np.abs(got - expected).max() < 1e-12 * np.abs(expected).max()
    # Tokens per position [B, T], and a tuple of positions.
    per_position = cache.logit_attrs(normed, np.full(TOKENS.shape[:1] + (normed.shape[2],), 3))
    assert per_position.shape == normed.shape[:3]
    assert np.allclose(cache.logit_attrs(normed, 3, pos_slice=(1, 3)), per_position[:, :, 1:3],
                       rtol=0, atol=1e-12)


def test_folding_the_norm_gives_the_same_parts_logits(runs):
    _, logits, cache = cached(runs, "text")
    plain, labels = cache.decompose_resid(apply_ln=True, return_labels=True)
    folded_cache = cache.with_fold_ln()
    folded, folded_labels = folded_cache.decompose_resid(apply_ln=True, return_labels=True)
    assert labels == folded_labels + ["ln_final_bias"]
    for token in (0, 3):
        a = cache.logit_attrs(plain, token)
        b = folded_cache.logit_attrs(folded, token)
        assert np.abs(a[:-1] - b).max() < 1e-12 * np.abs(b).max()
        # The folded b_U holds the norm's bias through W_U.
        assert np.allclose(a[-1] + cache.unembed_bias()[token],
                           folded_cache.unembed_bias()[token], rtol=0, atol=1e-12)


def test_apply_ln_to_stack_of_the_whole_stream_is_the_norm(runs):
    model, _, cache = cached(runs, "text")
    resid = cache[final_point("text", model)]
    bias = model.named_parameters()["ln_f.bias"]
    normed = cache.apply_ln_to_stack(resid[None])[0] + bias
    assert relative(normed, cache["ln_f.hook_normalized"]) < 1e-12
    last = cache.apply_ln_to_stack(resid[None, :, -1], pos_slice=-1)[0] + bias
    assert relative(last, cache["ln_f.hook_normalized"][:, -1]) < 1e-12


@pytest.mark.parametrize("name", ["induction", "seq2seq"])
def test_stack_activation_and_accumulated_resid_are_the_cache_entries(runs, name):
    model, _, cache = cached(runs, name)
    stack = "decoder" if name == "seq2seq" else "blocks"
    layers = model.cfg["layers"]
    post = cache.stack_activation("hook_resid_post")
    assert post.shape[0] == layers
    for layer in range(layers):
        assert np.array_equal(post[layer], cache[f"{stack}.{layer}.hook_resid_post"])
    resid, labels = cache.accumulated_resid(incl_mid=True, return_labels=True)
    expected = []
    for layer in range(layers):
        expected += [f"{layer}_pre", f"{layer}_mid"]
    assert labels == expected + ["final_post"]
    for i, label in enumerate(labels[:-1]):
        layer, where = label.split("_")
        assert np.array_equal(resid[i], cache[f"{stack}.{layer}.hook_resid_{where}"])
    assert np.array_equal(resid[-1], cache[final_point(name, model)])
    first, labels = cache.accumulated_resid(layer=1, return_labels=True)
    if layers > 1:
        assert labels == ["0_pre", "1_pre"]
        assert np.array_equal(first[1], cache[f"{stack}.1.hook_resid_pre"])
    else:  # the stream entering layer 1 is the final norm's input
        assert labels == ["0_pre", "final_post"]


@pytest.mark.parametrize("name", ["induction", "seq2seq"])
def test_decompose_resid_and_stack_head_results_are_the_cache_entries(runs, name):
    model, _, cache = cached(runs, name)
    stack = "decoder" if name == "seq2seq" else "blocks"
    parts, labels = cache.decompose_resid(return_labels=True)
    assert labels[:2] == ["embed", "pos_embed"]
    assert np.array_equal(parts[0], cache["embed.hook_token"])
    assert np.array_equal(parts[1], np.broadcast_to(cache["embed.hook_position"], parts[1].shape))
    assert np.array_equal(parts[labels.index("0_attn_out")], cache[f"{stack}.0.hook_attn_out"])
    if name == "seq2seq":
        assert np.array_equal(parts[labels.index("0_cross_attn_out")],
                              cache[f"{stack}.0.hook_cross_attn_out"])
        assert np.array_equal(parts[labels.index("0_mlp_out")], cache[f"{stack}.0.hook_mlp_out"])
    attn_only = cache.decompose_resid(mode="attn", incl_embeds=False, return_labels=True)[1]
    assert all("attn_out" in label for label in attn_only)
    with pytest.raises(ValueError, match="mode must be"):
        cache.decompose_resid(mode="heads")

    heads, labels = cache.stack_head_results(return_labels=True)
    result = cache[f"{stack}.0.attn.hook_result"]  # [B, T, H, C]
    count = result.shape[2]
    assert labels[:count] == [f"L0H{h}" for h in range(count)]
    for h in range(count):
        assert np.array_equal(heads[h], result[:, :, h])
    # One layer's heads and its output bias make its attention output.
    bias = model.named_parameters()[f"{stack}.0.attn.out_proj.bias"]
    assert relative(heads[:count].sum(0) + bias, cache[f"{stack}.0.hook_attn_out"]) < 1e-12
    before_one = cache.stack_head_results(layer=1)
    per_layer = 2 * count if name == "seq2seq" else count
    assert before_one.shape[0] == per_layer


def test_a_missing_point_and_a_post_norm_model_are_refused(runs, tmp_path):
    model = gradlab.load(runs["induction"])
    _, cache = model.run_with_cache(TOKENS, names_filter="blocks.*.hook_resid_post")
    with pytest.raises(KeyError, match="embed.hook_token"):
        cache.decompose_resid()
    run_cli("train", "--task", "copy", "--length", "3", "--d-model", "8", "--heads", "2",
            "--layers", "1", "--d-ff", "8", "--steps", "1", "--eval-every", "1", "--eval-size",
            "8", "--batch-size", "4", "--pre-norm", "false", "--out", tmp_path / "post")
    post = gradlab.load(tmp_path / "post" / "best.h5")
    _, cache = post.run_with_cache(TOKENS[:, :5] % 3)
    with pytest.raises(ValueError, match="post-norm"):
        cache.decompose_resid()
