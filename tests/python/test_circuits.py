"""gradlab's weight-based circuits in Python: FactoredMatrix against numpy on the formed product,
the heads' W_QK and W_OV against the model's parameters, and gradlab.circuits against numpy."""

import numpy as np
import pytest

import gradlab

RNG = np.random.default_rng(0)


def close(actual, expected):
    assert np.linalg.norm(actual - expected) <= 1e-10 * np.linalg.norm(expected)


@pytest.mark.parametrize("m, r, n", [(7, 3, 5), (5, 8, 6)])
def test_factored_matrix_matches_numpy(m, r, n):
    a, b = RNG.normal(size=(m, r)), RNG.normal(size=(r, n))
    f = gradlab.FactoredMatrix(a, b)
    product = a @ b
    assert f.shape == (m, n) and (f.ldim, f.mdim, f.rdim) == (m, r, n)
    close(f.AB, product)
    close(f.T.AB, product.T)
    assert f.norm() == pytest.approx(np.linalg.norm(product), rel=1e-10)
    k = min(m, r, n)
    close(f.S, np.linalg.svd(product, compute_uv=False)[:k])
    u, s, v = f.svd()
    close(u @ np.diag(s) @ v.T, product)
    right, left = RNG.normal(size=(n, 4)), RNG.normal(size=(2, m))
    close((f @ right).AB, product @ right)
    close((left @ f).AB, left @ product)
    close((f @ f.T).AB, product @ product.T)
    close(f.reduced(1).AB, s[0] * np.outer(u[:, 0], v[:, 0]))


def test_eigenvalues_are_those_of_ba():
    a, b = RNG.normal(size=(9, 4)), RNG.normal(size=(4, 9))
    f = gradlab.FactoredMatrix(a, b)
    close(f.BA, b @ a)
    expected = sorted(np.linalg.eigvals(a @ b), key=abs, reverse=True)[:4]
    close(np.sort_complex(f.eigenvalues), np.sort_complex(np.array(expected)))


def test_shape_errors_are_value_errors():
    with pytest.raises(ValueError, match=r"A \[3, 2\] \(M, R\) and B \[4, 5\]"):
        gradlab.FactoredMatrix(np.zeros((3, 2)), np.zeros((4, 5)))
    with pytest.raises(ValueError, match="not square"):
        gradlab.FactoredMatrix(np.zeros((3, 2)), np.zeros((2, 5))).eigenvalues


def test_heads_match_the_parameters(runs):
    model = gradlab.load(runs["induction"])
    params = {name: np.asarray(view, dtype=np.float64)
              for name, view in model.named_parameters().items()}
    mats = gradlab.circuit_matrices(model)
    assert mats["attentions"] == ["blocks.0.attn", "blocks.1.attn"]
    heads, width = 4, 64
    d = width // heads
    close(mats["W_E"], params["embed.token_embedding.weight"])
    close(mats["W_U"], params["head.weight"].T)
    for layer in range(2):
        prefix = f"blocks.{layer}.attn."
        w_q, w_k, w_v = (params[prefix + p + "_proj.weight"] for p in "qkv")  # [out, in]
        w_o = params[prefix + "out_proj.weight"]  # [C, H*D]
        for h in range(heads):
            rows = slice(h * d, (h + 1) * d)
            close(gradlab.QK(model)[layer][h].AB, w_q[rows].T @ w_k[rows])
            close(mats["OV"][layer][h].AB, w_v[rows].T @ w_o[:, rows].T)


def test_circuits_match_numpy(runs):
    model = gradlab.load(runs["induction"])
    mats = gradlab.circuit_matrices(model)
    report = gradlab.circuits(model, baseline_draws=3, seed=1)
    assert report["ov_singular_values"].shape == (2, 4, 16)
    assert report["composition_k"].shape == (8, 8)
    w_e, w_u = mats["W_E"], mats["W_U"]
    for layer in range(2):
        for h in range(4):
            ov, qk = mats["OV"][layer][h].AB, mats["QK"][layer][h].AB
            assert report["ov_norm"][layer, h] == pytest.approx(np.linalg.norm(ov), rel=1e-10)
            close(report["qk_singular_values"][layer, h],
                  np.linalg.svd(qk, compute_uv=False)[:16])
            full = w_e @ ov @ w_u
            eig = np.linalg.eigvals(full)
            assert report["copying_score"][layer, h] == pytest.approx(
                eig.sum().real / np.abs(eig).sum(), abs=1e-9)
            own = np.diag(full)
            ranks = 1 + ((full >= own[:, None]).sum(axis=1) - 1)
            assert report["diagonal_mean_rank"][layer, h] == pytest.approx(ranks.mean())
            assert report["diagonal_top1"][layer, h] == pytest.approx((ranks == 1).mean())
    for a in range(8):
        for b in range(8):
            k = report["composition_k"][a, b]
            if a // 4 >= b // 4:
                assert np.isnan(k)
                continue
            writer = mats["OV"][0][a].AB
            reader = mats["QK"][1][b - 4].AB
            assert k == pytest.approx(np.linalg.norm(writer @ reader.T)
                                      / np.linalg.norm(writer) / np.linalg.norm(reader), rel=1e-10)
    assert 0 < report["baseline_k"] < 1
