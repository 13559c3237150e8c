"""Weight-based circuits (docs/circuits.md): FactoredMatrix, each head's W_QK and W_OV (as
TransformerLens's model.QK and model.OV, indexed [layer][head]), and `gradlab circuits`'s numbers
as numpy arrays."""

from gradlab._native import FactoredMatrix
from gradlab import _native


def circuit_matrices(model):
    """{"attentions": names [L], "QK", "OV": [L][H] FactoredMatrix [C, C], "W_E": [V, C],
    "W_U": [C, V]}, float64, in the row-vector convention (x @ OV is what a head writes)."""
    return _native.circuit_matrices(model._native)


def QK(model):
    """W_Q^h W_K^h.T of every head, [L][H] FactoredMatrix [C, C] (TransformerLens's model.QK)."""
    return circuit_matrices(model)["QK"]


def OV(model):
    """W_V^h W_O^h of every head, [L][H] FactoredMatrix [C, C] (TransformerLens's model.OV)."""
    return circuit_matrices(model)["OV"]


def circuits(model, baseline_draws=16, seed=0):
    """As `gradlab circuits`: {"ov_norm": [L, H], "ov_singular_values": [L, H, D],
    "copying_score": [L, H], "composition_k": [L*H, L*H] (NaN where a pair does not compose),
    "baseline_k": float, ...}."""
    options = _native.CircuitOptions()
    options.baseline_draws, options.seed = baseline_draws, seed
    return _native.circuits(model._native, options)
