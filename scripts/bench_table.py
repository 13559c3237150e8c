#!/usr/bin/env python3
"""Side-by-side benchmark of gradlab against libtorch: runs both binaries, prints one table.

Called by scripts/bench.sh after the build; standard library only. For every workload and
thread count it runs whole processes in rounds, each round one gradlab run and one libtorch run
per libtorch environment (the order rotates from round to round), and reports the median over
the rounds with the spread (half the min-max range, in % of the median). Peak memory is the
peak RSS of the process that ran the workload (getrusage of the child, via wait4).

libtorch runs in two environments and the table quotes the faster one:
  as-is  the environment as it is (only LD_LIBRARY_PATH may point at an OpenBLAS, see bench.sh)
  tuned  OPENBLAS_CORETYPE unset (or, when OpenBLAS does not recognise the CPU and falls back
         to a pre-AVX kernel, set to the best family the CPU supports), plus glibc malloc
         settings that keep large blocks instead of unmapping them (MALLOC_MMAP_THRESHOLD_,
         MALLOC_TRIM_THRESHOLD_), and OMP_WAIT_POLICY=PASSIVE with GOMP_SPINCOUNT=10000, so
         that libtorch's idle OpenMP threads spin briefly and then sleep as gradlab's do
         (gradlab sets that for itself)
gradlab always runs in the environment as it is.

--isa avx2 measures the AVX2 path on a machine that has AVX-512 (as an AVX2-only processor
would run): gradlab's kernels are held to their AVX2 variant (GRADLAB_ISA=avx2), and libtorch
to its AVX2 kernels in both environments (ATEN_CPU_CAPABILITY=avx2, OPENBLAS_CORETYPE=Haswell).
Its table goes to a section of its own in BENCHMARKS.md.
"""

import argparse
import csv
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from research_targets import FINAL, TARGETS, steps_to_targets
from run_config import read_config

# Kernels OpenBLAS falls back to when it does not know a CPU: none of them uses AVX.
GENERIC_OPENBLAS_CORES = {
    "katmai", "coppermine", "northwood", "prescott", "banias", "core2", "penryn", "dunnington",
    "nehalem", "atom", "unknown", "generic",
}
TUNED_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),  # the largest glibc accepts: 32 MiB
    "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
    # What gradlab chooses for itself (autograd/threads.h).
    "OMP_WAIT_POLICY": "PASSIVE",
    "GOMP_SPINCOUNT": "10000",
}
# Holding both engines to AVX2 (--isa avx2).
AVX2_GRADLAB_ENV = {"GRADLAB_ISA": "avx2"}
AVX2_TORCH_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Haswell"}
MHA_SHAPES = [(1, 3, 4, 2), (32, 64, 128, 4), (16, 128, 256, 8), (8, 256, 512, 8)]
# Long sequences (bench_shared.h's kLongMhaShapes), each without and with the causal mask.
LONG_MHA_SHAPES = [(8, 256, 256, 8), (4, 512, 256, 8), (2, 1024, 256, 8), (1, 2048, 256, 8),
                   (1, 4096, 256, 8)]
MATMUL_SIZES = [256, 512, 1024, 2048]
# The research runs: `gradlab train --config` against the PyTorch replica
# scripts/research_torch.py. cap: the steps every engine runs at every thread count for the
# ratio (--steps, a multiple of the config's eval-every so that both evaluate alike; the
# schedules are constant, so these are the whole run's first steps, each as costly as any
# other), the steps to the targets then coming from one whole run of each engine at the last
# thread count; None: whole runs at every thread count.
RESEARCH_RUNS = [
    {"name": "grokking", "label": "grokking, configs/grokking.ini",
     "config": "configs/grokking.ini", "args": [], "cap": 250},
    {"name": "mqar_256_32", "label": "MQAR (256, 32), configs/mqar.ini",
     "config": "configs/mqar.ini",
     "args": ["--context", "256", "--pairs", "32", "--symbols", "512"], "cap": 100},
    {"name": "induction", "label": "induction, configs/induction.ini",
     "config": "configs/induction.ini", "args": [], "cap": None},
]


def mha_flops(b, t, c, h, causal=False):
    # Forward: four projections (2BTC^2 each) and two attention products (2BT^2C each, half
    # of them under the causal mask); backward: twice the forward.
    return 3.0 * (8 * b * t * c * c + (2 if causal else 4) * b * t * t * c)


def workloads():
    out = []
    shapes = [(shape, False) for shape in MHA_SHAPES]
    shapes += [(shape, causal) for shape in LONG_MHA_SHAPES for causal in (False, True)]
    for (b, t, c, h), causal in shapes:
        suffix = "_causal" if causal else ""
        out.append({
            "key": f"mha_fwd_bwd/B{b}_T{t}_C{c}_H{h}{suffix}",
            "label": f"MHA fwd+bwd (B,T,C,H)=({b},{t},{c},{h}){', causal' if causal else ''}",
            "kind": "gbench",
            "flops": mha_flops(b, t, c, h, causal),
        })
    out.append({"key": "train_step/copy_default", "label": "train step, default copy model",
                "kind": "gbench", "flops": None})
    out.append({"key": "step_products/copy_default",
                "label": "that step's matrix products alone", "kind": "gbench",
                "flops": None})  # from the benchmark's own `flops` counter
    out.append({"key": "copy_run/to_99", "label": "copy run to 99% exact match",
                "kind": "copy_run", "flops": None})
    for n in MATMUL_SIZES:
        out.append({"key": f"matmul/N{n}", "label": f"matmul {n}x{n} @ {n}x{n}",
                    "kind": "gbench", "flops": 2.0 * n ** 3})
    out.append({"key": "char_lm/run", "label": "char LM run, --lm-config",
                "kind": "lm_run", "flops": None})  # from the text's vocabulary: lm_flops
    for run_spec in RESEARCH_RUNS:
        out.append({"key": f"research/{run_spec['name']}", "label": run_spec["label"],
                    "kind": "research_run", "flops": None, "run": run_spec})
    return out


def lm_flops(config, vocabulary):
    """FLOPs of a language-model run, evaluations left out: per trained token, 6 per weight of
    every matrix product (forward 2, backward 4; the tied head counts once) plus attention's
    two [T, T] products at 3 x 2 x T x C per layer (the full square, as dense kernels compute)."""
    c, f, layers, t = (int(config[k]) for k in ("d-model", "d-ff", "layers", "context"))
    weights = layers * (4 * c * c + 2 * c * f) + vocabulary * c
    per_token = 6 * weights + layers * 3 * 2 * 2 * t * c
    return per_token * t * int(config["batch-size"]) * int(config["steps"])


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, env):
    """Runs cmd to completion; returns (returncode, stdout, stderr, seconds, peak_rss_mib)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), seconds, usage.ru_maxrss / 1024.0


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def lscpu_model():
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown", os.cpu_count()
    fields = {k.strip(): v.strip() for k, v in
              (line.split(":", 1) for line in text.splitlines() if ":" in line)}
    model = fields.get("Model name", "unknown")
    if "CPU family" in fields and "Model" in fields:
        # Model names such as "AMD EPYC" leave out the generation; family and model tell it.
        model += f" (family {fields['CPU family']}, model {fields['Model']})"
    return model, os.cpu_count()


def git_revision():
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def machine_cpu_seconds():
    """(busy, stolen) CPU-seconds of the whole machine since boot, from /proc/stat, or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]] + [0] * 8
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def own_cpu_seconds():
    """CPU-seconds used by this script and the benchmark processes it has waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Runner:
    def __init__(self, args):
        self.args = args
        self.gradlab_bench = os.path.join(args.build, "bench", "gradlab_bench")
        self.torch_bench = os.path.join(args.build, "bench", "gradlab_torch_bench")
        self.gradlab_cli = os.path.join(args.build, "gradlab")
        self.have_torch = os.access(self.torch_bench, os.X_OK) and not args.no_torch
        base = dict(os.environ)
        torch_env = dict(base)
        if args.torch_ld_path:
            torch_env["LD_LIBRARY_PATH"] = os.pathsep.join(
                p for p in [args.torch_ld_path, base.get("LD_LIBRARY_PATH", "")] if p)
        gradlab_env = dict(base)
        if args.isa == "avx2":
            gradlab_env.update(AVX2_GRADLAB_ENV)
            torch_env.update(AVX2_TORCH_ENV)
        self.envs = {"gradlab": gradlab_env}
        self.probe = {}
        if self.have_torch:
            self.envs["as-is"] = torch_env
            self.envs["tuned"] = self.tuned_env(torch_env)
        self.scratch = tempfile.mkdtemp(prefix="gradlab-bench-")

    def gradlab_isa(self):
        """The lines of `gradlab --version` that say which instruction set runs where."""
        code, out, _, _, _ = run([self.gradlab_cli, "--version"], self.envs["gradlab"])
        if code != 0:
            return []
        return [line.strip() for line in out.splitlines()
                if line.startswith(("kernels:", "other code compiled for:"))]

    def probe_torch(self, env):
        code, out, err, _, _ = run([self.torch_bench, "--probe"], env)
        if code != 0:
            raise SystemExit(f"bench: {self.torch_bench} --probe failed ({code}): {err.strip()}")
        return json.loads(out)

    def tuned_env(self, torch_env):
        env = dict(torch_env)
        if self.args.isa != "avx2":
            env.pop("OPENBLAS_CORETYPE", None)
        env.update(TUNED_ENV)
        self.probe["as-is"] = self.probe_torch(torch_env)
        detected = self.probe_torch(env)
        core = detected.get("openblas_core", "")
        if core and core.lower() in GENERIC_OPENBLAS_CORES:
            flags = cpu_flags()
            forced = "SkylakeX" if "avx512f" in flags else "Haswell" if "avx2" in flags else ""
            if forced:
                log(f"bench: OpenBLAS detects this CPU as {core}; tuned environment sets "
                    f"OPENBLAS_CORETYPE={forced}")
                env["OPENBLAS_CORETYPE"] = forced
                detected = self.probe_torch(env)
        self.probe["tuned"] = detected
        self.tuned_settings = {k: env[k] for k in sorted(env)
                               if k.startswith(("MALLOC_", "OPENBLAS_", "OMP_WAIT_POLICY", "GOMP_"))}
        return env

    def engines(self):
        if not self.have_torch:
            return ["gradlab"]
        return ["gradlab"] + (["as-is", "tuned"] if self.args.torch_env == "both"
                              else [self.args.torch_env])

    def gbench_once(self, engine, key, threads):
        binary = self.gradlab_bench if engine == "gradlab" else self.torch_bench
        cmd = [binary, f"--threads={threads}", f"--benchmark_filter=^{re.escape(key)}/",
               "--benchmark_format=json"]
        code, out, err, _, rss = run(cmd, self.envs[engine])
        if code != 0:
            raise SystemExit(f"bench: {' '.join(cmd)} failed ({code}):\n{err.strip()}")
        data = json.loads(out)
        runs = data.get("benchmarks", [])
        if len(runs) != 1:
            raise SystemExit(f"bench: {' '.join(cmd)} ran {len(runs)} benchmarks, expected 1")
        r = runs[0]
        if r.get("error_occurred"):
            raise SystemExit(f"bench: {key} on {engine}: {r.get('error_message')}")
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[r["time_unit"]]
        return {"seconds": r["real_time"] * scale, "rss_mib": rss, "check": r.get("check"),
                "flops": r.get("flops"),
                "context": {k: data["context"].get(k) for k in ("blas", "openblas_core")}}

    def copy_run_once(self, engine, threads, index):
        if engine == "gradlab":
            out_dir = os.path.join(self.scratch, f"copy-{threads}-{index}")
            cmd = [self.gradlab_cli, "train", "--out", out_dir, "--threads", str(threads)]
            code, out, err, wall, rss = run(cmd, self.envs[engine])
            m = re.search(r"Trained (\d+) steps in ([\d.]+) s: .*exact match ([\d.]+)%", out)
            if code != 0 or not m:
                raise SystemExit(f"bench: {' '.join(cmd)} failed ({code}):\n{out}\n{err}")
            return {"seconds": float(m.group(2)), "steps": int(m.group(1)),
                    "exact_match": float(m.group(3)) / 100, "reached": "target reached" in out,
                    "wall": wall, "rss_mib": rss}
        cmd = [self.torch_bench, f"--threads={threads}", "--copy_run"]
        code, out, err, wall, rss = run(cmd, self.envs[engine])
        if code not in (0, 3):
            raise SystemExit(f"bench: {' '.join(cmd)} failed ({code}):\n{err.strip()}")
        r = json.loads(out.strip().splitlines()[-1])
        r.update({"wall": wall, "rss_mib": rss})
        return r

    def lm_prepare(self):
        """The replica's interpreter check, the text's vocabulary and its validation split as a
        file (for `gradlab eval --data`), once."""
        if hasattr(self, "lm"):
            return self.lm
        config = read_config(self.args.lm_config)
        with open(self.args.lm_data, encoding="utf-8") as f:
            text = f.read()
        val_text = os.path.join(self.scratch, "validation.txt")
        with open(val_text, "w", encoding="utf-8") as f:
            f.write(text[int(len(text) * (1 - float(config["val-fraction"]))):])
        self.lm = {"config": config, "val_text": val_text,
                   "flops": lm_flops(config, len(set(text)))}
        return self.lm

    def lm_run_once(self, engine, threads, index):
        lm = self.lm_prepare()
        seed = self.args.lm_seeds[index % len(self.args.lm_seeds)]
        common = ["--config", self.args.lm_config, "--data", self.args.lm_data,
                  "--seed", str(seed), "--threads", str(threads)]
        if engine == "gradlab":
            out_dir = os.path.join(self.scratch, f"lm-{threads}-{index}")
            cmd = [self.gradlab_cli, "train", "--out", out_dir] + common
            code, out, err, wall, rss = run(cmd, self.envs[engine])
            m = re.search(r"Trained (\d+) steps in ([\d.]+) s: held-out loss ([\d.]+)", out)
            last = re.search(r"Checkpoint: (\S+)", out)
            if code != 0 or not m or not last:
                raise SystemExit(f"bench: {' '.join(cmd)} failed ({code}):\n{out}\n{err}")
            cmd = [self.gradlab_cli, "eval", "--checkpoint", last.group(1), "--data",
                   lm["val_text"], "--threads", str(threads)]
            code, out, err, _, _ = run(cmd, self.envs[engine])
            full = re.search(r"^loss ([\d.]+)", out, re.M)
            if code != 0 or not full:
                raise SystemExit(f"bench: {' '.join(cmd)} failed ({code}):\n{out}\n{err}")
            r = {"seconds": float(m.group(2)), "steps": int(m.group(1)),
                 "final_val_loss": float(m.group(3)), "full_val_loss": float(full.group(1))}
        else:
            cmd = ["/usr/bin/python3", os.path.join(os.path.dirname(__file__), "char_lm_torch.py")]
            code, out, err, wall, rss = run(cmd + common, self.envs[engine])
            if code != 0:
                raise SystemExit(f"bench: {' '.join(cmd + common)} failed ({code}):\n{err}")
            r = json.loads(out.strip().splitlines()[-1])
        r.update({"seed": seed, "wall": wall, "rss_mib": rss, "flops": lm["flops"],
                  "reached": True})
        return r

    def replica_engines(self, what):
        """gradlab, and a PyTorch replica in both environments when Python has torch."""
        if not self.have_torch:
            return ["gradlab"]
        code = run(["/usr/bin/python3", "-c", "import torch"], self.envs["tuned"])[0]
        if code != 0:
            log(f"bench: /usr/bin/python3 cannot import torch: {what} runs gradlab only")
            return ["gradlab"]
        return self.engines()

    def research_run_once(self, engine, spec, threads, index, steps=None):
        """One research run: `steps` (the config's when None) or until its target. Its wall time
        is the training loop's (evaluations included) as each engine reports it."""
        common = ["--config", spec["config"]] + spec["args"] + ["--threads", str(threads)]
        common += ["--steps", str(steps)] if steps else []
        if engine == "gradlab":
            out_dir = os.path.join(self.scratch, f"research-{spec['name']}-{threads}-{index}"
                                   + ("" if steps else "-whole"))
            cmd = [self.gradlab_cli, "train", "--out", out_dir] + common
            code, out, err, wall, rss = run(cmd, self.envs[engine])
            m = re.search(r"Trained (\d+) steps in ([\d.]+) s", out)
            if code != 0 or not m:
                raise SystemExit(f"bench: {' '.join(cmd)} failed ({code}):\n{out}\n{err}")
            with open(os.path.join(out_dir, "metrics.csv"), newline="") as f:
                curve = [{k: float(v) if v else None for k, v in row.items()}
                         for row in csv.DictReader(f)]
            r = {"seconds": float(m.group(2)), "steps": int(m.group(1)),
                 "stop": "target" if "(target reached)" in out else "steps"}
        else:
            cmd = ["/usr/bin/python3", os.path.join(os.path.dirname(__file__), "research_torch.py")]
            code, out, err, wall, rss = run(cmd + common, self.envs[engine])
            if code != 0:
                raise SystemExit(f"bench: {' '.join(cmd + common)} failed ({code}):\n{err}")
            r = json.loads(out.strip().splitlines()[-1])
            curve = r["curve"]
        config = read_config(spec["config"])
        task, whole = config["task"], not steps
        # A whole run reached what it runs for: its target, or its steps when it has none.
        has_target = float(config.get("target-exact-match", "0.99")) > 0
        r.update({"targets": steps_to_targets(task, curve),
                  "final_value": float(curve[-1][FINAL[task]]) if curve else None,
                  "task": task, "whole": whole, "curve": curve,
                  "reached": not whole or not has_target or r["stop"] == "target",
                  "wall": wall, "rss_mib": rss})
        return r

    def research_whole(self, work, threads, engine):
        """One whole run of gradlab and of the replica in `engine` (none: gradlab only): the
        steps to the targets of a workload whose timed runs are capped."""
        whole = {"threads": threads, "env": engine,
                 "gradlab": self.research_run_once("gradlab", work["run"], threads, 0)}
        if engine:
            whole["torch"] = self.research_run_once(engine, work["run"], threads, 0)
        log(f"{work['key']:<32} threads={threads}  whole run: gradlab "
            f"{whole['gradlab']['seconds']:.1f} s ({whole['gradlab']['steps']} steps)"
            + (f", PyTorch[{engine}] {whole['torch']['seconds']:.1f} s "
               f"({whole['torch']['steps']} steps)" if engine else ""))
        return whole

    def measure(self, work, threads):
        reps = {"copy_run": self.args.copy_reps, "lm_run": len(self.args.lm_seeds),
                "research_run": self.args.research_reps}.get(work["kind"], self.args.reps)
        engines = {"lm_run": lambda: self.replica_engines("the language model"),
                   "research_run": lambda: self.replica_engines("the research runs")
                   }.get(work["kind"], self.engines)()
        samples = {e: [] for e in engines}
        for i in range(reps):
            order = engines[i % len(engines):] + engines[:i % len(engines)]  # rotate
            for e in order:
                if work["kind"] == "copy_run":
                    samples[e].append(self.copy_run_once(e, threads, i))
                elif work["kind"] == "lm_run":
                    samples[e].append(self.lm_run_once(e, threads, i))
                elif work["kind"] == "research_run":
                    samples[e].append(self.research_run_once(e, work["run"], threads, i,
                                                             work["run"]["cap"]))
                else:
                    samples[e].append(self.gbench_once(e, work["key"], threads))
        return samples


def summarize(samples):
    secs = [s["seconds"] for s in samples]
    med = statistics.median(secs)
    spread = (max(secs) - min(secs)) / 2 / med * 100 if med > 0 else 0.0
    out = {"median": med, "spread_pct": spread, "n": len(secs), "all": secs,
           "rss_mib": max(s["rss_mib"] for s in samples)}
    if "steps" in samples[0]:
        out["steps"] = [s["steps"] for s in samples]
        out["reached"] = all(s.get("reached") for s in samples)
    checks = [s.get("check") for s in samples if s.get("check") is not None]
    if checks:
        out["check"] = checks[0]
    if samples[0].get("flops"):
        out["flops"] = samples[0]["flops"]
    return out


def fmt_time(seconds):
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms" if seconds < 0.1 else f"{seconds * 1e3:.0f} ms"
    return f"{seconds * 1e6:.3g} µs"


def time_cell(summary):
    if summary is None:
        return "—"
    cell = f"{fmt_time(summary['median'])} ±{summary['spread_pct']:.0f}%"
    if "steps" in summary:
        steps = sorted(set(summary["steps"]))
        cell += f" ({'/'.join(map(str, steps))} steps{'' if summary['reached'] else ', target NOT reached'})"
    return cell


def build_rows(results):
    rows, details, warnings = [], [], []
    for r in results:
        g = r["gradlab"]
        ref_name = None
        ref = None
        references = [e for e in ("as-is", "tuned") if e in r]
        if references:
            ref_name = min(references, key=lambda e: r[e]["median"])
            ref = r[ref_name]
        ratio = f"{g['median'] / ref['median']:.2f}" if ref else "—"
        if r["flops"]:
            gf = f"{r['flops'] / g['median'] / 1e9:.3g}"
            gf += f" / {r['flops'] / ref['median'] / 1e9:.3g}" if ref else ""
        else:
            gf = "—"
        mem = f"{g['rss_mib']:.0f}" + (f" / {ref['rss_mib']:.0f}" if ref else "")
        rows.append([r["label"], str(r["threads"]), time_cell(g), time_cell(ref), ratio, gf, mem,
                     ref_name or "—"])
        if len(references) == 2:
            details.append([r["label"], str(r["threads"]), time_cell(r["as-is"]),
                            time_cell(r["tuned"])])
            # Same inputs on both sides: the first loss (MHA), C[0,0] (matmul) or the sum of
            # each product's first element (step products) must agree.
            if r["key"].startswith(("mha", "matmul", "step_products")) and "check" in g and "check" in ref:
                a, b = g["check"], ref["check"]
                rel = abs(a - b) / max(abs(a), abs(b), 1e-12)
                r["check_rel_diff"] = rel
                if rel > 1e-3:
                    warnings.append(f"{r['key']} threads={r['threads']}: gradlab computed {a}, "
                                    f"libtorch {b} (relative difference {rel:.2g})")
    return rows, details, warnings


def lm_rows(results):
    """One row per thread count and seed of the language-model runs: time and loss, both sides."""
    rows = []
    for r in results:
        references = [e for e in ("as-is", "tuned") if e in r]
        if not r["key"].startswith("char_lm") or not references:
            continue
        faster = min(references, key=lambda e: r[e]["median"])
        for g, t in zip(r["samples"]["gradlab"], r["samples"][faster]):
            rows.append([str(r["threads"]), str(g["seed"]), f"{g['seconds']:.1f} s",
                         f"{t['seconds']:.1f} s", f"{g['seconds'] / t['seconds']:.2f}",
                         f"{g['flops'] / g['seconds'] / 1e9:.1f}",
                         f"{g['final_val_loss']:.4f} / {t['final_val_loss']:.4f}",
                         f"{g['full_val_loss']:.4f} / {t['full_val_loss']:.4f}",
                         f"{g['full_val_loss'] - t['full_val_loss']:+.4f}",
                         f"{g['rss_mib']:.0f} / {t['rss_mib']:.0f}"])
    return rows


def median_sample(samples):
    """The sample of median time (the later of the two middle ones for an even count)."""
    return sorted(samples, key=lambda x: x["seconds"])[len(samples) // 2]


def research_cells(g, t):
    """The steps to each target and the last evaluation of a whole run, gradlab / PyTorch (t
    None: gradlab only)."""
    step = lambda x, n: "—" if not x or x["targets"].get(n) is None else str(x["targets"][n])
    targets = "; ".join(f"{n}: {step(g, n)} / {step(t, n)}" for n in g["targets"]) or "—"
    column = FINAL[g["task"]]
    if column.endswith("_loss"):
        value = lambda v: "—" if v is None else f"{v:.3f}"
    else:
        value = lambda v: "—" if v is None else f"{100 * v:.1f}%"
    final = (f"{column.replace('_', ' ')} {value(g['final_value'])} / "
             f"{value(t['final_value']) if t else '—'}")
    return targets, final


def research_rows(results):
    """One row per thread count of each research run (its timed runs, whole or capped: the
    median sample of each engine), and one for a capped workload's whole runs; gradlab against
    the replica in its faster environment."""
    rows = []
    for r in results:
        if not r["key"].startswith("research/"):
            continue
        references = [e for e in ("as-is", "tuned") if e in r]
        faster = min(references, key=lambda e: r[e]["median"]) if references else None
        g = median_sample(r["samples"]["gradlab"])
        t = median_sample(r["samples"][faster]) if faster else None
        spread = lambda e: f" ±{r[e]['spread_pct']:.0f}%" if len(r["samples"][e]) > 1 else ""
        if r.get("cap"):
            steps, targets, final = f"{r['cap']} (capped)", "—", "—"
        else:
            steps = f"{g['steps']}" + (f" / {t['steps']}" if t else "")
            targets, final = research_cells(g, t)
        rows.append([r["label"], str(r["threads"]), steps,
                     fmt_time(r["gradlab"]["median"]) + spread("gradlab"),
                     fmt_time(r[faster]["median"]) + spread(faster) if faster else "—",
                     f"{r['gradlab']['median'] / r[faster]['median']:.2f}" if faster else "—",
                     targets, final,
                     f"{r['gradlab']['rss_mib']:.0f}"
                     + (f" / {r[faster]['rss_mib']:.0f}" if faster else ""), faster or "—"])
        if "whole" in r:
            w = r["whole"]
            g, t = w["gradlab"], w.get("torch")
            targets, final = research_cells(g, t)
            rows.append([r["label"], str(w["threads"]),
                         f"whole: {g['steps']}" + (f" / {t['steps']}" if t else ""),
                         fmt_time(g["seconds"]), fmt_time(t["seconds"]) if t else "—",
                         f"{g['seconds'] / t['seconds']:.2f}" if t else "—", targets, final,
                         f"{g['rss_mib']:.0f}" + (f" / {t['rss_mib']:.0f}" if t else ""),
                         w["env"] or "—"])
    return rows


RESEARCH_HEADER = ["workload", "threads", "steps: gradlab / PyTorch", "gradlab", "PyTorch",
                   "gradlab / PyTorch", "steps to targets: gradlab / PyTorch",
                   "last evaluation: gradlab / PyTorch", "peak RSS MiB gradlab / PyTorch",
                   "PyTorch env"]


LM_HEADER = ["threads", "seed", "gradlab", "PyTorch", "gradlab / PyTorch", "gradlab GFLOP/s",
             "val loss, 240 windows: gradlab / PyTorch",
             "val loss, whole split: gradlab / PyTorch", "difference", "peak RSS MiB"]


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


HEADER = ["workload", "threads", "gradlab", "libtorch", "gradlab / libtorch",
          "GFLOP/s gradlab / libtorch", "peak RSS MiB gradlab / libtorch", "libtorch env"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default="build", help="CMake build directory (default build)")
    p.add_argument("--reps", type=int, default=5, help="process runs per engine (default 5)")
    p.add_argument("--copy-reps", type=int, default=3, help="copy runs per engine (default 3)")
    p.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    p.add_argument("--only", default="", help="regex: run only the matching workload keys")
    p.add_argument("--torch-ld-path", default="",
                   help="directory prepended to LD_LIBRARY_PATH for libtorch (its BLAS)")
    p.add_argument("--no-torch", action="store_true", help="run the gradlab side only")
    p.add_argument("--torch-env", choices=["both", "tuned", "as-is"], default="both",
                   help="the libtorch/PyTorch environments to run (default both; the table quotes "
                        "the faster of those run)")
    p.add_argument("--lm-data", help="the text of the language-model workload (none: skipped)")
    p.add_argument("--lm-config", default="configs/char.ini",
                   help="its configuration (default configs/char.ini)")
    p.add_argument("--lm-seeds", default="1,2", help="its seeds, one run each (default 1,2)")
    p.add_argument("--research-reps", type=int, default=1,
                   help="timed runs per engine of each research run (default 1)")
    p.add_argument("--research-cap", type=int, default=0,
                   help="time every research run over this many steps (a multiple of its "
                        "eval-every; default: each its own, RESEARCH_RUNS)")
    p.add_argument("--research-whole", default=".", metavar="REGEX",
                   help="the capped research runs whose steps to their targets come from one "
                        "whole run of each engine (default: all; '^$': none)")
    p.add_argument("--isa", choices=["native", "avx2"], default="native",
                   help="native: each engine's best kernels (default); avx2: both held to AVX2")
    p.add_argument("--json", help="write every sample here")
    p.add_argument("--markdown", help="write the generated section here")
    p.add_argument("--doc", help="replace the generated section of this file (BENCHMARKS.md)")
    p.add_argument("--no-doc", action="store_true", help="ignore --doc")
    p.add_argument("--from-json", metavar="FILE",
                   help="run nothing: render the table of an earlier --json file")
    args = p.parse_args()
    if args.no_doc:
        args.doc = None
    args.lm_seeds = [int(x) for x in args.lm_seeds.split(",") if x]
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        publish(args, saved["meta"], saved["results"])
        return

    runner = Runner(args)
    try:
        run_all(args, runner)
    finally:
        shutil.rmtree(runner.scratch, ignore_errors=True)


def run_all(args, runner):
    threads_list = [int(t) for t in args.threads.split(",") if t]
    model, cores = lscpu_model()
    started = datetime.datetime.now().astimezone()
    load_start = loadavg()
    machine_start, own_start = machine_cpu_seconds(), own_cpu_seconds()
    t0 = time.perf_counter()
    if not runner.have_torch:
        log("bench: gradlab_torch_bench is not available: running the gradlab side only")
    if load_start > 0.5 * (cores or 1):
        log(f"bench: warning: load average {load_start:.1f} on {cores} CPUs; timings will be noisy")

    results = []
    for work in workloads():
        if args.only and not re.search(args.only, work["key"]):
            continue
        if work["kind"] == "lm_run":
            if not args.lm_data:
                log("bench: no --lm-data: the language-model workload is skipped")
                continue
            work = dict(work, label=f"char LM run, {args.lm_config}")
        if work["kind"] == "research_run" and args.research_cap:
            work = dict(work, run=dict(work["run"], cap=args.research_cap))
        for threads in threads_list:
            samples = runner.measure(work, threads)
            r = {"key": work["key"], "label": work["label"], "threads": threads,
                 "flops": work["flops"], "samples": samples}
            for e, s in samples.items():
                r[e] = summarize(s)
            r["flops"] = r["flops"] or r["gradlab"].get("flops")
            if work["kind"] == "research_run":
                r["cap"] = work["run"]["cap"]
            results.append(r)
            msg = f"{work['key']:<32} threads={threads}  gradlab {time_cell(r['gradlab'])}"
            for e in list(samples)[1:]:
                msg += f"  libtorch[{e}] {time_cell(r[e])}"
            log(msg)
            # A capped research run's steps to its targets: one whole run of each engine, at
            # the last thread count, the replica in its faster environment there.
            if (r.get("cap") and re.search(args.research_whole, work["key"])
                    and threads == threads_list[-1]):
                references = [e for e in ("as-is", "tuned") if e in r]
                faster = min(references, key=lambda e: r[e]["median"]) if references else None
                r["whole"] = runner.research_whole(work, threads, faster)
    elapsed = time.perf_counter() - t0
    machine_end = machine_cpu_seconds()
    other = None
    if machine_start and machine_end:
        # Busy CPU time of the whole machine minus our own: what other work used meanwhile.
        other = {"seconds": machine_end[0] - machine_start[0] - (own_cpu_seconds() - own_start),
                 "stolen": machine_end[1] - machine_start[1]}
    meta = {"started": started.isoformat(), "elapsed": elapsed, "other_cpu": other,
            "revision": git_revision(), "machine": model, "cpus": cores,
            "load_start": load_start, "load_end": loadavg(), "have_torch": runner.have_torch,
            "probe": runner.probe, "tuned_env": getattr(runner, "tuned_settings", {}),
            "reps": args.reps, "copy_reps": args.copy_reps, "isa": args.isa,
            "torch_env": args.torch_env,
            "research_reps": args.research_reps,
            "gradlab_isa": runner.gradlab_isa(),
            "torch_isa_env": AVX2_TORCH_ENV if args.isa == "avx2" else {}}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    publish(args, meta, results)
    log(f"bench: done in {meta['elapsed'] / 60:.1f} min")


def render(meta, results):
    """The generated section of BENCHMARKS.md (and the table, for the terminal)."""
    rows, details, warnings = build_rows(results)
    table = markdown_table(HEADER, rows)
    started = datetime.datetime.fromisoformat(meta["started"])
    cores = meta["cpus"] or 1
    section = [
        f"Measured {started:%Y-%m-%d %H:%M %Z} by `./scripts/bench.sh"
        + (" --isa avx2" if meta.get("isa") == "avx2" else "") + "` in "
        f"{meta['elapsed'] / 60:.1f} min.",
        "",
        f"- gradlab: commit `{meta['revision']}`"
        + (" (`-dirty`: with uncommitted changes)" if meta["revision"].endswith("-dirty") else "")
        + ", Release build.",
        f"- Machine: {meta['machine']}, {meta['cpus']} CPUs; load average "
        f"{meta['load_start']:.1f} at the start, {meta['load_end']:.1f} at the end (the "
        "benchmark's own processes count in it).",
    ]
    if meta.get("gradlab_isa"):
        section += ["- Instruction sets: gradlab (`gradlab --version`): "
                    + "; ".join(meta["gradlab_isa"]) + "."
                    + ("" if not meta.get("torch_isa_env") else " libtorch held to AVX2: "
                       + ", ".join(f"`{k}={v}`" for k, v in meta["torch_isa_env"].items())
                       + " in both environments.")]
    other = meta.get("other_cpu")
    if other:
        share = other["seconds"] / (meta["elapsed"] * cores) if meta["elapsed"] > 0 else 0.0
        section += [
            f"- Other work on the machine used {max(other['seconds'], 0.0):.0f} CPU-seconds during "
            f"the run ({100 * max(share, 0.0):.0f}% of the {cores} CPUs; from /proc/stat, minus "
            f"the benchmark's own processes); the hypervisor reported {other['stolen']:.0f} s "
            "stolen from this machine's CPUs."]
        busy = share > 0.1 or other["stolen"] > 0.05 * meta["elapsed"] * cores
    else:
        busy = max(meta["load_start"], meta["load_end"]) > 0.5 * cores
    if busy:
        section += [
            "- **The machine was busy**: other work took CPU time from both engines, two-thread runs most (a descheduled OpenMP thread "
            "stalls every parallel region). Re-run on an idle machine before quoting ratios."]
    if meta["have_torch"]:
        probe, tuned = meta["probe"].get("tuned") or {}, meta["tuned_env"]
        as_is_core = (meta["probe"].get("as-is") or {}).get("openblas_core") or "?"
        section += [
            f"- libtorch {probe.get('torch', '?')}; BLAS used by libtorch: "
            f"`{os.path.basename(probe.get('blas', '?'))}`"
            + (f" (OpenBLAS core {as_is_core} as-is, {probe.get('openblas_core') or '?'} tuned)"
               if probe.get("openblas_core") else "")
            + ".",
            "- libtorch environments: as-is = the environment unchanged; tuned = "
            + ", ".join(f"`{k}={v}`" for k, v in tuned.items())
            + ("" if "OPENBLAS_CORETYPE" in tuned else ", `OPENBLAS_CORETYPE` unset")
            + (". The table quotes the faster (column *libtorch env*)."
               if meta.get("torch_env", "both") == "both"
               else f". Only {meta['torch_env']} ran (`--torch-env {meta['torch_env']}`)."),
        ]
    section += [
        f"- {meta['reps']} process runs per engine and workload ({meta['copy_reps']} for the "
        f"copy run, {meta.get('research_reps', 1)} for each research run), alternating engines; "
        "median ± half the min–max range.",
        "",
        table,
    ]
    lm = lm_rows(results)
    if lm:
        section += [
            "", "Language model (`--lm-config` on the text `--lm-data` names; PyTorch: the "
            "replica `scripts/char_lm_torch.py` in the faster environment). Time: the training "
            "loop, 2000 steps and 8 evaluations over 240 windows; whole split: every token of "
            "the validation split after the last step. GFLOP/s: the run's matrix-product FLOPs "
            "per second of gradlab's time.", "", markdown_table(LM_HEADER, lm)]
    research = research_rows(results)
    if research:
        section += [
            "", "Research runs (`gradlab train --config` against the PyTorch replica "
            "`scripts/research_torch.py`, the same model, data distribution, optimizer, "
            "evaluations and stop rule, in its faster environment). Time: the training loop "
            "as each engine reports it, evaluations included. A capped row runs that many "
            "steps of the config for the ratio, and the whole runs after it (one per engine, "
            "at the last thread count) give its steps to the targets (the step of each "
            "engine's first evaluation that reaches it; —: none did): "
            + "; ".join(f"{task}: " + ", ".join(name for name, *_ in targets)
                        for task, targets in TARGETS.items()) + ".",
            "", markdown_table(RESEARCH_HEADER, research)]
    if warnings:
        section += ["", "**Outputs differ:**", ""] + [f"- {w}" for w in warnings]
    if details:
        section += ["", "<details><summary>libtorch in both environments</summary>", "",
                    markdown_table(["workload", "threads", "as-is", "tuned"], details), "",
                    "</details>"]
    return "\n".join(section) + "\n", table, warnings


def publish(args, meta, results):
    text, table, warnings = render(meta, results)
    print()
    print(table)
    for w in warnings:
        log("bench: warning: outputs differ: " + w)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.doc:
        replace_section(args.doc, "bench-avx2" if meta.get("isa") == "avx2" else "bench", text)


def replace_section(path, name, text):
    """Replaces what lies between the <!-- NAME:begin ... --> and <!-- NAME:end --> lines."""
    begin, end = f"<!-- {name}:begin (generated by scripts/bench.sh) -->", f"<!-- {name}:end -->"
    with open(path) as f:
        doc = f.read()
    i, j = doc.find(begin), doc.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"bench: {path} has no '{begin}' ... '{end}' section")
    with open(path, "w") as f:
        f.write(doc[:i + len(begin)] + "\n" + text + doc[j:])
    log(f"bench: updated {path}")


if __name__ == "__main__":
    main()
