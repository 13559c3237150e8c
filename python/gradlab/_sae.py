"""Sparse autoencoders: gradlab.SAE (a file of `gradlab sae train`, its encoder and decoder on
numpy arrays) and gradlab.sae_train, the command's training from Python (docs/experiments.md)."""

from gradlab import _native

SAE = _native.SAE


def sae_train(model, hook, d_sae, out, **options):
    """Trains an SAE on model's activations at hook, streamed from its checkpoint's own batches, as
    `gradlab sae train` does; writes out/sae.h5 and out/metrics.csv and returns the SAE. Options
    (the command's flags, with their defaults): l1=1.0, lr=3e-4, top_k=0, steps=1000,
    batch_size=0, log_every=100, dead_window=1000, resample_every=2000, seed=0, overwrite=False."""
    return _native.sae_train(model._native, hook, d_sae, str(out), **options)
