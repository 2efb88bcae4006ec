"""Linear CKA and its jackknife (methods/cka.py) against hand-worked values and the invariances that define it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from plmclaims.methods.cka import jackknife, linear_cka

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 5))
Y = X @ RNG.normal(size=(5, 3)) + 0.5 * RNG.normal(size=(40, 3))


def test_identical_representations_score_one():
    assert linear_cka(X, X) == pytest.approx(1.0, abs=1e-12)


def test_hand_worked_three_by_two():
    # centred already: X'X = [[2,1],[1,2]] (norm sqrt 10), Y'Y = [[2,0],[0,0]] (norm 2), Y'X = [[2,1],[0,0]] (norm^2 5)
    x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    y = np.array([[1.0, 0.0], [0.0, 0.0], [-1.0, 0.0]])
    assert linear_cka(x, y) == pytest.approx(5 / (2 * math.sqrt(10)), abs=1e-12)
    # a shift of every row changes nothing: CKA centres the columns
    assert linear_cka(x + [3.0, -2.0], y + [5.0, 7.0]) == pytest.approx(5 / (2 * math.sqrt(10)), abs=1e-12)


def test_invariant_to_rotation_and_isotropic_scaling_not_to_anisotropic_scaling():
    q, _ = np.linalg.qr(RNG.normal(size=(5, 5)))
    base = linear_cka(X, Y)
    assert 0.3 < base < 0.99
    assert linear_cka(X @ q, Y) == pytest.approx(base, abs=1e-12)
    assert linear_cka(X, X @ q) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(7.5 * X, 0.01 * Y) == pytest.approx(base, abs=1e-12)
    assert abs(linear_cka(X * [1, 1, 1, 1, 20], Y) - base) > 1e-3  # stretching one axis is no rotation


def test_unrelated_representations_score_near_zero():
    a, b = RNG.normal(size=(20000, 2)), RNG.normal(size=(20000, 2))
    assert linear_cka(a, b) < 0.005


def test_jackknife_leaves_each_item_out_exactly():
    groups = np.repeat(np.arange(10), 4)[::-1]  # items of 4 rows, first seen in reverse label order
    full, loo, pseudo = jackknife(X, Y, groups)
    assert full == pytest.approx(linear_cka(X, Y), abs=1e-12)
    items = list(dict.fromkeys(groups))
    for k, g in enumerate(items):
        keep = groups != g
        assert loo[k] == pytest.approx(linear_cka(X[keep], Y[keep]), abs=1e-10)
    np.testing.assert_allclose(pseudo, 10 * full - 9 * loo)
    assert pseudo.mean() == pytest.approx(10 * full - 9 * loo.mean())


def test_jackknife_of_a_representation_with_itself_is_one_everywhere():
    _, loo, pseudo = jackknife(X, X @ np.diag([2.0] * 5), np.arange(40) // 2)
    np.testing.assert_allclose(loo, 1.0, atol=1e-12)
    np.testing.assert_allclose(pseudo, 1.0, atol=1e-10)


def test_bad_shapes_are_one_clear_error():
    with pytest.raises(ValueError, match="same rows"):
        linear_cka(X, Y[:-1])
    with pytest.raises(ValueError, match="at least 2 items"):
        jackknife(X, Y, np.zeros(40))


# ---------------------------------------------------------------- the glue family's cka runs

def _cka_runs(tmp_path, data_root, lr):
    """A finetuned run of all-minilm-l6-v2 on 8 MRPC examples at learning rate `lr`, its cka run and one cka-layer
    run per layer, executed in tmp_path; returns (cka values, {layer: (values, predictions)})."""
    import json
    from pathlib import Path

    from plmclaims.families.glue import runs as glue_runs
    from plmclaims.families.glue.plan import cka_layer_run
    from plmclaims.tiers import load_tier, with_overrides

    tier = with_overrides(load_tier("tiny"), {"finetune.budget.max_train": 8, "finetune.budget.max_dev": 12})
    res, root = str(tmp_path / "res"), str(tmp_path / "results")
    layers = {}
    for layer in range(7):
        point = cka_layer_run(tier, "all-minilm-l6-v2", "MRPC", 1, layer, {"lr": lr})
        cka = point.upstream[0]
        tuned = cka.upstream[0]
        out = lambda r: Path(r.path(root))  # noqa: E731
        if not out(cka).exists():
            glue_runs.finetune(tuned.tier("tiny", "t"), tuned, tuned.params, str(data_root), res, out(tuned), 1, save_model=True)
            glue_runs.cka(cka.tier("tiny", "t"), cka, str(data_root), res, out(tuned), out(cka), 1)
        glue_runs.cka_layer(point.tier("tiny", "t"), point, out(cka), out(point))
        layers[layer] = (json.loads(out(point).read_text())["values"], np.load(out(point).with_name("predictions.npz")))
    return json.loads(out(cka).read_text())["values"], layers


@pytest.mark.slow
def test_a_zero_learning_rate_leaves_every_layer_at_cka_one(tmp_path, data_root):
    values, layers = _cka_runs(tmp_path, data_root, 0.0)
    assert sorted(values["layers"]) == [str(k) for k in range(7)] and values["examples"] == 12
    for layer, (v, preds) in layers.items():
        assert v["benchmarks"]["MRPC"]["cka"] == pytest.approx(1.0, abs=1e-6), layer
        np.testing.assert_allclose(preds["MRPC::pred"], 1.0, atol=1e-4)
        assert "constant" in v.get("degenerate", "constant")  # nothing to bootstrap: no spread at all


def test_fine_tuning_moves_the_layers_and_each_layer_run_is_a_score_run(tmp_path, data_root):
    values, layers = _cka_runs(tmp_path, data_root, 1.0e-3)
    ckas = [values["layers"][str(k)]["cka"] for k in range(7)]
    assert all(0.0 < c <= 1.0 + 1e-9 for c in ckas) and min(ckas) < 0.99
    for layer, (v, preds) in layers.items():
        b = v["benchmarks"]["MRPC"]
        assert v["layer"] == layer and b["examples"] == 12 == len(preds["MRPC::pred"])
        assert b["mean"] == pytest.approx(preds["MRPC::pred"].mean()) == pytest.approx(values["layers"][str(layer)]["jackknife"])
        assert set(preds.files) == {"MRPC::pred", "MRPC::gold", "MRPC::index", "MRPC::subsets"}
        assert len(set(preds["MRPC::index"])) == 12  # items pair across layers and runs on their text
