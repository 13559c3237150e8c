"""The Fourier analysis of a modular-addition model (docs/experiments.md, "Grokking's Fourier
circuit"): `gradlab fourier`'s numbers as numpy arrays."""

import os

from gradlab import _native


def fourier(model_or_checkpoint, share=0.9, neuron_threshold=0.85):
    """The analysis of a model of --task modular --operation add (a HookedModel or a checkpoint's
    path), in float64: {"modulus": p, "basis": [p, p] (constant, cos 1, sin 1, ...),
    "embedding_norms": [K + 1] (index 0 the constant), "key_frequencies": [n] and "key_shares": [n]
    (the fewest frequencies holding `share` of the embedding's non-constant squared norm),
    "neuron_shares": [F, K + 1], "neuron_frequency" and "neuron_cluster": [F] (0: none),
    "cluster_counts": [K + 1], "clustered_fraction", "logit_norms": [K + 1, K + 1],
    "losses": {"train", "test", "restricted", "excluded"}}. ValueError for another task."""
    native = getattr(model_or_checkpoint, "_native", None)
    if native is None:
        native = _native.load(os.fspath(model_or_checkpoint))
    return _native.fourier(native, share, neuron_threshold)
