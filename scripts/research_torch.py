#!/usr/bin/python3
"""A PyTorch replica of `gradlab train --config FILE` for the research runs: grokking
(configs/grokking.ini, --task modular), multi-query associative recall (configs/mqar.ini) and
induction heads (configs/induction.ini), to compare the speed of whole runs and their curves
with gradlab's (BENCHMARKS.md, "Research runs").

    /usr/bin/python3 scripts/research_torch.py --config configs/mqar.ini \
        [--context 256 --pairs 32 --symbols 512] [--steps N] [--seed S] [--threads 1] \
        [--max-steps N]

What it replicates (the same model, data distribution, optimizer, schedule, evaluation and stop
rule; not the same random draws):
- modular: every pair (a, b) of 0..P-1 is `a+1 b+1 0` -> (a op b) + 1, only the answer after
  the separator 0 scored; a seeded permutation of the P^2 pairs, its first
  round(train-fraction P^2) trained on (all of them each step with batch-size 0), the rest held
  out; every evaluation scores the training set too;
- mqar (Zoology's layout): k1 v1 .. kN vN, keys distinct from 1..V/2-1, values distinct from
  V/2..V-1, then key i again at 2N + 2 g_i with target v_i there, the gaps g_i distinct, drawn
  one after another with weight (g + 1)^(0.01 - 1); every other input uniform over 0..V-1;
  eval-size held-out sequences;
- induction: 0 x1..xL x1..xL, L uniform in [ceil(N/2), N], the x distinct from 1..V, padded to
  2N with V + 1; every next token a target; the held-out losses of the first copy's targets and
  the second's reported apart;
- the decoder-only model: token + learned position embeddings, pre-LN (or post-LN) blocks, norm
  "layer" (LayerNorm eps 1e-5) or "none", attention-only blocks with d-ff 0, exact-erf GELU or
  ReLU, the config's bias and tie-embeddings; init "default" (Xavier-uniform Linears,
  normal(0, 0.02) embeddings, zero biases), "gpt2" or "transformerlens"; attention as one scaled product of the
  stacked q, k, v with the causal mask added (baddbmm), softmax, then the values (torch >= 2:
  scaled_dot_product_attention);
- the loss: the mean cross-entropy over the counted targets;
- AdamW with weight decay on the rank >= 2 parameters only, clip_grad_norm, gradlab's schedule
  (1-based steps: lr * s / warmup during warm-up, then constant or cosine down to min-lr);
- evaluation every eval-every steps and at the last, in chunks of the training batch: loss,
  token accuracy (mqar: answer accuracy), exact match (every counted target of a row right);
  the run stops once held-out exact match reaches target-exact-match (0: never); it fails (exit
  status 1, as gradlab's) at a non-finite loss and, unless stop-on-loss-spike = 0, at a step
  whose loss is more than 4 times its running level and more than 1 above it (gradlab's
  loss-spike rule).

--max-steps N ends the run after N steps whatever its target (for timing a capped run); the
schedule and the last evaluation stay those of the config's steps. Prints one JSON line: the
loop's wall time (evaluations included), the steps run, why it stopped, the step at which each
target (scripts/research_targets.py) was first reached, the last evaluation, the curve (keys as
gradlab's metrics.csv columns) and peak RSS.
"""

import argparse
import json
import math
import resource
import sys
import time

import torch
import torch.nn.functional as F

from research_targets import FINAL, steps_to_targets
from run_config import read_config
from torch_replica import LayerNorm, adamw, initialise, learning_rate, set_threads

IGNORE = -100  # nn::kIgnoreTarget
# gradlab's RunConfig and TaskConfig defaults, for the keys a config file leaves out.
DEFAULTS = {
    "model": "decoder", "d-model": "64", "heads": "4", "kv-heads": "0", "layers": "2",
    "d-ff": "256", "dropout": "0", "pre-norm": "1", "learned-positions": "1",
    "optimizer": "adamw", "lr": "0.003", "beta1": "0.9", "beta2": "0.98", "eps": "1e-08",
    "weight-decay": "0.01", "schedule": "constant", "warmup": "100", "min-lr": "0",
    "batch-size": "64", "steps": "3000", "clip": "1", "eval-every": "50", "eval-size": "512",
    "target-exact-match": "0.99", "seed": "0", "bias": "1", "tie-embeddings": "0",
    "init": "default", "norm": "layer", "activation": "gelu", "stop-on-loss-spike": "1",
    "length": "10", "pairs": "8", "context": "64", "modulus": "113", "operation": "add",
    "train-fraction": "0.3",
}
OPERATIONS = {"add": lambda a, b, p: (a + b) % p, "sub": lambda a, b, p: (a - b) % p,
              "mul": lambda a, b, p: a * b % p}


# --- Data ---------------------------------------------------------------------------------
# Each task: vocab, positions, batch(step) -> (inputs, targets) [B, T], heldout (inputs,
# targets), training_set (or None), parts {name: targets of the held-out set's shape}.

class Modular:
    def __init__(self, cfg, gen):
        p = int(cfg["modulus"])
        self.vocab, self.positions = p + 2, 4  # separator, P numbers, padding; a b = c
        count = p * p
        # llround: half away from zero.
        train = int(math.floor(float(cfg["train-fraction"]) * count + 0.5))
        order = torch.randperm(count, generator=gen)
        a, b = order // p, order % p
        inputs = torch.stack([a + 1, b + 1, torch.zeros_like(a)], 1)  # [P^2, 3]
        targets = torch.full_like(inputs, IGNORE)
        targets[:, 2] = OPERATIONS[cfg["operation"]](a, b, p) + 1
        self.train = (inputs[:train], targets[:train])
        self.heldout = (inputs[train:], targets[train:])
        self.training_set = self.train
        self.parts = {}
        self.batch_size = int(cfg["batch-size"]) or train
        self.full_batch = int(cfg["batch-size"]) == 0
        self.gen = gen

    def batch(self, step):
        if self.full_batch:
            return self.train
        rows = torch.randint(self.train[0].shape[0], (self.batch_size,), generator=self.gen)
        return self.train[0][rows], self.train[1][rows]


class Mqar:
    def __init__(self, cfg, gen, heldout_gen):
        self.context, self.pairs = int(cfg["context"]), int(cfg["pairs"])
        self.vocab = int(cfg.get("symbols", "256"))  # mqar's own default
        self.positions = self.context
        if self.context < 4 * self.pairs or self.vocab < 2 * self.pairs + 2:
            raise SystemExit("research_torch: mqar needs context >= 4 pairs and "
                             "symbols >= 2 pairs + 2")
        self.first_value = self.vocab // 2
        slots = (self.context - 2 * self.pairs) // 2
        self.gap_weights = (torch.arange(slots, dtype=torch.float64) + 1) ** (0.01 - 1)
        self.batch_size = int(cfg["batch-size"])
        self.gen = gen
        self.heldout = self.draw(int(cfg["eval-size"]), heldout_gen)
        self.training_set, self.parts = None, {}

    def draw(self, rows, gen):
        t, n, v, fv = self.context, self.pairs, self.vocab, self.first_value
        inputs = torch.randint(v, (rows, t), generator=gen)
        # n distinct of a pool: the first n of a uniform permutation.
        keys = torch.rand(rows, fv - 1, generator=gen).argsort(1)[:, :n] + 1
        values = torch.rand(rows, v - fv, generator=gen).argsort(1)[:, :n] + fv
        # Weighted draws without replacement, one after another (numpy's choice).
        gaps = torch.multinomial(self.gap_weights.expand(rows, -1), n, replacement=False,
                                 generator=gen)
        inputs[:, 0:2 * n:2] = keys
        inputs[:, 1:2 * n:2] = values
        queries = 2 * n + 2 * gaps
        inputs.scatter_(1, queries, keys)
        targets = torch.full_like(inputs, IGNORE).scatter_(1, queries, values)
        return inputs, targets

    def batch(self, step):
        return self.draw(self.batch_size, self.gen)


class Induction:
    def __init__(self, cfg, gen, heldout_gen):
        self.length, self.symbols = int(cfg["length"]), int(cfg.get("symbols", "10"))
        if self.length < 2 or self.symbols < self.length:
            raise SystemExit("research_torch: induction needs length >= 2 and symbols >= length")
        self.vocab, self.positions = self.symbols + 2, 2 * self.length
        self.batch_size = int(cfg["batch-size"])
        self.gen = gen
        inputs, targets, block = self.draw(int(cfg["eval-size"]), heldout_gen)
        self.heldout = (inputs, targets)
        t = torch.arange(self.positions)
        first = t < block[:, None]  # a row's targets: the first copy's L, then the second's
        self.parts = {"first_copy": targets.where(first, torch.full_like(targets, IGNORE)),
                      "second_copy": targets.where(~first, torch.full_like(targets, IGNORE))}
        self.training_set = None

    def draw(self, rows, gen):
        n, w, pad = self.length, self.positions, self.symbols + 1
        block = torch.randint((n + 1) // 2, n + 1, (rows,), generator=gen)  # L
        symbols = torch.rand(rows, self.symbols, generator=gen).argsort(1)[:, :n] + 1
        # The sequence 0 x1..xL x1..xL in a row of 2N + 2 (the last column takes the unused
        # symbols), padding after it.
        seq = torch.full((rows, w + 2), pad, dtype=torch.long)
        seq[:, 0] = 0
        i = torch.arange(n)
        used = i < block[:, None]
        spare = torch.full_like(symbols, w + 1)
        seq.scatter_(1, torch.where(used, 1 + i, spare), symbols)
        seq.scatter_(1, torch.where(used, 1 + block[:, None] + i, spare), symbols)
        t = torch.arange(w)
        inside = t < 2 * block[:, None]
        inputs = seq[:, :w].where(inside, torch.full_like(seq[:, :w], pad))
        targets = seq[:, 1:w + 1].where(inside, torch.full_like(seq[:, :w], IGNORE))
        return inputs, targets, block

    def batch(self, step):
        inputs, targets, _ = self.draw(self.batch_size, self.gen)
        return inputs, targets


# --- Model --------------------------------------------------------------------------------

def norm(c, kind, bias):
    return LayerNorm(c, bias) if kind == "layer" else None


class Block(torch.nn.Module):
    def __init__(self, c, heads, d_ff, bias, norm_kind, pre_norm, activation):
        super().__init__()
        self.heads, self.pre_norm = heads, pre_norm
        self.activation = F.gelu if activation == "gelu" else F.relu
        self.ln1 = norm(c, norm_kind, bias)
        self.qkv = torch.nn.Linear(c, 3 * c, bias=bias)  # q_proj, k_proj, v_proj stacked
        self.out_proj = torch.nn.Linear(c, c, bias=bias)
        self.ln2 = norm(c, norm_kind, bias) if d_ff > 0 else None
        self.fc1 = torch.nn.Linear(c, d_ff, bias=bias) if d_ff > 0 else None
        self.fc2 = torch.nn.Linear(d_ff, c, bias=bias) if d_ff > 0 else None

    def attention(self, x, causal):
        b, t, c = x.shape
        h, d = self.heads, c // self.heads
        q, k, v = self.qkv(x).split(c, dim=2)
        if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2
            q, k, v = (z.view(b, t, h, d).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, H, T, D]
        else:
            # [B H, T, D] each; the scale and the causal mask (0 or -inf, [T, T]) in one product.
            q, k, v = (z.view(b, t, h, d).transpose(1, 2).reshape(b * h, t, d) for z in (q, k, v))
            scores = torch.baddbmm(causal[:t, :t], q, k.transpose(1, 2), alpha=1 / math.sqrt(d))
            y = (scores.softmax(-1) @ v).view(b, h, t, d)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, c))

    def feed_forward(self, x):
        return self.fc2(self.activation(self.fc1(x)))

    def sublayer(self, x, ln, body):
        if ln is None:
            return x + body(x)
        return x + body(ln(x)) if self.pre_norm else ln(x + body(x))

    def forward(self, x, causal):
        x = self.sublayer(x, self.ln1, lambda h: self.attention(h, causal))
        return x if self.fc1 is None else self.sublayer(x, self.ln2, self.feed_forward)


class DecoderLM(torch.nn.Module):
    def __init__(self, cfg, vocab, positions, gen):
        super().__init__()
        c, heads, layers = int(cfg["d-model"]), int(cfg["heads"]), int(cfg["layers"])
        d_ff, bias, kind = int(cfg["d-ff"]), cfg["bias"] == "1", cfg["norm"]
        for key, ok in (("model", cfg["model"] == "decoder"),
                        ("dropout", float(cfg["dropout"]) == 0),
                        ("kv-heads", int(cfg["kv-heads"]) in (0, heads)),
                        ("learned-positions", cfg["learned-positions"] == "1"),
                        ("norm", kind in ("layer", "none")),
                        ("activation", cfg["activation"] in ("gelu", "relu")),
                        ("init", cfg["init"] in ("default", "gpt2", "transformerlens"))):
            if not ok:
                raise SystemExit(f"research_torch: {key} = {cfg[key]} is not replicated")
        self.token_embedding = torch.nn.Embedding(vocab, c)
        self.position_embedding = torch.nn.Embedding(positions, c)
        self.blocks = torch.nn.ModuleList(
            Block(c, heads, d_ff, bias, kind, cfg["pre-norm"] == "1", cfg["activation"])
            for _ in range(layers))
        self.ln_f = norm(c, kind, bias)
        self.head = None if cfg["tie-embeddings"] == "1" else torch.nn.Linear(c, vocab, bias=bias)
        # -inf where key j comes after query i, else 0.
        self.register_buffer("causal", torch.full((positions, positions), float("-inf")).triu(1),
                             persistent=False)
        initialise(self, cfg["init"], layers, gen)

    def forward(self, inputs):
        t = inputs.shape[1]
        h = self.token_embedding(inputs) + self.position_embedding.weight[:t]
        for block in self.blocks:
            h = block(h, self.causal)
        if self.ln_f is not None:
            h = self.ln_f(h)
        return h @ self.token_embedding.weight.T if self.head is None else self.head(h)


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=IGNORE)


def score(model, inputs, targets, chunk_rows, parts=None):
    """Loss, token accuracy and exact match of a set, in chunks; each part's loss from the
    same logits."""
    counted = correct = exact = 0
    loss_sum = 0.0
    part_sums = {name: [0.0, 0] for name in parts or {}}
    with torch.no_grad():
        for i in range(0, inputs.shape[0], chunk_rows):
            x, y = inputs[i:i + chunk_rows], targets[i:i + chunk_rows]
            logits = model(x)
            mask = y != IGNORE
            right = (logits.argmax(-1) == y) & mask
            counted += int(mask.sum())
            correct += int(right.sum())
            exact += int((right | ~mask).all(1).sum())
            losses = F.cross_entropy(logits.transpose(1, 2), y, ignore_index=IGNORE,
                                     reduction="none")  # [B, T], 0 where ignored
            loss_sum += float(losses.sum())
            for name, part in (parts or {}).items():
                part_mask = part[i:i + chunk_rows] != IGNORE
                part_sums[name][0] += float(losses[part_mask].sum())
                part_sums[name][1] += int(part_mask.sum())
    scores = {"eval_loss": loss_sum / max(counted, 1), "token_accuracy": correct / max(counted, 1),
              "exact_match": exact / inputs.shape[0]}
    for name, (total, count) in part_sums.items():
        scores[f"{name}_loss"] = total / max(count, 1)
    return scores


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, help="override the config's seed")
    p.add_argument("--steps", type=int, help="override the config's steps")
    p.add_argument("--context", type=int, help="override the config's context (mqar)")
    p.add_argument("--pairs", type=int, help="override the config's pairs (mqar)")
    p.add_argument("--symbols", type=int, help="override the config's symbols")
    p.add_argument("--max-steps", type=int, help="stop after this many steps (timing)")
    args = p.parse_args()
    cfg = dict(DEFAULTS, **read_config(args.config))
    for key in ("seed", "steps", "context", "pairs", "symbols"):
        if getattr(args, key) is not None:
            cfg[key] = str(getattr(args, key))
    task_name = cfg.get("task", "copy")
    if cfg["optimizer"] != "adamw":
        raise SystemExit(f"research_torch: optimizer {cfg['optimizer']} is not replicated")
    set_threads(args.threads)
    seed = int(cfg["seed"])
    torch.manual_seed(seed)

    init_gen = torch.Generator().manual_seed(seed)
    data_gen = torch.Generator().manual_seed(seed + 1)
    heldout_gen = torch.Generator().manual_seed(seed + 2)
    if task_name == "modular":
        task = Modular(cfg, data_gen)
    elif task_name == "mqar":
        task = Mqar(cfg, data_gen, heldout_gen)
    elif task_name == "induction":
        task = Induction(cfg, data_gen, heldout_gen)
    else:
        raise SystemExit(f"research_torch: task {task_name} is not replicated "
                         "(modular, mqar, induction)")
    model = DecoderLM(cfg, task.vocab, task.positions, init_gen)
    params = list(model.parameters())
    optimizer = adamw(params, cfg)
    steps, eval_every, clip = int(cfg["steps"]), int(cfg["eval-every"]), float(cfg["clip"])
    target = float(cfg["target-exact-match"])
    spike_rule = cfg["stop-on-loss-spike"] != "0"
    last_step = min(steps, args.max_steps or steps)
    chunk_rows = task.batch_size

    curve, level, stop = [], None, "steps" if last_step == steps else "max-steps"
    step = 0
    start = time.perf_counter()
    while step < last_step:
        step += 1
        model.train()
        inputs, targets = task.batch(step)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, cfg)
        loss = loss_of(model(inputs), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else math.inf))
        value = loss.item()
        if not (math.isfinite(value) and math.isfinite(grad_norm)):
            stop = "diverged"
            break
        optimizer.step()
        if spike_rule and level is not None and value > 4 * level and value > level + 1:
            stop = "diverged"
            break
        level = value if level is None else 0.9 * level + 0.1 * value
        if step % eval_every == 0 or step == steps:
            model.eval()
            row = {"step": step, "train_loss": value, "grad_norm": grad_norm}
            row.update(score(model, *task.heldout, chunk_rows, task.parts))
            if task.training_set is not None:
                train = score(model, *task.training_set, chunk_rows)
                row.update(train_accuracy=train["token_accuracy"],
                           train_eval_loss=train["eval_loss"])
            curve.append(row)
            print(" ".join(f"{k} {v:.4g}" for k, v in row.items()), file=sys.stderr, flush=True)
            if target > 0 and row["exact_match"] >= target:
                stop = "target"
                break
    seconds = time.perf_counter() - start

    result = {"task": task_name, "config": args.config, "seed": seed, "threads": args.threads,
              "steps": step, "stop": stop, "seconds": seconds,
              "targets": steps_to_targets(task_name, curve),
              "final": curve[-1] if curve else None,
              "final_value": curve[-1][FINAL[task_name]] if curve else None,
              "curve": curve, "torch": torch.__version__,
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    print(json.dumps(result))
    if stop == "diverged":
        raise SystemExit(f"research_torch: stopped at step {step}: loss {value} (its running "
                         f"level {level}, gradient norm {grad_norm})")


if __name__ == "__main__":
    main()
