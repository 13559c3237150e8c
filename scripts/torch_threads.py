"""The threads of a PyTorch replica (char_lm_torch.py, research_torch.py), as the libtorch
benchmark (bench/torch_bench.cpp) sets them: torch's, one inter-op thread, and OpenBLAS's own
pool. torch.set_num_threads alone leaves the OpenBLAS that Debian's libtorch calls (through
libblas.so.3) at its default, a thread per core: a 1024 x 1024 product at "1 thread" then used
1.8 CPU-seconds per second.
"""

import ctypes

import torch


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
