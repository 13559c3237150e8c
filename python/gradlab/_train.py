"""gradlab.train: a run as `gradlab train` trains it (same directory, checkpoints, metrics)."""

import os

from gradlab import _config, _native


def train(config, out, callback=None, overwrite=False, **settings):
    """Trains the run config describes (a dict of `gradlab train`'s keys, or a config file's
    path; keyword settings override it) into the run directory `out`, which must not hold a run
    unless overwrite=True. callback(step, metrics) is called at each evaluation; returning False
    stops the run (the final checkpoint is saved). Returns the final metrics and checkpoint."""
    pairs = _config.settings(config) + _config.settings(settings)
    pairs.append(("out", os.fspath(out)))
    return _native.train(pairs, overwrite, callback)
