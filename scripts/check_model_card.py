#!/usr/bin/python3
"""Checks that docs/model.md is enough to rebuild gradlab's models from a checkpoint.

For each of a few small configurations (decoder-only pre-LN with learned positions, decoder-only
post-LN with sinusoidal positions and grouped K/V heads, decoder-only multi-query on recall,
encoder-decoder pre-LN and post-LN), the script

1. trains a checkpoint with `gradlab train` (a few dozen steps: enough to move the weights);
2. builds the model in PyTorch, in float64, from the checkpoint's /config and /model alone,
   following docs/model.md and nothing else (no gradlab code): every parameter is looked up by
   the name and shape the card gives, and the file must hold exactly those;
3. for several valid prompts, runs `gradlab predict` and `gradlab attention` and compares
   - the greedy answer with the PyTorch model's greedy answer, exactly;
   - every attention dataset (self-attention, and cross-attention when the file has
     decoder_cross_layer_<i> datasets) with the PyTorch model's weights, to 1e-5 absolute;
   - the token datasets and the query_tokens / key_tokens attributes with what the card says
     the model read (docs/attention-file.md).

It prints one row per configuration and exits 1 on any mismatch (2 if gradlab itself fails).
`--inject MISTAKE` plants a known mistake in the PyTorch model, to see that the check fails.

    scripts/check_model_card.py [--gradlab build/gradlab] [--scratch DIR]

Needs torch, h5py and numpy. Runs in well under two minutes on one core.
"""

import argparse
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import torch

DTYPE = torch.float64
ATTENTION_TOL = 1e-5
IGNORE = -100
SEP = 0
PROMPTS_PER_CASE = 6

MISTAKES = {
    "softmax-axis": "softmax along the queries instead of the keys",
    "unscaled": "attention scores not divided by sqrt(D)",
    "kv-grouping": "query head h reads K/V head h mod KV instead of floor(h / G)",
    "tanh-gelu": "tanh approximation of GELU",
    "sinusoid-swap": "cos on even columns, sin on odd ones",
    "embed-scale": "token embedding scaled by sqrt(C)",
    "no-final-ln": "ln_f left out",
    "ln-placement": "pre-LN blocks regardless of pre-norm",
}

# (name, gradlab train flags). Small widths so that training and checking stay fast; C = 15
# (odd, H = 3, D = 5) exercises the sinusoidal formula's column pairing.
CASES = [
    ("dec-preln-learned", ["--model", "decoder", "--task", "copy", "--length", "6",
                           "--d-model", "32", "--heads", "4", "--layers", "2", "--d-ff", "64"]),
    ("dec-postln-sin-gqa", ["--model", "decoder", "--task", "sort", "--length", "5",
                            "--d-model", "32", "--heads", "4", "--kv-heads", "2",
                            "--layers", "2", "--d-ff", "48", "--pre-norm=0",
                            "--learned-positions=0"]),
    ("dec-preln-mqa-recall", ["--model", "decoder", "--task", "recall", "--length", "3",
                              "--d-model", "24", "--heads", "4", "--kv-heads", "1",
                              "--layers", "3", "--d-ff", "40"]),
    ("s2s-preln-learned-gqa", ["--model", "seq2seq", "--task", "reverse", "--length", "5",
                               "--d-model", "32", "--heads", "4", "--kv-heads", "2",
                               "--layers", "2", "--d-ff", "64"]),
    ("s2s-postln-sin-odd", ["--model", "seq2seq", "--task", "recall", "--length", "3",
                            "--symbols", "8", "--d-model", "15", "--heads", "3",
                            "--layers", "2", "--d-ff", "30", "--pre-norm=0",
                            "--learned-positions=0"]),
]
TRAIN_FLAGS = ["--steps", "60", "--warmup", "10", "--eval-every", "60", "--eval-size", "32",
               "--batch-size", "32", "--target-exact-match", "0", "--threads", "1"]


class GradlabError(Exception):
    pass


def run_gradlab(binary, args):
    try:
        result = subprocess.run([binary] + args, capture_output=True, text=True)
    except OSError as e:
        raise GradlabError(f"cannot run {binary}: {e}") from e
    if result.returncode != 0:
        raise GradlabError(f"gradlab {' '.join(args)} failed ({result.returncode}):\n"
                           f"{result.stdout}{result.stderr}")
    return result.stdout


# --- The model, as docs/model.md describes it ----------------------------------------------


def plain(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic):
        return value.item()
    return value


class CardModel:
    """Either model of docs/model.md, built from a checkpoint's /config and /model."""

    def __init__(self, path, mistake=None):
        self.mistake = mistake
        with h5py.File(path, "r") as f:
            cfg = {k: plain(v) for k, v in f["config"].attrs.items()}
            stored = {k: f["model"][k][()] for k in f["model"]}
        # Section 1: sizes.
        self.kind = cfg["model"]
        self.task = cfg["task"]
        self.n, self.N = cfg["length"], cfg["symbols"]
        self.C, self.H, self.L, self.F = cfg["d-model"], cfg["heads"], cfg["layers"], cfg["d-ff"]
        self.KV = cfg["kv-heads"] or self.H
        self.D = self.C // self.H
        self.G = self.H // self.KV
        self.pre_norm = bool(cfg["pre-norm"])
        self.learned = bool(cfg["learned-positions"])
        self.V = self.N + 2
        # Section 3: prompt and answer lengths.
        self.P = 2 * self.n + 1 if self.task == "recall" else self.n
        self.A = 1 if self.task == "recall" else self.n
        self.T_max = self.P + 1 + self.A if self.kind == "decoder" else max(self.P, self.A)
        # Section 6: names and shapes, exactly.
        expected = self.parameter_shapes()
        missing = sorted(set(expected) - set(stored))
        extra = sorted(set(stored) - set(expected))
        if missing or extra:
            raise AssertionError(f"{path}: parameters missing {missing}, unexpected {extra}")
        for name, shape in expected.items():
            if tuple(stored[name].shape) != shape:
                raise AssertionError(f"{path}: {name} has shape {stored[name].shape}, "
                                     f"the card says {shape}")
        if list(stored) != list(expected):
            raise AssertionError(f"{path}: parameters are not stored in the card's order")
        self.p = {k: torch.from_numpy(np.asarray(v)).to(DTYPE) for k, v in stored.items()}

    def parameter_shapes(self):
        C, F, V, KD = self.C, self.F, self.V, self.KV * self.D
        shapes = {"embed.token_embedding.weight": (V, C)}
        if self.learned:
            shapes["embed.position_embedding.weight"] = (self.T_max, C)

        def norm(prefix):
            shapes[prefix + ".weight"] = (C,)
            shapes[prefix + ".bias"] = (C,)

        def attention(prefix):
            for proj, out in (("q_proj", C), ("k_proj", KD), ("v_proj", KD)):
                shapes[f"{prefix}.{proj}.weight"] = (out, C)
                shapes[f"{prefix}.{proj}.bias"] = (out,)
            shapes[prefix + ".out_proj.weight"] = (C, C)
            shapes[prefix + ".out_proj.bias"] = (C,)

        def block(prefix, cross):
            norm(prefix + ".ln1")
            attention(prefix + ".attn")
            if cross:
                norm(prefix + ".ln_cross")
                attention(prefix + ".cross_attn")
            norm(prefix + ".ln2")
            shapes[prefix + ".ffn.fc1.weight"] = (F, C)
            shapes[prefix + ".ffn.fc1.bias"] = (F,)
            shapes[prefix + ".ffn.fc2.weight"] = (C, F)
            shapes[prefix + ".ffn.fc2.bias"] = (C,)

        if self.kind == "decoder":
            for i in range(self.L):
                block(f"blocks.{i}", False)
        else:
            for i in range(self.L):
                block(f"encoder.{i}", False)
            norm("encoder_ln")
            for i in range(self.L):
                block(f"decoder.{i}", True)
        norm("ln_f")
        shapes["head.weight"] = (V, C)
        shapes["head.bias"] = (V,)
        return shapes

    # Section 5: the pieces.

    def linear(self, x, name):
        return x @ self.p[name + ".weight"].T + self.p[name + ".bias"]

    def layer_norm(self, x, name):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased
        return (x - mean) / torch.sqrt(var + 1e-5) * self.p[name + ".weight"] + self.p[name + ".bias"]

    def gelu(self, x):
        if self.mistake == "tanh-gelu":
            return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
        return x * 0.5 * (1 + torch.erf(x / math.sqrt(2)))

    def positions(self, length):
        if length > self.T_max:
            raise AssertionError(f"sequence of {length} tokens exceeds T_max = {self.T_max}")
        if self.learned:
            return self.p["embed.position_embedding.weight"][:length]
        t = torch.arange(length, dtype=DTYPE)[:, None]
        i = torch.arange(self.C)[None, :]
        angle = t / torch.pow(10000.0, (i - i % 2).to(DTYPE) / self.C)
        even = i % 2 == 0
        if self.mistake == "sinusoid-swap":
            even = ~even
        table = torch.where(even, torch.sin(angle), torch.cos(angle))
        return table.to(torch.float32).to(DTYPE)  # computed in float64, used in float32

    def embed(self, tokens):
        tok = self.p["embed.token_embedding.weight"][torch.tensor(tokens)]
        if self.mistake == "embed-scale":
            tok = tok * math.sqrt(self.C)
        return tok + self.positions(len(tokens))

    def attention(self, name, xq, xkv, causal):
        """Returns (output [Tq, C], weights [H, Tq, Tk])."""
        H, KV, D, G = self.H, self.KV, self.D, self.G
        tq, tk = xq.shape[0], xkv.shape[0]
        q = self.linear(xq, name + ".q_proj").view(tq, H, D).transpose(0, 1)    # [H, Tq, D]
        k = self.linear(xkv, name + ".k_proj").view(tk, KV, D).transpose(0, 1)  # [KV, Tk, D]
        v = self.linear(xkv, name + ".v_proj").view(tk, KV, D).transpose(0, 1)
        group = torch.arange(H) // G
        if self.mistake == "kv-grouping":
            group = torch.arange(H) % KV
        k, v = k[group], v[group]                                               # [H, Tk, D]
        scores = q @ k.transpose(-1, -2)
        if self.mistake != "unscaled":
            scores = scores / math.sqrt(D)
        if causal:
            future = torch.arange(tk)[None, :] > torch.arange(tq)[:, None]
            scores = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(scores, dim=-2 if self.mistake == "softmax-axis" else -1)
        heads = weights @ v                                                     # [H, Tq, D]
        out = self.linear(heads.transpose(0, 1).reshape(tq, H * D), name + ".out_proj")
        return out, weights

    def block(self, name, x, causal, memory=None):
        """Returns (x, self-attention weights, cross-attention weights or None)."""
        pre = self.pre_norm or self.mistake == "ln-placement"
        cross_w = None

        def sublayer(h, norm, body):
            if pre:
                return h + body(self.layer_norm(h, norm))
            return self.layer_norm(h + body(h), norm)

        found = {}

        def self_attn(h):
            out, found["self"] = self.attention(name + ".attn", h, h, causal)
            return out

        def cross_attn(h):
            out, found["cross"] = self.attention(name + ".cross_attn", h, memory, False)
            return out

        x = sublayer(x, name + ".ln1", self_attn)
        if memory is not None:
            x = sublayer(x, name + ".ln_cross", cross_attn)
            cross_w = found["cross"]
        x = sublayer(x, name + ".ln2",
                     lambda h: self.linear(self.gelu(self.linear(h, name + ".ffn.fc1")),
                                           name + ".ffn.fc2"))
        return x, found["self"], cross_w

    def head(self, x):
        if self.mistake != "no-final-ln":
            x = self.layer_norm(x, "ln_f")
        return self.linear(x, "head")

    # The two models.

    def decoder_forward(self, tokens):
        """Decoder-only: logits [T, V] and the self-attention weights of every block."""
        x = self.embed(tokens)
        weights = []
        for i in range(self.L):
            x, w, _ = self.block(f"blocks.{i}", x, causal=True)
            weights.append(w)
        return self.head(x), weights

    def encode(self, source):
        x = self.embed(source)
        weights = []
        for i in range(self.L):
            x, w, _ = self.block(f"encoder.{i}", x, causal=False)
            weights.append(w)
        return self.layer_norm(x, "encoder_ln"), weights

    def decode(self, memory, target_in):
        y = self.embed(target_in)
        self_w, cross_w = [], []
        for i in range(self.L):
            y, w, c = self.block(f"decoder.{i}", y, causal=True, memory=memory)
            self_w.append(w)
            cross_w.append(c)
        return self.head(y), self_w, cross_w

    # Section 7: greedy decoding.

    @staticmethod
    def first_argmax(row):
        """(token, gap to the runner-up): the first maximum wins a tie."""
        row = row.tolist()
        best = 0
        for v in range(1, len(row)):
            if row[v] > row[best]:
                best = v
        rest = [x for v, x in enumerate(row) if v != best]
        return best, row[best] - max(rest)

    def greedy(self, prompt):
        """(answer, smallest top-two logit gap over the steps)."""
        gaps = []
        if self.kind == "decoder":
            seq = list(prompt) + [SEP]
            for _ in range(self.A):
                logits, _ = self.decoder_forward(seq)
                token, gap = self.first_argmax(logits[-1])
                seq.append(token)
                gaps.append(gap)
            return seq[len(prompt) + 1:], min(gaps)
        memory, _ = self.encode(prompt)
        tgt = [SEP]
        for _ in range(self.A):
            logits, _, _ = self.decode(memory, tgt)
            token, gap = self.first_argmax(logits[-1])
            tgt.append(token)
            gaps.append(gap)
        return tgt[1:], min(gaps)

    # Section 8: what `gradlab attention` records.

    def attention_record(self, prompt, answer):
        """{dataset name: (weights [H, Tq, Tk], query tokens, key tokens)} and the tokens."""
        if self.kind == "decoder":
            inputs = list(prompt) + [SEP] + list(answer[:-1])
            _, weights = self.decoder_forward(inputs)
            record = {f"layer_{i}": (w, inputs, inputs) for i, w in enumerate(weights)}
            return record, {"inputs": inputs, "answer": list(answer)}
        source = list(prompt)
        inputs = [SEP] + list(answer[:-1])
        memory, enc_w = self.encode(source)
        _, self_w, cross_w = self.decode(memory, inputs)
        record = {f"encoder_layer_{i}": (w, source, source) for i, w in enumerate(enc_w)}
        record.update({f"decoder_layer_{i}": (w, inputs, inputs) for i, w in enumerate(self_w)})
        record.update({f"decoder_cross_layer_{i}": (w, inputs, source)
                       for i, w in enumerate(cross_w)})
        return record, {"inputs": inputs, "answer": list(answer), "source": source}


# --- Prompts (docs/model.md, section 3) -----------------------------------------------------


def prompts(model, count, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        if model.task == "recall":
            keys = rng.sample(range(1, model.N + 1), model.n)
            prompt = []
            for key in keys:
                prompt += [key, rng.randint(1, model.N)]
            out.append(prompt + [rng.choice(keys)])
        else:
            out.append([rng.randint(1, model.N) for _ in range(model.n)])
    return out


# --- Comparison -----------------------------------------------------------------------------


def ints(values):
    return [int(v) for v in np.asarray(values).ravel()]


def compare_attention(path, record, tokens):
    """(max abs difference, number of cross layers checked, problems)."""
    problems = []
    worst = 0.0
    with h5py.File(path, "r") as f:
        names = {k for k, v in f.items() if isinstance(v, h5py.Dataset)}
        for key, want in tokens.items():
            if key not in names:
                problems.append(f"/{key} missing")
            elif ints(f[key][()]) != want:
                problems.append(f"/{key} is {ints(f[key][()])}, the card says {want}")
        weight_names = names - set(tokens)
        expected = set(record)
        cross = {k for k in expected if k.startswith("decoder_cross_layer_")}
        present_cross = cross & weight_names
        if present_cross and present_cross != cross:
            problems.append(f"cross-attention datasets incomplete: {sorted(present_cross)}")
        if not present_cross:
            expected -= cross  # files without cross-attention: check self-attention only
        if weight_names != expected:
            problems.append(f"datasets {sorted(weight_names)}, the card says {sorted(expected)}")
        for name in sorted(expected & weight_names):
            weights, query, keys = record[name]
            data = f[name]
            got = torch.from_numpy(np.asarray(data[()], dtype=np.float64))
            if tuple(got.shape) != tuple(weights.shape):
                problems.append(f"{name}: shape {tuple(got.shape)}, "
                                f"the card says {tuple(weights.shape)}")
                continue
            worst = max(worst, float((got - weights).abs().max()))
            if ints(data.attrs.get("query_tokens", [])) != query:
                problems.append(f"{name}: query_tokens differ from the card")
            if ints(data.attrs.get("key_tokens", [])) != keys:
                problems.append(f"{name}: key_tokens differ from the card")
    if worst > ATTENTION_TOL:
        problems.append(f"attention weights differ by {worst:.3g} > {ATTENTION_TOL:g}")
    return worst, len(present_cross), problems


def check_case(binary, scratch, name, flags, mistake):
    out_dir = os.path.join(scratch, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    run_gradlab(binary, ["train"] + flags + TRAIN_FLAGS + ["--out", out_dir])
    steps = sorted(f for f in os.listdir(out_dir) if f.startswith("step-") and f.endswith(".h5"))
    checkpoint = os.path.join(out_dir, steps[-1])

    try:
        model = CardModel(checkpoint, mistake)
    except AssertionError as e:  # parameters that do not match the card
        return {"case": name, "model": "?", "task": "?", "blocks": "?", "pos": "?",
                "heads": "?", "greedy": 0, "prompts": 0, "attn": math.nan, "cross": 0,
                "gap": math.nan, "problems": [str(e)]}
    row = {"case": name, "model": model.kind, "task": model.task,
           "blocks": "pre-LN" if model.pre_norm else "post-LN",
           "pos": "learned" if model.learned else "sinus",
           "heads": f"{model.H}/{model.KV}", "greedy": 0, "prompts": 0,
           "attn": 0.0, "cross": 0, "gap": math.inf, "problems": []}
    with torch.no_grad():
        for k, prompt in enumerate(prompts(model, PROMPTS_PER_CASE, seed=len(name))):
            text = " ".join(map(str, prompt))
            printed = run_gradlab(binary, ["predict", "--checkpoint", checkpoint,
                                           "--input", text])
            lines = [ln.split() for ln in printed.splitlines() if ln.startswith("output")]
            got = [int(t) for t in lines[0][1:]] if lines else None
            answer, gap = model.greedy(prompt)
            row["prompts"] += 1
            row["gap"] = min(row["gap"], gap)
            if got == answer:
                row["greedy"] += 1
            else:
                row["problems"].append(f"prompt {text}: gradlab {got}, card {answer} "
                                       f"(top-two gap {gap:.2g})")
            att = os.path.join(out_dir, f"attention-{k}.h5")
            run_gradlab(binary, ["attention", "--checkpoint", checkpoint, "--input", text,
                                 "--out", att])
            # The weights are compared on the tokens gradlab read (its own greedy answer), so a
            # greedy mismatch, reported above, does not hide how close the attention is.
            with h5py.File(att, "r") as f:
                file_answer = ints(f["answer"][()]) if "answer" in f else answer
            record, tokens = model.attention_record(prompt, file_answer)
            tokens["answer"] = answer  # /answer must be the card's greedy answer
            worst, cross, problems = compare_attention(att, record, tokens)
            row["attn"] = max(row["attn"], worst)
            row["cross"] = max(row["cross"], cross)
            row["problems"] += [f"prompt {text}: {p}" for p in problems]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gradlab", default="build/gradlab", help="gradlab binary")
    parser.add_argument("--scratch", help="directory for checkpoints and attention files "
                        "(default: a temporary directory, removed afterwards)")
    parser.add_argument("--inject", choices=sorted(MISTAKES),
                        help="plant this mistake in the PyTorch model: the check must fail")
    args = parser.parse_args()
    torch.set_num_threads(1)

    scratch = args.scratch or tempfile.mkdtemp(prefix="check_model_card-")
    os.makedirs(scratch, exist_ok=True)
    if args.inject:
        print(f"injected mistake: {args.inject} ({MISTAKES[args.inject]})")
    start = time.monotonic()
    rows = []
    try:
        for name, flags in CASES:
            rows.append(check_case(args.gradlab, scratch, name, flags, args.inject))
    except GradlabError as e:
        print(e, file=sys.stderr)
        return 2
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)

    header = (f"{'case':<24} {'model':<8} {'task':<8} {'blocks':<8} {'pos':<8} {'H/KV':<5} "
              f"{'greedy':>7} {'max|dattn|':>11} {'cross':>5} {'min gap':>8}  result")
    print(header)
    print("-" * len(header))
    failed = False
    for r in rows:
        ok = not r["problems"]
        failed |= not ok
        cross = str(r["cross"]) if r["model"] == "seq2seq" else "-"
        print(f"{r['case']:<24} {r['model']:<8} {r['task']:<8} {r['blocks']:<8} {r['pos']:<8} "
              f"{r['heads']:<5} {r['greedy']:>3}/{r['prompts']:<3} {r['attn']:>11.2e} "
              f"{cross:>5} {r['gap']:>8.2g}  {'ok' if ok else 'MISMATCH'}")
    for r in rows:
        for p in r["problems"][:5]:
            print(f"{r['case']}: {p}")
        if len(r["problems"]) > 5:
            print(f"{r['case']}: ... and {len(r['problems']) - 5} more")
    print(f"greedy: outputs equal to gradlab predict; max|dattn|: largest attention difference "
          f"(tolerance {ATTENTION_TOL:g}); cross: decoder_cross_layer datasets checked; "
          f"min gap: smallest top-two logit gap of a greedy step. {time.monotonic() - start:.1f} s")
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
