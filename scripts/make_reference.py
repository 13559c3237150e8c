#!/usr/bin/python3
"""Writes tests/fixtures/reference.h5: PyTorch reference values for gradlab's attention tests.

The fixture holds forward outputs, attention weights and gradients of multi-head attention
(self, cross, masked, grouped-query, multi-query) and of a pre-LayerNorm transformer block, so
the C++ tests can check gradlab against PyTorch without needing torch themselves.

Regenerate from the repository root (needs torch, h5py and numpy):

    /usr/bin/python3 scripts/make_reference.py

The output is deterministic: every case draws from its own seeded generator and everything is
computed in float64 and stored as float64 (masks as uint8).

The reference implementation below is written with plain tensor ops so that it follows
gradlab's parameter layout exactly (separate q/k/v projections, grouped-query heads). Before
writing, the script checks every case against torch.nn.MultiheadAttention (outputs, per-head
weights, all gradients; for grouped- and multi-query cases the shared key/value heads are
expanded into a standard MHA and their gradients summed back) and the block against
torch.nn.TransformerEncoderLayer(norm_first=True, activation="gelu"), and stops if anything
differs by more than 1e-10.

Layout (one group per case at the root):

    <case>/                      attributes: kind ("mha" | "block"), num_heads, num_kv_heads,
                                 causal (0/1), self_attention (0/1), d_ff (blocks; else 0)
    <case>/inputs/x              [B, T, C]   self-attention
    <case>/inputs/query          [B, Tq, C]  cross-attention
    <case>/inputs/key_value      [B, Tk, C]  cross-attention (keys and values)
    <case>/inputs/key_padding_mask [B, Tk] uint8, 1 = padding key (masked out); optional
    <case>/inputs/upstream       [B, Tq, C]  cotangent: loss = sum(output * upstream)
    <case>/params/<name>         e.g. q_proj.weight, or attn.q_proj.weight in blocks
    <case>/outputs/output        [B, Tq, C]
    <case>/outputs/attn_weights  [B, H, Tq, Tk] per head (mha cases only)
    <case>/grads/inputs/<name>   gradient of the loss for each input except masks/upstream
    <case>/grads/params/<name>   gradient of the loss for each parameter
"""

import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

DTYPE = torch.float64
LN_EPS = 1e-5
INIT_SCALE = 0.3
TOL = 1e-10

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(REPO_ROOT, "tests", "fixtures", "reference.h5")


# --- Reference implementation (gradlab's semantics, plain ops) ------------------------------


def linear(x, params, name):
    return x @ params[name + ".weight"].T + params[name + ".bias"]


def attention_mask(batch, tq, tk, causal, key_padding_mask):
    """Boolean [B, 1, Tq, Tk] mask, True = masked out."""
    mask = torch.zeros(batch, 1, tq, tk, dtype=torch.bool)
    if causal:
        # Query i may attend key j only if j <= i (also when Tq != Tk).
        i = torch.arange(tq)[:, None]
        j = torch.arange(tk)[None, :]
        mask = mask | (j > i)
    if key_padding_mask is not None:
        mask = mask | key_padding_mask.bool()[:, None, None, :]
    return mask


def mha(query, key_value, params, num_heads, num_kv_heads, causal, key_padding_mask, prefix=""):
    """Returns (output [B, Tq, C], weights [B, H, Tq, Tk])."""
    batch, tq, channels = query.shape
    tk = key_value.shape[1]
    head_dim = channels // num_heads
    q = linear(query, params, prefix + "q_proj")
    k = linear(key_value, params, prefix + "k_proj")
    v = linear(key_value, params, prefix + "v_proj")
    q = q.view(batch, tq, num_heads, head_dim).transpose(1, 2)  # [B, H, Tq, D]
    k = k.view(batch, tk, num_kv_heads, head_dim).transpose(1, 2)  # [B, KV, Tk, D]
    v = v.view(batch, tk, num_kv_heads, head_dim).transpose(1, 2)
    # Query head h uses key/value head h // (H / KV).
    group = num_heads // num_kv_heads
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)  # [B, H, Tq, Tk]
    mask = attention_mask(batch, tq, tk, causal, key_padding_mask)
    if mask.all(dim=-1).any():
        sys.exit("a case has a fully masked attention row; its softmax would be NaN")
    scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, tq, num_heads * head_dim)
    return linear(out, params, prefix + "out_proj"), weights


def block(x, params, num_heads, num_kv_heads, causal, key_padding_mask):
    """Pre-LayerNorm transformer block: x + attn(ln1(x)), then + ffn(ln2(.))."""
    channels = x.shape[-1]
    h = F.layer_norm(x, (channels,), params["ln1.weight"], params["ln1.bias"], LN_EPS)
    attn, _ = mha(h, h, params, num_heads, num_kv_heads, causal, key_padding_mask, "attn.")
    x = x + attn
    h = F.layer_norm(x, (channels,), params["ln2.weight"], params["ln2.bias"], LN_EPS)
    h = F.gelu(linear(h, params, "ffn.fc1"))  # exact erf form
    return x + linear(h, params, "ffn.fc2")


# --- Cases ----------------------------------------------------------------------------------


def mha_param_shapes(channels, num_heads, num_kv_heads, prefix=""):
    head_dim = channels // num_heads
    hd = num_heads * head_dim
    kvd = num_kv_heads * head_dim
    return {
        prefix + "q_proj.weight": (hd, channels),
        prefix + "q_proj.bias": (hd,),
        prefix + "k_proj.weight": (kvd, channels),
        prefix + "k_proj.bias": (kvd,),
        prefix + "v_proj.weight": (kvd, channels),
        prefix + "v_proj.bias": (kvd,),
        prefix + "out_proj.weight": (channels, hd),
        prefix + "out_proj.bias": (channels,),
    }


def block_param_shapes(channels, num_heads, num_kv_heads, d_ff):
    shapes = {"ln1.weight": (channels,), "ln1.bias": (channels,)}
    shapes.update(mha_param_shapes(channels, num_heads, num_kv_heads, "attn."))
    shapes.update({
        "ln2.weight": (channels,),
        "ln2.bias": (channels,),
        "ffn.fc1.weight": (d_ff, channels),
        "ffn.fc1.bias": (d_ff,),
        "ffn.fc2.weight": (channels, d_ff),
        "ffn.fc2.bias": (channels,),
    })
    return shapes


# B, Tq, Tk, C, H (and F) differ from each other within every case, so a swapped axis changes a
# shape instead of hiding. padding: list of (batch element, number of trailing keys padded).
CASES = [
    dict(name="mha_self", kind="mha", B=2, Tq=5, Tk=5, C=12, H=3, KV=3, causal=False,
         self_attention=True, padding=[]),
    dict(name="mha_self_causal_padding", kind="mha", B=2, Tq=5, Tk=5, C=12, H=3, KV=3,
         causal=True, self_attention=True, padding=[(1, 2)]),
    dict(name="mha_cross", kind="mha", B=2, Tq=5, Tk=7, C=12, H=3, KV=3, causal=False,
         self_attention=False, padding=[(0, 1)]),
    dict(name="mha_gqa", kind="mha", B=2, Tq=5, Tk=5, C=12, H=4, KV=2, causal=True,
         self_attention=True, padding=[]),
    dict(name="mha_mqa", kind="mha", B=2, Tq=5, Tk=7, C=12, H=3, KV=1, causal=False,
         self_attention=False, padding=[]),
    dict(name="block_pre_ln_causal", kind="block", B=2, Tq=5, Tk=5, C=12, H=3, KV=3, F=20,
         causal=True, self_attention=True, padding=[(1, 2)]),
]


def make_case(index, spec):
    gen = torch.Generator().manual_seed(1000 + index)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=DTYPE)

    B, Tq, Tk, C = spec["B"], spec["Tq"], spec["Tk"], spec["C"]
    if spec["kind"] == "mha":
        shapes = mha_param_shapes(C, spec["H"], spec["KV"])
    else:
        shapes = block_param_shapes(C, spec["H"], spec["KV"], spec["F"])
    params = {name: (randn(*shape) * INIT_SCALE).requires_grad_() for name, shape in
              shapes.items()}

    if spec["self_attention"]:
        inputs = {"x": randn(B, Tq, C).requires_grad_()}
    else:
        inputs = {"query": randn(B, Tq, C).requires_grad_(),
                  "key_value": randn(B, Tk, C).requires_grad_()}
    key_padding_mask = None
    if spec["padding"]:
        key_padding_mask = torch.zeros(B, Tk, dtype=torch.uint8)
        for b, count in spec["padding"]:
            key_padding_mask[b, Tk - count:] = 1
    upstream = randn(B, Tq, C)

    weights = None
    if spec["kind"] == "mha":
        query = inputs["x"] if spec["self_attention"] else inputs["query"]
        key_value = inputs["x"] if spec["self_attention"] else inputs["key_value"]
        output, weights = mha(query, key_value, params, spec["H"], spec["KV"], spec["causal"],
                              key_padding_mask)
    else:
        output = block(inputs["x"], params, spec["H"], spec["KV"], spec["causal"],
                       key_padding_mask)
    (output * upstream).sum().backward()

    return dict(spec=spec, params=params, inputs=inputs, key_padding_mask=key_padding_mask,
                upstream=upstream, output=output.detach(),
                weights=None if weights is None else weights.detach())


# --- Checks against torch.nn ----------------------------------------------------------------


def torch_mask_args(case):
    spec = case["spec"]
    attn_mask = None
    if spec["causal"]:
        attn_mask = torch.ones(spec["Tq"], spec["Tk"], dtype=torch.bool).triu(1)
    kpm = case["key_padding_mask"]
    return attn_mask, (None if kpm is None else kpm.bool())


def expand_kv(t, num_heads, num_kv_heads):
    """K/V projection rows [KV*D, ...] -> [H*D, ...]: head h gets key/value head h // group."""
    group = num_heads // num_kv_heads
    return t.reshape(num_kv_heads, -1, *t.shape[1:]).repeat_interleave(group, dim=0).reshape(
        -1, *t.shape[1:])


def reduce_kv(t, num_heads, num_kv_heads):
    """Gradient of expand_kv: sums the rows of the heads that share a key/value head."""
    group = num_heads // num_kv_heads
    return t.reshape(num_kv_heads, group, -1, *t.shape[1:]).sum(dim=1).reshape(
        -1, *t.shape[1:])


def load_mha_into(module, params, num_heads, num_kv_heads, prefix=""):
    """Copies separate q/k/v projections into torch's packed in_proj (K/V heads expanded)."""

    def packed(kind):
        q = params[prefix + "q_proj." + kind]
        k = expand_kv(params[prefix + "k_proj." + kind], num_heads, num_kv_heads)
        v = expand_kv(params[prefix + "v_proj." + kind], num_heads, num_kv_heads)
        return torch.cat([q, k, v], dim=0)

    with torch.no_grad():
        module.in_proj_weight.copy_(packed("weight"))
        module.in_proj_bias.copy_(packed("bias"))
        module.out_proj.weight.copy_(params[prefix + "out_proj.weight"])
        module.out_proj.bias.copy_(params[prefix + "out_proj.bias"])


def max_diff(a, b):
    return (a - b).abs().max().item()


def check_against_torch_mha(case):
    """Forward output, per-head weights and all gradients vs torch.nn.MultiheadAttention."""
    spec = case["spec"]
    module = torch.nn.MultiheadAttention(spec["C"], spec["H"], dropout=0.0, batch_first=True,
                                         dtype=DTYPE)
    load_mha_into(module, case["params"], spec["H"], spec["KV"])
    inputs = {k: v.detach().clone().requires_grad_() for k, v in case["inputs"].items()}
    query = inputs["x"] if spec["self_attention"] else inputs["query"]
    key_value = inputs["x"] if spec["self_attention"] else inputs["key_value"]
    attn_mask, kpm = torch_mask_args(case)
    output, weights = module(query, key_value, key_value, key_padding_mask=kpm,
                             attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
    (output * case["upstream"]).sum().backward()

    diffs = {
        "output": max_diff(output, case["output"]),
        "attn_weights": max_diff(weights, case["weights"]),
    }
    diffs.update({"grad " + k: max_diff(v.grad, case["inputs"][k].grad)
                  for k, v in inputs.items()})
    p = case["params"]
    for kind in ("weight", "bias"):
        grads = module.in_proj_weight.grad if kind == "weight" else module.in_proj_bias.grad
        q_grad, k_grad, v_grad = grads.split([spec["C"]] * 3, dim=0)
        diffs["grad q_proj." + kind] = max_diff(q_grad, p["q_proj." + kind].grad)
        for name, g in (("k_proj.", k_grad), ("v_proj.", v_grad)):
            diffs["grad " + name + kind] = max_diff(reduce_kv(g, spec["H"], spec["KV"]),
                                                    p[name + kind].grad)
    diffs["grad out_proj.weight"] = max_diff(module.out_proj.weight.grad,
                                             p["out_proj.weight"].grad)
    diffs["grad out_proj.bias"] = max_diff(module.out_proj.bias.grad, p["out_proj.bias"].grad)
    report(spec["name"], "torch.nn.MultiheadAttention", diffs)


def check_against_torch_block(case):
    """Output and all gradients vs torch.nn.TransformerEncoderLayer(norm_first=True)."""
    spec = case["spec"]
    layer = torch.nn.TransformerEncoderLayer(spec["C"], spec["H"], dim_feedforward=spec["F"],
                                             dropout=0.0, activation="gelu",
                                             layer_norm_eps=LN_EPS, batch_first=True,
                                             norm_first=True, dtype=DTYPE)
    p = case["params"]
    load_mha_into(layer.self_attn, p, spec["H"], spec["KV"], "attn.")
    pairs = {"ln1": layer.norm1, "ln2": layer.norm2, "ffn.fc1": layer.linear1,
             "ffn.fc2": layer.linear2}
    with torch.no_grad():
        for name, mod in pairs.items():
            mod.weight.copy_(p[name + ".weight"])
            mod.bias.copy_(p[name + ".bias"])
    x = case["inputs"]["x"].detach().clone().requires_grad_()
    attn_mask, kpm = torch_mask_args(case)
    output = layer(x, src_mask=attn_mask, src_key_padding_mask=kpm)
    (output * case["upstream"]).sum().backward()

    diffs = {"output": max_diff(output, case["output"]),
             "grad x": max_diff(x.grad, case["inputs"]["x"].grad)}
    for name, mod in pairs.items():
        diffs["grad " + name + ".weight"] = max_diff(mod.weight.grad, p[name + ".weight"].grad)
        diffs["grad " + name + ".bias"] = max_diff(mod.bias.grad, p[name + ".bias"].grad)
    in_w = torch.cat([p["attn." + n + "_proj.weight"].grad for n in ("q", "k", "v")], dim=0)
    diffs["grad attn.in_proj_weight"] = max_diff(layer.self_attn.in_proj_weight.grad, in_w)
    diffs["grad attn.out_proj.weight"] = max_diff(layer.self_attn.out_proj.weight.grad,
                                                  p["attn.out_proj.weight"].grad)
    report(spec["name"], "torch.nn.TransformerEncoderLayer", diffs)


def report(case_name, against, diffs):
    worst = max(diffs.values())
    print(f"{case_name} vs {against}: max abs difference {worst:.3e}")
    for key, value in diffs.items():
        print(f"    {key:28s} {value:.3e}")
    if not worst <= TOL:  # also catches NaN
        sys.exit(f"{case_name}: reference disagrees with {against} ({worst:.3e} > {TOL:g})")


# --- Writing --------------------------------------------------------------------------------


def write_case(root, case):
    spec = case["spec"]
    group = root.create_group(spec["name"])
    group.attrs["kind"] = np.bytes_(spec["kind"])
    group.attrs["num_heads"] = np.int64(spec["H"])
    group.attrs["num_kv_heads"] = np.int64(spec["KV"])
    group.attrs["causal"] = np.int64(int(spec["causal"]))
    group.attrs["self_attention"] = np.int64(int(spec["self_attention"]))
    group.attrs["d_ff"] = np.int64(spec.get("F", 0))

    def put(path, tensor, dtype=np.float64):
        group.create_dataset(path, data=tensor.detach().numpy().astype(dtype))

    for name, value in case["inputs"].items():
        put("inputs/" + name, value)
    if case["key_padding_mask"] is not None:
        put("inputs/key_padding_mask", case["key_padding_mask"], np.uint8)
    put("inputs/upstream", case["upstream"])
    for name, value in case["params"].items():
        put("params/" + name, value)
    put("outputs/output", case["output"])
    if case["weights"] is not None:
        put("outputs/attn_weights", case["weights"])
    for name, value in case["inputs"].items():
        put("grads/inputs/" + name, value.grad)
    for name, value in case["params"].items():
        put("grads/params/" + name, value.grad)


def main():
    torch.manual_seed(0)  # nothing below uses the global generator; set for good measure
    cases = [make_case(i, spec) for i, spec in enumerate(CASES)]
    by_name = {case["spec"]["name"]: case for case in cases}
    for name in ("mha_self", "mha_self_causal_padding", "mha_cross", "mha_gqa", "mha_mqa"):
        check_against_torch_mha(by_name[name])
    check_against_torch_block(by_name["block_pre_ln_causal"])

    os.makedirs(os.path.dirname(OUTPUT), exist_ok=True)
    with h5py.File(OUTPUT, "w") as root:
        for case in cases:
            write_case(root, case)
    print(f"wrote {os.path.relpath(OUTPUT, REPO_ROOT)} ({os.path.getsize(OUTPUT)} bytes)")


if __name__ == "__main__":
    main()
