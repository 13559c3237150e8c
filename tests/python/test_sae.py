"""gradlab.sae_train and gradlab.SAE: a short training on a checkpoint, its file read back, the
encoder and decoder on numpy arrays agreeing with --intervene POINT=sae:FILE's splice."""

import numpy as np
import pytest

import gradlab

POINT = "blocks.0.hook_resid_post"


def test_trains_saves_and_reconstructs(runs, tmp_path):
    model = gradlab.load(runs["induction"])
    sae = gradlab.sae_train(model, POINT, 12, tmp_path / "sae", l1=0.01, lr=1e-2, steps=10,
                            log_every=5)
    assert (tmp_path / "sae" / "metrics.csv").read_text().count("\n") == 3
    loaded = gradlab.SAE.load(str(tmp_path / "sae" / "sae.h5"))
    assert (loaded.hook, loaded.d_sae) == (POINT, 12)
    assert np.array_equal(loaded.W_dec, sae.W_dec)
    assert np.allclose(np.linalg.norm(loaded.W_dec, axis=1), 1, atol=1e-5)
    tokens = np.array([[1, 5, 6, 7, 5, 6, 7, 9]])
    _, cache = model.run_with_cache(tokens, names_filter=POINT)
    x = cache[POINT][0]
    assert np.allclose(loaded.decode(loaded.encode(x)), loaded.reconstruct(x), atol=1e-6)
    with model.intervene(POINT + "=sae:" + str(tmp_path / "sae" / "sae.h5")):
        _, spliced = model.run_with_cache(tokens, names_filter=POINT)
    assert np.allclose(spliced[POINT][0], loaded.reconstruct(x), atol=1e-5)
    with pytest.raises(Exception, match="already holds files"):
        gradlab.sae_train(model, POINT, 12, tmp_path / "sae", steps=1)
