#!/usr/bin/env python3
"""Scaling of data-parallel training on MPI: called by scripts/bench.sh (its --scaling flag runs
this part alone). Standard library only.

Measures, on this machine:
  - training throughput (tokens per second of `gradlab train`, its "Trained N steps in S s"
    line) of the text workload (configs/char.ini) and of a wider model (6 layers, d-model 256,
    context 128), as 1 process x 1 thread, 1 process x 2 threads and 2 processes x 1 thread,
    in rounds whose order rotates; the median over the rounds;
  - the time rank 0 spent summing gradients in the 2-process runs (gradlab prints it);
  - the all-reduce time of gradlab's gradient sum by buffer size (gradlab_allreduce_bench under
    mpirun -np 2), to which it fits t(n) = a + n / b.

Then it projects the efficiency at 8 and 64 processes with the cost model of a ring all-reduce
(what Open MPI uses for large buffers): t(p, n) = 2 (p - 1) alpha + 2 (p - 1) / p * n / beta,
where for p = 2 the model is 2 alpha + n / beta, so alpha = a / 2 and beta = b. Each process
keeps the batch of one process (weak scaling: configs/char.ini's batch of 12 cannot be split
64 ways), so a step costs the 1 x 1 step time T plus t(p, n), and the efficiency is
T / (T + t(p, n)). alpha and beta are those of this machine's shared memory; across machines
they are the network's, which the note under the table works out for 10 Gb/s Ethernet.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

from bench_table import (cpu_flags, git_revision, loadavg, log, lscpu_model, replace_section,
                         run)

LAYOUTS = [(1, 1), (1, 2), (2, 1)]  # (processes, threads per process)
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# Evaluation only at the end, on few windows: the table is about the training step.
TIMING_FLAGS = ["--eval-every", "1000000", "--eval-iters", "24"]
ETHERNET_10G = {"alpha": 25e-6, "beta": 1.1e9}  # stated assumption: latency s, bytes/s


def workloads(repo):
    config = os.path.join(repo, "configs", "char.ini")
    return [
        {"name": "char.ini (4 layers, d-model 128, context 64, batch 12)", "key": "char",
         "flags": ["--config", config, "--steps", "200"], "batch": 12, "context": 64},
        {"name": "wide (6 layers, d-model 256, d-ff 1024, 8 heads, context 128, batch 12)",
         "key": "wide",
         "flags": ["--config", config, "--layers", "6", "--d-model", "256", "--d-ff", "1024",
                   "--heads", "8", "--context", "128", "--steps", "40", "--warmup", "10"],
         "batch": 12, "context": 128},
    ]


def train_once(args, work, processes, threads, out_dir):
    cmd = [os.path.join(args.build, "gradlab"), "train", *work["flags"], "--data", args.text,
           "--threads", str(threads), "--out", out_dir, "--overwrite", *TIMING_FLAGS]
    if processes > 1:
        cmd = ["mpirun", "-np", str(processes), "--bind-to", "none"] + cmd
    code, out, err, _, _ = run(cmd, dict(os.environ, **MPI_ENV))
    if code != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({code}):\n{out}\n{err}")
    steps, seconds = re.search(r"Trained (\d+) steps in ([0-9.]+) s", out).groups()
    sync = re.search(r"summing gradients took ([0-9.]+) s", out)
    return {"seconds": float(seconds), "steps": int(steps),
            "sync_seconds": float(sync.group(1)) if sync else 0.0}


def parameter_count(args, out_dir):
    checkpoint = sorted(f for f in os.listdir(out_dir) if f.startswith("step-"))[-1]
    text = subprocess.run([os.path.join(args.build, "gradlab"), "inspect", "--checkpoint",
                           os.path.join(out_dir, checkpoint)], capture_output=True, text=True,
                          check=True).stdout
    return int(re.search(r"total parameters (\d+)", text).group(1))


def allreduce(args):
    bench = os.path.join(args.build, "bench", "gradlab_allreduce_bench")
    code, out, err, _, _ = run(["mpirun", "-np", "2", "--bind-to", "none", bench],
                               dict(os.environ, **MPI_ENV))
    if code != 0:
        raise SystemExit(f"bench: {bench} failed ({code}):\n{err}")
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def fit(points, max_bytes):
    """alpha and beta of the ring model from the 2-process times t(n) = 2 alpha + n / beta:
    beta from the slope between 1 MiB and max_bytes (gradlab's bucket size), alpha from the
    smallest buffer once its bytes are paid for."""
    by_size = {p["bytes"]: p["seconds"] for p in points}
    small, low, high = min(by_size), 1 << 20, max_bytes
    beta = (high - low) / (by_size[high] - by_size[low])
    alpha = max(by_size[small] - small / beta, 0.0) / 2
    return alpha, beta


def ring_seconds(p, n, alpha, beta):
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n / beta


def measure(args):
    results = {"workloads": [], "allreduce": allreduce(args)}
    results["alpha"], results["beta"] = fit(results["allreduce"], 16 << 20)
    scratch = os.path.join(args.build, "bench", "scaling-runs")
    for work in workloads(args.repo):
        samples = {layout: [] for layout in LAYOUTS}
        for round_ in range(args.reps):
            order = LAYOUTS[round_ % len(LAYOUTS):] + LAYOUTS[:round_ % len(LAYOUTS)]
            for processes, threads in order:
                out_dir = os.path.join(scratch, f"{work['key']}-{processes}x{threads}")
                r = train_once(args, work, processes, threads, out_dir)
                log(f"bench: {work['key']} {processes}x{threads}: {r['seconds']:.2f} s")
                samples[(processes, threads)].append(r)
        params = parameter_count(args, os.path.join(scratch, f"{work['key']}-1x1"))
        row = {"name": work["name"], "parameters": params, "gradient_bytes": 4 * params}
        for (processes, threads), runs in samples.items():
            seconds = statistics.median(r["seconds"] for r in runs)
            steps = runs[0]["steps"]
            row[f"{processes}x{threads}"] = {
                "seconds": seconds,
                "step_seconds": seconds / steps,
                "tokens_per_second": steps * work["batch"] * work["context"] / seconds,
                "sync_seconds_per_step": statistics.median(r["sync_seconds"] for r in runs) / steps,
            }
        results["workloads"].append(row)
    return results


def render(meta, results):
    alpha, beta = results["alpha"], results["beta"]
    lines = [
        f"Machine: {meta['cpu']} ({meta['cores']} cores, {meta['isa']}), load average "
        f"{meta['load']:.2f} at the start; gradlab {meta['revision']}; Open MPI shared memory "
        f"(one machine). Median of {meta['reps']} rounds.",
        "",
        "| workload | parameters | 1 process x 1 thread | 1 x 2 threads | 2 processes x 1 thread "
        "| 2 x 1 vs 1 x 1 | gradient sum per step (2 x 1) |",
        "|---|---|---|---|---|---|---|",
    ]
    for w in results["workloads"]:
        one, two_threads, two_procs = w["1x1"], w["1x2"], w["2x1"]
        cells = [f"{r['tokens_per_second']:,.0f} tok/s ({1000 * r['step_seconds']:.1f} ms/step)"
                 for r in (one, two_threads, two_procs)]
        sync = two_procs["sync_seconds_per_step"]
        lines.append(
            f"| {w['name']} | {w['parameters']:,} | {cells[0]} | {cells[1]} | {cells[2]} "
            f"| {two_procs['tokens_per_second'] / one['tokens_per_second']:.2f}x "
            f"| {1000 * sync:.2f} ms ({100 * sync / two_procs['step_seconds']:.0f}% of the step; "
            f"all-reduce alone {1000 * ring_seconds(2, w['gradient_bytes'], alpha, beta):.2f} ms) |")
    lines += [
        "",
        "All-reduce of gradlab's gradient sum (`gradlab_allreduce_bench`, 2 processes, median):",
        "",
        "| bytes | " + " | ".join(f"{p['bytes'] >> 10} KiB" for p in results["allreduce"]) + " |",
        "|---|" + "---|" * len(results["allreduce"]),
        "| time | " + " | ".join(f"{1e6 * p['seconds']:.0f} us" for p in results["allreduce"])
        + " |",
        "",
        f"Ring model for 2 processes, t = 2 alpha + n / beta: beta = {beta / 1e9:.2f} GB/s "
        f"(the slope from 1 to 16 MiB, gradlab's largest bucket), alpha = {1e6 * alpha:.1f} us "
        f"(the smallest buffer, less its bytes).",
        "",
        "Projected efficiency, each process with the batch of one (weak scaling), ring all-reduce "
        "t(p, n) = 2(p-1) alpha + 2(p-1)/p n / beta against the 1 x 1 step time:",
        "",
        "| workload | gradient bytes | measured at p = 2 | p = 2 | p = 8 | p = 64 "
        "| p = 64 over 10 Gb/s Ethernet (alpha 25 us, beta 1.1 GB/s, assumed) |",
        "|---|---|---|---|---|---|---|",
    ]
    for w in results["workloads"]:
        step, n = w["1x1"]["step_seconds"], w["gradient_bytes"]
        measured = w["2x1"]["tokens_per_second"] / (2 * w["1x1"]["tokens_per_second"])
        cells = [f"{100 * measured:.0f}%"]
        cells += [f"{100 * step / (step + ring_seconds(p, n, alpha, beta)):.0f}%"
                  for p in (2, 8, 64)]
        ethernet = ring_seconds(64, n, ETHERNET_10G["alpha"], ETHERNET_10G["beta"])
        cells.append(f"{100 * step / (step + ethernet):.0f}% ({1000 * ethernet:.1f} ms per sum)")
        lines.append(f"| {w['name']} | {n / 2**20:.1f} MiB | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--text", help="the text the workloads train on")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--doc", help="BENCHMARKS.md: its scaling section is replaced")
    parser.add_argument("--render", metavar="JSON",
                        help="measure nothing: render the results of an earlier --json")
    args = parser.parse_args()
    if not args.render and not args.text:
        parser.error("--text is required to measure")
    args.repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cpu, cores = lscpu_model()
    meta = {"cpu": cpu, "cores": cores,
            "isa": "AVX-512" if "avx512f" in cpu_flags() else "AVX2",
            "load": loadavg(), "revision": git_revision(), "reps": args.reps}
    if args.render:
        with open(args.render) as f:
            saved = json.load(f)
        meta, results = saved["meta"], saved["results"]
        results["alpha"], results["beta"] = fit(results["allreduce"], 16 << 20)
    else:
        results = measure(args)
    text = render(meta, results)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.doc:
        replace_section(args.doc, "scaling", text)


if __name__ == "__main__":
    sys.exit(main())
