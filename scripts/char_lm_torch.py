#!/usr/bin/python3
"""A PyTorch replica of `gradlab train --task text`: the same model, data and loop, to compare
quality and speed with gradlab on the same text (BENCHMARKS.md, "Language model").

    /usr/bin/python3 scripts/char_lm_torch.py --config configs/char.ini --data FILE \
        [--seed 1] [--threads 1] [--steps N] [--val-text OUT]

What it replicates (docs/model.md, section 9, and gradlab's optimizer and schedule):
- character tokens: the sorted distinct code points of the file; the first
  int(n * (1 - val-fraction)) tokens train, the rest validate;
- training batches: batch-size windows of context + 1 tokens at uniform offsets of the training
  split (drawn by torch's generator: the same distribution as gradlab's, not the same windows);
- the decoder-only pre-LN model, with the config's bias, tie-embeddings and init (gpt2: normal
  (0, 0.02), residual projections 0.02 / sqrt(2 L), zero biases); exact-erf GELU, LayerNorm
  eps 1e-5, learned positions;
- AdamW with weight decay on the rank >= 2 parameters only, gradient clipping, and gradlab's
  schedule (1-based steps: lr * s / warmup during warm-up, then cosine down to min-lr);
- evaluation every eval-every steps and at the last: the mean loss over eval-iters validation
  windows drawn once with a fixed seed.

At the end it scores the whole validation split in consecutive windows (the windows
`gradlab eval --data` reads from the file --val-text writes) and prints one JSON line:
final losses, the loss curve, the loop's wall time (evaluations included) and peak RSS.
"""

import argparse
import json
import math
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from run_config import read_config
from torch_replica import LayerNorm, adamw, initialise, learning_rate, set_threads


class Block(torch.nn.Module):
    def __init__(self, c, heads, d_ff, bias):
        super().__init__()
        self.heads = heads
        self.ln1 = LayerNorm(c, bias)
        self.qkv = torch.nn.Linear(c, 3 * c, bias=bias)  # q_proj, k_proj, v_proj stacked
        self.out_proj = torch.nn.Linear(c, c, bias=bias)
        self.ln2 = LayerNorm(c, bias)
        self.fc1 = torch.nn.Linear(c, d_ff, bias=bias)
        self.fc2 = torch.nn.Linear(d_ff, c, bias=bias)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.heads)  # [B, H, T, T]
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)  # key j > query i
        y = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v  # [B, H, T, D]
        x = x + self.out_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class DecoderLM(torch.nn.Module):
    def __init__(self, vocab, context, c, heads, layers, d_ff, bias, tie, init, gen):
        super().__init__()
        self.token_embedding = torch.nn.Embedding(vocab, c)
        self.position_embedding = torch.nn.Embedding(context, c)
        self.blocks = torch.nn.ModuleList(Block(c, heads, d_ff, bias) for _ in range(layers))
        self.ln_f = LayerNorm(c, bias)
        self.head = None if tie else torch.nn.Linear(c, vocab, bias=bias)
        if init != "gpt2":
            raise SystemExit(f"char_lm_torch: init {init!r} is not replicated (gpt2 only)")
        initialise(self, init, layers, gen)

    def forward(self, inputs, targets):
        t = inputs.shape[1]
        h = self.token_embedding(inputs) + self.position_embedding.weight[:t]
        for block in self.blocks:
            h = block(h)
        h = self.ln_f(h)
        logits = h @ self.token_embedding.weight.T if self.head is None else self.head(h)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def windows(tokens, starts, context):
    return torch.stack([tokens[s:s + context + 1] for s in starts.tolist()])


def mean_loss(model, rows, batch_size):
    """The mean loss over every target of rows [N, context + 1], in chunks of batch_size."""
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, rows.shape[0], batch_size):
            chunk = rows[i:i + batch_size]
            n = chunk[:, 1:].numel()
            total += model(chunk[:, :-1], chunk[:, 1:]).item() * n
            count += n
    return total / count


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, help="override the config's steps")
    p.add_argument("--val-text", help="write the validation split here, as text")
    args = p.parse_args()
    cfg = read_config(args.config)
    if cfg.get("tokenizer", "char") != "char" or cfg.get("model", "decoder") != "decoder":
        raise SystemExit("char_lm_torch: replicates --tokenizer char with the decoder model only")
    set_threads(args.threads)
    torch.manual_seed(args.seed)

    with open(args.data, encoding="utf-8") as f:
        text = f.read()
    code_points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    vocabulary = np.unique(code_points)  # sorted
    tokens = torch.from_numpy(np.searchsorted(vocabulary, code_points).astype(np.int64))
    train_size = int(len(text) * (1 - float(cfg["val-fraction"])))
    val_size = len(text) - train_size
    if args.val_text:
        with open(args.val_text, "w", encoding="utf-8") as f:
            f.write(text[train_size:])

    context, batch = int(cfg["context"]), int(cfg["batch-size"])
    layers = int(cfg["layers"])
    steps = args.steps or int(cfg["steps"])
    gen = torch.Generator().manual_seed(args.seed)
    model = DecoderLM(len(vocabulary), context, int(cfg["d-model"]), int(cfg["heads"]), layers,
                      int(cfg["d-ff"]), cfg["bias"] == "1", cfg["tie-embeddings"] == "1",
                      cfg["init"], gen)
    params = list(model.parameters())
    optimizer = adamw(params, dict(cfg, steps=str(steps)))
    eval_gen = torch.Generator().manual_seed(args.seed + 1)
    eval_rows = windows(tokens, train_size + torch.randint(
        val_size - context, (int(cfg["eval-iters"]),), generator=eval_gen), context)
    eval_every, clip = int(cfg["eval-every"]), float(cfg["clip"])

    curve = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        model.train()
        rows = windows(tokens, torch.randint(train_size - context, (batch,), generator=gen),
                       context)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, dict(cfg, steps=str(steps)))
        loss = model(rows[:, :-1], rows[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        if step % eval_every == 0 or step == steps:
            model.eval()
            curve.append({"step": step, "train_loss": loss.item(),
                          "val_loss": mean_loss(model, eval_rows, batch)})
            print(f"step {step}: train {curve[-1]['train_loss']:.4f} "
                  f"val {curve[-1]['val_loss']:.4f}", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - start

    model.eval()
    full = windows(tokens, torch.arange(train_size, len(text) - context, context), context)
    result = {"seed": args.seed, "threads": args.threads, "steps": steps, "seconds": seconds,
              "final_val_loss": curve[-1]["val_loss"],
              "full_val_loss": mean_loss(model, full, 256), "full_val_windows": full.shape[0],
              "curve": curve, "vocabulary": len(vocabulary), "torch": torch.__version__,
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
