#!/usr/bin/python3
"""The full-batch grokking step (configs/grokking-nanda.ini) beside the PyTorch replica's, in one
run (BENCHMARKS.md, "Full-batch grokking step"):

    /usr/bin/python3 scripts/bench_grokking.py [--config configs/grokking-nanda.ini] \
        [--rounds 5] [--steps 20] [--warmup 3] [--isa avx2] [--timer build/bench/gradlab_step_timer]

Each round runs, in alternated order, gradlab's steps (build/bench/gradlab_step_timer: train_step()
alone, no evaluation) and the replica's (scripts/research_torch.py's model, data, AdamW and
clip_grad_norm_, timed the same way) on 1 and 2 threads, and two 1-thread gradlab runs side by
side: the machine's own ceiling for 2 threads (2 x one run's step / the pair's step, the pair's
steps counted together). A run's time is the median of its steps after the warm-up, by the wall
clock and by the process's CPU time (on a shared machine one thread's CPU time is its work,
whatever its wait for a core); a cell is the median over rounds (the fastest round beside it). The replica runs in two environments,
the shell's and "tuned" (OPENBLAS_CORETYPE for this CPU's widest kernels, glibc's malloc keeping
its blocks, passive OpenMP waits); the faster is the reference. The load average is printed with
each round, since the machines are shared. --isa avx2 holds both engines to their AVX2 kernels.

Internal: --torch-steps N --threads T times the replica alone and prints its JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUNED_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
    "OMP_WAIT_POLICY": "PASSIVE",
    "GOMP_SPINCOUNT": "10000",
}


def torch_steps(config, steps, threads):
    """The replica's training steps timed one by one (research_torch.py's loop body)."""
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import math
    import torch
    from research_torch import DEFAULTS, DecoderLM, Modular, loss_of
    from run_config import read_config
    from torch_replica import adamw, learning_rate, set_threads

    cfg = dict(DEFAULTS, **read_config(config))
    set_threads(threads)
    seed = int(cfg["seed"])
    torch.manual_seed(seed)
    task = Modular(cfg, torch.Generator().manual_seed(seed + 1))
    model = DecoderLM(cfg, task.vocab, task.positions, torch.Generator().manual_seed(seed))
    params = list(model.parameters())
    optimizer = adamw(params, cfg)
    clip = float(cfg["clip"])
    ms, cpu_ms, value = [], [], 0.0
    model.train()
    for step in range(1, steps + 1):
        start, cpu_start = time.perf_counter(), time.process_time()
        inputs, targets = task.batch(step)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, cfg)
        loss = loss_of(model(inputs), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else math.inf)
        value = loss.item()
        optimizer.step()
        ms.append((time.perf_counter() - start) * 1e3)
        cpu_ms.append((time.process_time() - cpu_start) * 1e3)
    blas = sorted({line.split()[-1].rsplit("/", 1)[-1] for line in open("/proc/self/maps")
                   if "blas" in line.rsplit("/", 1)[-1]})
    print(json.dumps({"engine": "torch", "torch": torch.__version__, "threads": threads,
                      "blas": blas, "loss": value, "ms": ms, "cpu_ms": cpu_ms}))


def run_json(command, env):
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def step_ms(result, warmup, key="ms"):
    return statistics.median(result[key][warmup:])


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default=os.path.join(REPO, "configs/grokking-nanda.ini"))
    p.add_argument("--timer", default=os.path.join(REPO, "build/bench/gradlab_step_timer"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--isa", choices=["native", "avx2"], default="native")
    p.add_argument("--torch-steps", type=int, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_steps:
        torch_steps(args.config, args.torch_steps, args.threads)
        return

    base = dict(os.environ)
    gradlab_env = dict(base)
    as_is = dict(base)
    tuned = dict(base, **TUNED_ENV)
    if args.isa == "avx2":
        gradlab_env["GRADLAB_ISA"] = "avx2"
        for env in (as_is, tuned):
            env.update(ATEN_CPU_CAPABILITY="avx2", OPENBLAS_CORETYPE="Haswell")
    else:
        tuned["OPENBLAS_CORETYPE"] = "SkylakeX" if "avx512f" in cpu_flags() else "Haswell"
    steps = args.steps + args.warmup

    def gradlab(threads):
        return run_json([args.timer, args.config, str(steps), str(threads)], gradlab_env)

    def torch(threads, env):
        return run_json([sys.executable, os.path.abspath(__file__), "--config", args.config,
                         "--torch-steps", str(steps), "--threads", str(threads)], env)

    def pair():
        command = [args.timer, args.config, str(steps), "1"]
        procs = [subprocess.Popen(command, env=gradlab_env, stdout=subprocess.PIPE, text=True)
                 for _ in range(2)]
        results = [json.loads(proc.communicate()[0].strip().splitlines()[-1]) for proc in procs]
        # Two steps done per (slower) step of the pair; CPU: one step's.
        return {"ms": [max(a, b) / 2 for a, b in zip(*(r["ms"] for r in results))],
                "cpu_ms": results[0]["cpu_ms"]}

    cells = {}  # (engine, threads) -> [(wall ms, CPU ms) per round]
    loads = []
    for r in range(args.rounds):
        jobs = [("gradlab", 1, lambda: gradlab(1)), ("gradlab", 2, lambda: gradlab(2)),
                ("pair", 1, pair)]
        for name, env in (("as-is", as_is), ("tuned", tuned)):
            for threads in (1, 2):
                jobs.append((f"torch {name}", threads, lambda t=threads, e=env: torch(t, e)))
        if r % 2:
            jobs.reverse()
        loads.append(load())
        for key, threads, job in jobs:
            result = job()
            cells.setdefault((key, threads), []).append(
                (step_ms(result, args.warmup), step_ms(result, args.warmup, "cpu_ms")))
        loads.append(load())
        print(f"round {r + 1}: load {loads[-2]:.1f}-{loads[-1]:.1f} " +
              " ".join(f"{k}/{t}:{v[-1][0]:.1f}({v[-1][1]:.1f} CPU)"
                       for (k, t), v in sorted(cells.items())), file=sys.stderr, flush=True)

    wall = {k: statistics.median(w for w, _ in v) for k, v in cells.items()}
    best = {k: min(w for w, _ in v) for k, v in cells.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in cells.items()}
    print(f"processor: {cpu_name()}; kernels: {args.isa}; load average {min(loads):.1f}-"
          f"{max(loads):.1f} during the rounds; {args.rounds} rounds of {args.steps} steps "
          f"(after {args.warmup} warm-up); ms per step, median over rounds of each run's median")
    print("| threads | gradlab wall (best round) | gradlab CPU | PyTorch as-is wall / CPU | "
          "PyTorch tuned wall / CPU | ratio wall | ratio CPU |")
    print("|---|---|---|---|---|---|---|")
    for t in (1, 2):
        ref_wall = min(wall[("torch as-is", t)], wall[("torch tuned", t)])
        ref_cpu = min(cpu[("torch as-is", t)], cpu[("torch tuned", t)])
        print(f"| {t} | {wall[('gradlab', t)]:.1f} ({best[('gradlab', t)]:.1f}) | "
              f"{cpu[('gradlab', t)]:.1f} | "
              f"{wall[('torch as-is', t)]:.1f} / {cpu[('torch as-is', t)]:.1f} | "
              f"{wall[('torch tuned', t)]:.1f} / {cpu[('torch tuned', t)]:.1f} | "
              f"{wall[('gradlab', t)] / ref_wall:.2f} | {cpu[('gradlab', t)] / ref_cpu:.2f} |")
    speedup = wall[("gradlab", 1)] / wall[("gradlab", 2)]
    ceiling = wall[("gradlab", 1)] / wall[("pair", 1)]
    print(f"2 threads: {speedup:.2f}x of one; two 1-thread runs side by side: {ceiling:.2f}x "
          f"(the ceiling); {speedup / ceiling:.2f} of it")


if __name__ == "__main__":
    main()
