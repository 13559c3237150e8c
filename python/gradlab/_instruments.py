"""The instruments of gradlab's interp/ as functions: head scores, the logit lens, ablation,
activation, path and attribution patching, a toy model of superposition's geometry; data sets of prompts in batches of one length,
and the mean of an instrument over them; and reading the datasets of the files gradlab's
commands write."""

import functools
import os

import numpy as np

from gradlab import _filters, _native


def heads(model, length=0, sequences=64, seed=0):
    """Previous-token, duplicate-token and induction scores of every head, as `gradlab heads`:
    {pattern point: {"induction": [H], ...}}."""
    options = _native.HeadScoreOptions()
    options.length, options.sequences, options.seed = length, sequences, seed
    return _native.heads(model._native, options)


def superposition(checkpoint):
    """A toy model of superposition's geometry (a checkpoint of task tms, its path or the model
    gradlab.load opened), as `gradlab superposition`: {"weight": W [I, m, n], "norms": [I, n],
    "dimensionality": D [I, n], "angles": degrees [I, n] (None unless m = 2), "densities": [I]}.
    ValueError for a checkpoint of another task."""
    native = checkpoint._native if hasattr(checkpoint, "_native") else _native.load(
        os.fspath(checkpoint))
    return _native.superposition(native)


def lens(model, tokens, source=None):
    """The logit lens: {"embed" or "blocks.<i>": logits [B, T, V]}, the last the model's."""
    return _native.lens(model._native, tokens, source)


def ablate(path, mode="zero", parts=None):
    """Held-out metrics of a checkpoint with each head and feed-forward sublayer knocked out in
    turn (as `gradlab ablate`), or with parts [(point, head)] knocked out together."""
    return _native.ablate(os.fspath(path), mode, list(parts or []))


def patch(model, clean, corrupt, names_filter, metric, per_position=False, source_clean=None,
          source_corrupt=None):
    """metric(logits) of the corrupted run with each site of the points names_filter names (one
    per head, and per position with per_position) patched from the clean run."""
    names = functools.partial(_native.hook_point_names, model._native)
    return _native.patch(model._native, clean, corrupt, source_clean, source_corrupt,
                         _filters.patterns(names_filter, names), per_position, metric)


def patch_path(model, clean, corrupt, path, metric):
    """Path patching, as `gradlab patch --path`: metric(logits) of the clean run, the corrupted
    run and the corrupted run in which the senders' clean outputs reach only the receivers
    ('0.3, 0.mlp -> 1.2.k, 1.mlp, logits'; docs/circuits.md), with score = (patched - corrupt) /
    (clean - corrupt) and the parsed senders and receivers."""
    return _native.patch_path(model._native, clean, corrupt, path, metric)


def attribution_patch(model, clean, corrupt, names_filter, metric, per_position=False,
                      source_clean=None, source_corrupt=None):
    """Attribution patching: for each site of patch(), the first-order estimate of its patched
    metric, metric(corrupt) + sum over the site of (clean - corrupt) * d metric / d activation,
    the gradient taken on the corrupted run; from one forward and one backward pass. metric(logits)
    returns (value, gradient): the metric and its gradient with respect to the logits [B, T, V]
    (for a logit difference, +1 and -1 at the answers' tokens). Returns {"clean", "corrupt",
    "sites": [(point, head, position)], "estimated": [sites]}, as patch() returns "patched"."""
    names = functools.partial(_native.hook_point_names, model._native)
    return _native.attribution_patch(model._native, clean, corrupt, source_clean, source_corrupt,
                                      _filters.patterns(names_filter, names), per_position, metric)


def read_dataset(path, name):
    """A numeric dataset of an HDF5 file gradlab wrote (`gradlab activations`, `lens`)."""
    return _native.read_dataset(os.fspath(path), name)


def batches(model, prompts, batch_size=32):
    """Prompts (a language model's strings, or token id lists) in batches of one length, as the
    commands' --data streams them: yields (indices [R], tokens [R, T]) with R <= batch_size, the
    prompts grouped by length in the order each length first appears."""
    if batch_size < 1:
        raise ValueError(f"batches: batch_size {batch_size}: at least 1")
    groups = {}
    for index, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            tokens = model.to_tokens(prompt)[0]
        else:
            tokens = np.asarray(prompt, dtype=np.int64)
        if tokens.ndim != 1 or tokens.size == 0:
            raise ValueError(f"batches: prompt {index} is not a non-empty list of token ids")
        groups.setdefault(tokens.size, []).append((index, tokens))
    if not groups:
        raise ValueError("batches: no prompts")
    for group in groups.values():
        for first in range(0, len(group), batch_size):
            rows = group[first:first + batch_size]
            yield (np.array([index for index, _ in rows], dtype=np.int64),
                   np.stack([tokens for _, tokens in rows]))


def mean_over(model, prompts, instrument, batch_size=32):
    """The mean over the prompts of instrument(tokens [R, T]) -> array [R, ...], summed in
    float64 batch by batch (batches), so that only one batch's results are alive at a time."""
    total, count = None, 0
    for indices, tokens in batches(model, prompts, batch_size):
        values = np.asarray(instrument(tokens), dtype=np.float64)
        if values.ndim == 0 or values.shape[0] != len(indices):
            raise ValueError(f"mean_over: the instrument gave {values.shape} for {len(indices)} "
                             "prompts; it must give one row per prompt")
        if total is not None and values.shape[1:] != total.shape:
            raise ValueError(f"mean_over: prompt {indices[0]} gives rows of {values.shape[1:]}, "
                             f"the first {total.shape}: reduce each prompt to one shape (its "
                             "answer position, say)")
        total = values.sum(axis=0) if total is None else total + values.sum(axis=0)
        count += len(indices)
    return total / count
