#!/usr/bin/python3
"""Writes tests/fixtures/optimizer_reference.h5: PyTorch reference values for gradlab's optimizers,
learning-rate schedules and gradient clipping (checked by tests/train/test_optimizer.cpp).

Regenerate from the repository root (needs torch, h5py and numpy):

    /usr/bin/python3 scripts/make_optimizer_reference.py

The output is deterministic: all values come from one seeded generator and are computed and
stored in float64.

Optimizers. Every case starts from the same two parameters, a [3, 5] matrix "w" and a [5]
vector "b", and applies three steps with a fixed sequence of gradients and a learning rate that
changes from step to step, using torch.optim.SGD, Adam or AdamW. gradlab decays only parameters
of rank >= 2 (gradlab::train::decays), so the torch optimizers get two parameter groups: "w"
with the case's weight_decay and "b" with weight_decay 0. The first gradient of "b" has an
exact zero, which exercises Adam's eps. In sgd_momentum_skip "b" has no gradient at step 2
(torch and gradlab both leave it and its momentum buffer alone).

Schedules. gradlab's schedules are not torch.optim classes; their values are computed here
with plain Python math from the formulas (linear warm-up, cosine decay to min_lr, and the
"noam" schedule of Vaswani et al.), as an independent implementation.

Clipping. torch.nn.utils.clip_grad_norm_ on fixed gradients: above the limit, below it, exactly
at it (torch's coefficient max_norm / (norm + 1e-6) still scales slightly there), and with one
parameter that has no gradient.

Layout (scalars are 0-d float64 datasets; integers and names are attributes):

    <opt case>/                    attributes: optimizer ("sgd" | "adam" | "adamw"),
                                   nesterov (0/1)
    <opt case>/config/<field>      beta1, beta2, eps, weight_decay, momentum
    <opt case>/lrs                 [3] learning rate of steps 1..3
    <opt case>/initial/<param>     w [3, 5], b [5]
    <opt case>/grads/step<k>/<param>   gradient applied at step k (absent: no gradient)
    <opt case>/params/step<k>/<param>  parameters after step k
    <opt case>/state/<param>/<slot>    optimizer state after step 3, named as gradlab's
                                   Optimizer::state() names it ("w/exp_avg"); absent for SGD
                                   without momentum
    schedules/<case>/              attributes: name, warmup_steps, total_steps, d_model
    schedules/<case>/lr_peak       ScheduleConfig::lr;  schedules/<case>/min_lr
    schedules/<case>/steps         [N] 1-based steps (stored as float64)
    schedules/<case>/lr            [N] learning rate at each step
    clip/<case>/max_norm           scalar
    clip/<case>/grads/<param>      gradients before clipping (absent: no gradient)
    clip/<case>/clipped/<param>    gradients after clip_grad_norm_
    clip/<case>/norm               scalar: the returned total norm
"""

import math
import os

import h5py
import numpy as np
import torch

DTYPE = torch.float64
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(REPO_ROOT, "tests", "fixtures", "optimizer_reference.h5")

PARAM_SHAPES = {"w": (3, 5), "b": (5,)}
NUM_STEPS = 3

# name -> torch optimizer, hyperparameters (gradlab OptimizerConfig fields), learning rates.
OPTIMIZER_CASES = [
    {"name": "sgd_plain", "optimizer": "sgd", "momentum": 0.0, "nesterov": False,
     "weight_decay": 0.0, "lrs": [0.1, 0.05, 0.02]},
    {"name": "sgd_momentum", "optimizer": "sgd", "momentum": 0.9, "nesterov": False,
     "weight_decay": 0.01, "lrs": [0.1, 0.05, 0.02]},
    {"name": "sgd_momentum_skip", "optimizer": "sgd", "momentum": 0.9, "nesterov": False,
     "weight_decay": 0.01, "lrs": [0.1, 0.05, 0.02], "skip": {2: ["b"]}},
    {"name": "sgd_nesterov", "optimizer": "sgd", "momentum": 0.9, "nesterov": True,
     "weight_decay": 0.01, "lrs": [0.1, 0.05, 0.02]},
    {"name": "adam", "optimizer": "adam", "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
     "weight_decay": 0.01, "lrs": [1e-2, 5e-3, 2e-3]},
    {"name": "adamw", "optimizer": "adamw", "beta1": 0.9, "beta2": 0.98, "eps": 1e-6,
     "weight_decay": 0.01, "lrs": [1e-2, 5e-3, 2e-3]},
]

# Defaults of gradlab's OptimizerConfig for the fields a case does not set.
CONFIG_DEFAULTS = {"beta1": 0.9, "beta2": 0.98, "eps": 1e-8, "weight_decay": 0.01,
                   "momentum": 0.0}

SCHEDULE_STEPS = [1, 50, 100, 101, 500, 3000]
SCHEDULE_CASES = [
    {"name": "constant", "lr": 3e-3, "warmup_steps": 0, "total_steps": 3000, "min_lr": 0.0,
     "d_model": 64},
    {"name": "constant_warmup", "schedule": "constant", "lr": 3e-3, "warmup_steps": 100,
     "total_steps": 3000, "min_lr": 0.0, "d_model": 64},
    {"name": "cosine", "lr": 3e-3, "warmup_steps": 100, "total_steps": 3000, "min_lr": 3e-4,
     "d_model": 64},
    {"name": "cosine_no_warmup", "schedule": "cosine", "lr": 1e-3, "warmup_steps": 0,
     "total_steps": 1000, "min_lr": 0.0, "d_model": 64},
    {"name": "noam", "lr": 2.0, "warmup_steps": 100, "total_steps": 3000, "min_lr": 0.0,
     "d_model": 64},
]


def schedule_lr(case, step):
    """Learning rate of gradlab's schedule at 1-based step (plain math, not gradlab)."""
    kind = case.get("schedule", case["name"])
    lr, warmup = case["lr"], case["warmup_steps"]
    if kind == "noam":
        return lr * case["d_model"] ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
    if warmup > 0 and step < warmup:
        return lr * step / warmup
    if kind == "constant":
        return lr
    progress = (step - warmup) / (case["total_steps"] - warmup)
    progress = min(1.0, max(0.0, progress))
    return case["min_lr"] + 0.5 * (lr - case["min_lr"]) * (1.0 + math.cos(math.pi * progress))


def draw(gen, shape):
    return torch.randn(shape, generator=gen, dtype=DTYPE)


def make_optimizer_data(gen):
    """Initial parameters and the three gradients, shared by every optimizer case."""
    initial = {name: draw(gen, shape) for name, shape in PARAM_SHAPES.items()}
    grads = []
    for _ in range(NUM_STEPS):
        grads.append({name: draw(gen, shape) for name, shape in PARAM_SHAPES.items()})
    grads[0]["b"][2] = 0.0  # a zero gradient: Adam's first update there is 0 / (0 + eps)
    return initial, grads


def torch_optimizer(case, w, b):
    wd = case["weight_decay"]
    groups = [{"params": [w], "weight_decay": wd}, {"params": [b], "weight_decay": 0.0}]
    lr = case["lrs"][0]
    if case["optimizer"] == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=case["momentum"],
                               nesterov=case["nesterov"], foreach=False)
    betas = (case["beta1"], case["beta2"])
    cls = torch.optim.Adam if case["optimizer"] == "adam" else torch.optim.AdamW
    return cls(groups, lr=lr, betas=betas, eps=case["eps"], foreach=False)


def run_optimizer_case(case, initial, grads):
    params = {name: initial[name].clone().requires_grad_(True) for name in PARAM_SHAPES}
    optimizer = torch_optimizer(case, params["w"], params["b"])
    skip = case.get("skip", {})
    after = []
    used_grads = []
    for k in range(NUM_STEPS):
        step = k + 1
        for group in optimizer.param_groups:
            group["lr"] = case["lrs"][k]
        applied = {}
        for name, p in params.items():
            if name in skip.get(step, []):
                p.grad = None
            else:
                p.grad = grads[k][name].clone()
                applied[name] = grads[k][name].clone()
        optimizer.step()
        used_grads.append(applied)
        after.append({name: p.detach().clone() for name, p in params.items()})

    state = {}
    slots = ["momentum_buffer"] if case["optimizer"] == "sgd" else ["exp_avg", "exp_avg_sq"]
    if case["optimizer"] == "sgd" and case["momentum"] == 0.0:
        slots = []
    for name, p in params.items():
        for slot in slots:
            value = optimizer.state[p][slot]
            state[f"{name}/{slot}"] = value.detach().clone()
    return used_grads, after, state


def run_clip_cases(gen):
    cases = []

    def clip_case(name, grads, max_norm):
        params = {n: torch.zeros(PARAM_SHAPES[n], dtype=DTYPE, requires_grad=True)
                  for n in PARAM_SHAPES}
        for n, g in grads.items():
            params[n].grad = g.clone()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), max_norm)
        clipped = {n: params[n].grad.detach().clone() for n in grads}
        cases.append({"name": name, "max_norm": max_norm, "grads": grads, "clipped": clipped,
                      "norm": float(norm)})

    random_grads = {n: 2.0 * draw(gen, shape) for n, shape in PARAM_SHAPES.items()}
    clip_case("above", random_grads, 1.0)
    clip_case("below", random_grads, 100.0)
    # Norm exactly 5 (3-4-5): torch still scales by 5 / (5 + 1e-6).
    exact = {n: torch.zeros(shape, dtype=DTYPE) for n, shape in PARAM_SHAPES.items()}
    exact["w"][1, 2] = 3.0
    exact["b"][4] = -4.0
    clip_case("at_limit", exact, 5.0)
    clip_case("missing_grad", {"w": random_grads["w"]}, 0.5)
    return cases


def scalar(value):
    return np.array(value, dtype=np.float64)


def write(root, initial, opt_results, clip_cases):
    for case, (used_grads, after, state) in opt_results:
        group = root.create_group(case["name"])
        group.attrs["optimizer"] = np.bytes_(case["optimizer"])
        group.attrs["nesterov"] = np.int64(int(case.get("nesterov", False)))
        for field, default in CONFIG_DEFAULTS.items():
            group.create_dataset(f"config/{field}", data=scalar(case.get(field, default)))
        group.create_dataset("lrs", data=np.array(case["lrs"], dtype=np.float64))
        for name, value in initial.items():
            group.create_dataset(f"initial/{name}", data=value.numpy())
        for k in range(NUM_STEPS):
            for name, g in used_grads[k].items():
                group.create_dataset(f"grads/step{k + 1}/{name}", data=g.numpy())
            for name, p in after[k].items():
                group.create_dataset(f"params/step{k + 1}/{name}", data=p.numpy())
        for name, value in state.items():
            group.create_dataset(f"state/{name}", data=value.numpy())

    schedules = root.create_group("schedules")
    for case in SCHEDULE_CASES:
        group = schedules.create_group(case["name"])
        group.attrs["name"] = np.bytes_(case.get("schedule", case["name"]))
        for field in ("warmup_steps", "total_steps", "d_model"):
            group.attrs[field] = np.int64(case[field])
        group.create_dataset("lr_peak", data=scalar(case["lr"]))
        group.create_dataset("min_lr", data=scalar(case["min_lr"]))
        group.create_dataset("steps", data=np.array(SCHEDULE_STEPS, dtype=np.float64))
        group.create_dataset(
            "lr", data=np.array([schedule_lr(case, s) for s in SCHEDULE_STEPS], np.float64))

    clip = root.create_group("clip")
    for case in clip_cases:
        group = clip.create_group(case["name"])
        group.create_dataset("max_norm", data=scalar(case["max_norm"]))
        group.create_dataset("norm", data=scalar(case["norm"]))
        for name, g in case["grads"].items():
            group.create_dataset(f"grads/{name}", data=g.numpy())
        for name, g in case["clipped"].items():
            group.create_dataset(f"clipped/{name}", data=g.numpy())


def main():
    gen = torch.Generator().manual_seed(1234)
    initial, grads = make_optimizer_data(gen)
    opt_results = [(case, run_optimizer_case(case, initial, grads)) for case in OPTIMIZER_CASES]
    clip_cases = run_clip_cases(gen)

    os.makedirs(os.path.dirname(OUTPUT), exist_ok=True)
    with h5py.File(OUTPUT, "w") as root:
        write(root, initial, opt_results, clip_cases)
    print(f"wrote {os.path.relpath(OUTPUT, REPO_ROOT)} ({os.path.getsize(OUTPUT)} bytes)")


if __name__ == "__main__":
    main()
