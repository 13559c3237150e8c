"""What the PyTorch replicas of gradlab's runs share (char_lm_torch.py, research_torch.py):
the threads, gradlab's LayerNorm, initialisations, schedules and AdamW weight-decay groups.

The threads are set as the libtorch benchmark (bench/torch_bench.cpp) sets them: torch's, one
inter-op thread, and OpenBLAS's own pool. torch.set_num_threads alone leaves the OpenBLAS that
Debian's libtorch calls (through libblas.so.3) at its default, a thread per core: a 1024 x 1024
product at "1 thread" then used 1.8 CPU-seconds per second.
"""

import ctypes
import math

import torch
import torch.nn.functional as F


def set_threads(threads):
    """Once per process, before any parallel work (torch refuses the inter-op setting after)."""
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1]})
    for path in paths:
        library = ctypes.CDLL(path)
        if hasattr(library, "openblas_set_num_threads"):
            library.openblas_set_num_threads(threads)


class LayerNorm(torch.nn.Module):
    """gradlab's LayerNorm: eps 1e-5, the bias optional."""

    def __init__(self, dim, bias):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.bias = torch.nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


def learning_rate(step, cfg):
    """gradlab's schedules (train/schedule.cpp), steps counted from 1."""
    lr, warmup, total = float(cfg["lr"]), int(cfg["warmup"]), int(cfg["steps"])
    if cfg["schedule"] == "noam":
        return lr * int(cfg["d-model"]) ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
    if warmup > 0 and step < warmup:
        return lr * step / warmup
    if cfg["schedule"] == "constant":
        return lr
    min_lr = float(cfg["min-lr"])
    progress = 1.0 if total <= warmup else min(max((step - warmup) / (total - warmup), 0.0), 1.0)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def adamw(params, cfg):
    """torch's AdamW with gradlab's groups: weight decay on the rank >= 2 parameters only, or on
    every parameter with decay-all."""
    params = list(params)
    decay_all = cfg.get("decay-all", "0") not in ("0", "false")
    groups = [{"params": [q for q in params if decay_all or q.dim() >= 2],
               "weight_decay": float(cfg["weight-decay"])},
              {"params": [q for q in params if not decay_all and q.dim() < 2],
               "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=float(cfg["lr"]),
                             betas=(float(cfg["beta1"]), float(cfg["beta2"])),
                             eps=float(cfg.get("eps", "1e-08")))


def initialise(model, init, layers, gen):
    """gradlab's initialisations (nn/initialisation.cpp), drawn from gen: biases zero; "gpt2":
    normal(0, 0.02), the residual projections 0.02 / sqrt(2 layers); "transformerlens": every
    matrix normal(0, 0.8 / sqrt(d_model)) (d_model: the embedding's width); "default": embeddings
    normal(0, 0.02), every projection Xavier-uniform (the stacked q, k, v each [C, C])."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                if name.endswith("bias"):
                    p.zero_()
                continue
            if init == "transformerlens":
                width = model.token_embedding.weight.shape[1]
                p.normal_(0.0, 0.8 / math.sqrt(width), generator=gen)
            elif init == "gpt2":
                residual = name.endswith(("out_proj.weight", "fc2.weight"))
                p.normal_(0.0, 0.02 / math.sqrt(2 * layers) if residual else 0.02, generator=gen)
            elif "embedding" in name:
                p.normal_(0.0, 0.02, generator=gen)
            else:
                fan_out = p.shape[0] // 3 if name.endswith("qkv.weight") else p.shape[0]
                limit = math.sqrt(6.0 / (p.shape[1] + fan_out))
                p.uniform_(-limit, limit, generator=gen)
