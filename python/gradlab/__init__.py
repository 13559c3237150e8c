"""gradlab in Python: load a trained model, run it with hooks and caches (TransformerLens's
names), train (one run, or a sweep of them), and use the instruments; the C++ engine
(gradlab._native) does every computation.
docs/python.md describes the API."""

from gradlab import tasks, vis
from gradlab._circuits import OV, QK, FactoredMatrix, circuit_matrices, circuits
from gradlab._fourier import fourier
from gradlab._model import ActivationCache, HookPoint, HookedModel, load
from gradlab._native import (Generator, Tensor, bernoulli, equal, get_num_threads, greater,
                             greater_equal, less, less_equal, not_equal, rand_like, randn_like,
                             set_num_threads, tensor, where)
from gradlab._instruments import (ablate, attribution_patch, batches, heads, lens, mean_over,
                                  patch, patch_path, read_dataset, superposition)
from gradlab._sae import SAE, sae_train
from gradlab._sweep import sweep
from gradlab._train import train

__all__ = [
    "ActivationCache", "FactoredMatrix", "Generator", "HookPoint", "HookedModel", "OV", "QK", "SAE",
    "Tensor", "ablate", "attribution_patch", "batches", "bernoulli", "circuit_matrices", "circuits",
    "equal", "fourier", "get_num_threads", "greater", "greater_equal", "heads", "lens", "less",
    "less_equal", "load", "mean_over", "not_equal", "patch", "patch_path", "rand_like",
    "randn_like", "read_dataset", "sae_train", "set_num_threads", "sweep", "superposition", "tasks",
    "tensor", "train", "vis", "where",
]
