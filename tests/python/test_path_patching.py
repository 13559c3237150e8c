"""gradlab.patch_path: a head into every later input scores as activation patching of that head,
and a bad spec is an error naming it."""

import numpy as np
import pytest

import gradlab

CLEAN = np.array([[1, 5, 9, 2, 7, 1, 5, 9, 2]])
CORRUPT = np.array([[1, 5, 9, 2, 7, 1, 5, 11, 2]])


def metric(logits):
    """The last position's logit of token 7 minus token 3."""
    return float(logits[0, -1, 7] - logits[0, -1, 3])


def test_a_head_into_every_later_input_is_activation_patching_of_it(runs):
    model = gradlab.load(runs["induction"])
    path = gradlab.patch_path(model, CLEAN, CORRUPT, "0.2 -> 1.0, 1.1, 1.2, 1.3, logits", metric)
    assert path["senders"] == ["0.2"]
    assert path["receivers"][:3] == ["1.0.q", "1.0.k", "1.0.v"] and path["receivers"][-1] == "logits"
    activation = gradlab.patch(model, CLEAN, CORRUPT, "blocks.0.attn.hook_result", metric)
    head = [site[1] for site in activation["sites"]].index(2)
    want = (activation["patched"][head] - activation["corrupt"]) / (
        activation["clean"] - activation["corrupt"])
    assert path["score"] == pytest.approx(want, abs=1e-4)  # float32, different attention paths
    assert path["score"] == pytest.approx(
        (path["patched"] - path["corrupt"]) / (path["clean"] - path["corrupt"]))


def test_a_bad_spec_names_itself(runs):
    model = gradlab.load(runs["induction"])
    with pytest.raises(Exception, match=r"path '0.9 -> logits': '0.9': unknown head 9"):
        gradlab.patch_path(model, CLEAN, CORRUPT, "0.9 -> logits", metric)
