#!/usr/bin/env python3
"""Plots the peak memory and time of multi-head attention forward + backward against the
sequence length, gradlab against libtorch, from the JSON that scripts/bench.sh writes:

    scripts/plot_attention_memory.py build/bench/results/latest.json OUT.png [--threads 1]

It reads the rows of bench_shared.h's long shapes (C = 256, 8 heads, B x T = 2048 tokens up to
T = 2048, then one sequence of 4096),
without and with the causal mask, and for libtorch the faster of its two environments. Peak
memory is the peak resident size of the process that ran the workload, so it includes each
program's fixed part (libraries, allocator), shown by the flat start of the curves.
Uses Debian's python3-matplotlib.
"""

import argparse
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

KEY = re.compile(r"mha_fwd_bwd/B(\d+)_T(\d+)_C256_H8(_causal)?$")


def series(results, threads):
    """{(engine, causal): [(T, rss_mib, seconds), ...]} sorted by T."""
    out = {}
    for r in results:
        m = KEY.match(r["key"])
        if not m or r["threads"] != threads or int(m.group(2)) < 256:
            continue
        t, causal = int(m.group(2)), bool(m.group(3))
        references = [e for e in ("as-is", "tuned") if e in r]
        engines = [("gradlab", r["gradlab"])]
        if references:
            faster = min(references, key=lambda e: r[e]["median"])
            engines.append(("libtorch", r[faster]))
        for name, summary in engines:
            out.setdefault((name, causal), []).append((t, summary["rss_mib"], summary["median"]))
    return {k: sorted(v) for k, v in out.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json")
    parser.add_argument("out")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with open(args.json) as f:
        data = json.load(f)
    lines = series(data["results"], args.threads)
    if not lines:
        sys.exit(f"{args.json}: no long-sequence attention rows at {args.threads} thread(s); run "
                 "./scripts/bench.sh --only 'mha_fwd_bwd/B[0-9]+_T[0-9]+_C256' first")
    fig, (memory, time) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"gradlab": "tab:blue", "libtorch": "tab:red"}
    for (engine, causal), points in sorted(lines.items()):
        ts = [p[0] for p in points]
        label = f"{engine}{', causal' if causal else ''}"
        kw = {"color": styles[engine], "linestyle": "--" if causal else "-", "marker": "o"}
        memory.plot(ts, [p[1] for p in points], label=label, **kw)
        time.plot(ts, [p[2] * 1e3 for p in points], label=label, **kw)
    for ax, title, unit in ((memory, "peak resident memory", "MiB"),
                            (time, "forward + backward", "ms")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T (C = 256, 8 heads, B = 2048 / T; B = 1 at 4096)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"Multi-head attention, {args.threads} thread(s): {data['meta']['machine']}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
