"""Python's overhead over the engine: run_with_cache of one prompt on a trained model from Python
against the same call timed inside C++, and a forward pass with a no-op Python hook on every
block against a plain one. A benchmark to read, not a test.
Usage: PYTHONPATH=build/python python3 examples/python/bench_hooks.py CHECKPOINT [REPEATS]"""
import sys
import time

import numpy as np

import gradlab
from gradlab import _native


def per_call(function, repeats):
    function()  # warm the buffer pool
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats


def main():
    model = gradlab.load(sys.argv[1])
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    block = np.arange(2, 17)  # 31 tokens: the induction model reads 32
    tokens = np.concatenate([[1], block, block])[None, :]
    _native.time_run_with_cache(model._native, tokens, ["*"], 5)
    cpp = _native.time_run_with_cache(model._native, tokens, ["*"], repeats)
    python = per_call(lambda: model.run_with_cache(tokens), repeats)
    print(f"run_with_cache, every point: C++ {cpp * 1e6:.0f} us, Python {python * 1e6:.0f} us "
          f"({python / cpp:.2f}x)")
    plain = per_call(lambda: model(tokens), repeats)
    hooked = per_call(lambda: model.run_with_hooks(
        tokens, fwd_hooks=[("blocks.*.hook_resid_post", lambda a, h: None)]), repeats)
    print(f"forward: plain {plain * 1e6:.0f} us, a no-op Python hook per block "
          f"{hooked * 1e6:.0f} us ({hooked / plain:.2f}x)")


if __name__ == "__main__":
    main()
