"""The compression family (P8, P9, P11): planning, claim validation, and runs that write what the verdicts read."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from plmclaims import plan as P
from plmclaims.claims import load_claim, load_claims
from plmclaims.data.sts import BENCHMARKS
from plmclaims.errors import UserError
from plmclaims.families.compression.plan import compress_run
from plmclaims.families.compression.runs import compress
from plmclaims.tiers import load_tier, with_overrides

CLAIMS = ("compression/int8-costs-little", "compression/heads-can-be-masked", "compression/magnitude-pruning-keeps-30-40")


def _plans(repo, tier):
    return {p.claim.id: p for p in P.plan_all(load_claims(repo / "replications", list(CLAIMS)), tier)}


def test_every_setting_is_its_own_run_and_the_uncompressed_reference_is_shared(repo):
    plans = _plans(repo, load_tier("micro"))
    refs = {plans[c].measurements[m].runs[0].key for c, m in
            zip(CLAIMS, ("float32", "all_heads", "dense"))}
    assert len(refs) == 1  # one uncompressed run serves all three claims
    pruned = [plans[CLAIMS[2]].measurements[m].runs[0] for m in ("sparse_30", "sparse_40", "sparse_60", "sparse_80")]
    assert len({r.key for r in pruned}) == 4 and [r.setting for r in pruned] == [
        "fraction-0.3", "fraction-0.4", "fraction-0.6", "fraction-0.8"]
    assert all(r.instance == "all-minilm-l6-v2" and r.kind == "compress" for r in pruned)
    # the lexical floors are the STS family's own score runs on the same pairs, one pair of runs for all three claims
    assert len({plans[c].lexical["tfidf"].key for c in CLAIMS}) == 1
    assert set(plans[CLAIMS[0]].lexical) == {"bow", "tfidf"}
    assert plans[CLAIMS[0]].lexical["tfidf"].kind == "score"


def test_a_sweep_is_a_curve_whose_points_are_the_single_settings_runs(repo):
    from plmclaims.families.compression.plan import sweep_points

    micro = _plans(repo, load_tier("micro"))[CLAIMS[2]].measurements
    curve = micro["sparsity"]
    assert list(curve.points) == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert curve.points[0.3][0].key == micro["sparse_30"].runs[0].key  # a point and the single measurement share a run
    assert [r.key for r in curve.runs] == [rs[0].key for rs in curve.points.values()]
    # the tiny tier thins a sweep to its ends and middle; the cap is not part of a run's identity
    tiny = _plans(repo, load_tier("tiny"))[CLAIMS[2]].measurements["sparsity"]
    assert list(tiny.points) == [0.0, 0.4, 0.9]
    uncapped = with_overrides(load_tier("tiny"), {"compression.max_curve_points": 10})
    assert _plans(repo, uncapped)[CLAIMS[2]].measurements["sparsity"].points[0.4][0].key == tiny.points[0.4][0].key
    assert sweep_points([0.1, 0.2, 0.3, 0.4, 0.5], 2) == [0.1, 0.5] and sweep_points([0.1, 0.2], None) == [0.1, 0.2]


def test_head_pruning_reads_stsb_train_and_its_settings_change_its_key(repo, data_root):
    tier = load_tier("micro")
    heads = compress_run(tier, "senteval", "all-minilm-l6-v2", "raw", "head-pruning", {"fraction": 0.4})
    int8 = compress_run(tier, "senteval", "all-minilm-l6-v2", "raw", "quantisation", {"backend": "torch"})
    heads_files, int8_files = (P.data_files(r, tier, str(data_root)) for r in (heads, int8))
    assert any(f.endswith("sts-train.csv") for f in heads_files) and not any(f.endswith("sts-train.csv") for f in int8_files)
    more = with_overrides(tier, {"compression.importance_pairs": 1024})
    assert compress_run(more, "senteval", "all-minilm-l6-v2", "raw", "head-pruning", {"fraction": 0.4}).key != heads.key
    assert compress_run(tier, "senteval", "all-minilm-l6-v2", "raw", "head-pruning", {"fraction": 0.2}).key != heads.key


def test_the_onnx_build_runs_only_on_the_model_it_is_a_build_of(repo):
    tiny = _plans(repo, load_tier("tiny"))[CLAIMS[0]].measurements
    assert tiny["int8_torch"].status == "ok"
    assert tiny["int8_onnx"].status == "not-run" and "all-MiniLM-L6-v2" in tiny["int8_onnx"].reason
    micro = _plans(repo, load_tier("micro"))[CLAIMS[0]].measurements
    assert micro["int8_onnx"].status == "ok"


def test_a_bad_pooling_in_the_tier_stops_the_plan(repo):
    tier = with_overrides(load_tier("tiny"), {"compression.pooling": "max"})
    with pytest.raises(UserError, match=r"compression.pooling.*'max'.*allowed values: mean"):
        _plans(repo, tier)


@pytest.mark.parametrize("params, expected", [
    ({"fraction": 1.5}, "must be a number in [0, 1)"),
    ({"backend": "tensorrt"}, "must be one of torch, onnx"),
    ({"fraction": 0.4, "lr": 1.0e-3}, "does not read 'lr'; allowed: fraction"),
    ({"fraction": [0.4, 0.2]}, "or a rising list of them"),
])
def test_compression_parameters_are_checked_when_the_claim_loads(tmp_path, repo, params, expected):
    data = yaml.safe_load((repo / "replications" / "compression" / "magnitude-pruning-keeps-30-40.yaml").read_text())
    method = "quantisation" if "backend" in params else "magnitude-pruning"
    data["measurements"]["sparse_30"].update(method=method, params=params)
    path = tmp_path / "compression" / "x.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(dict(data, id="compression/x")))
    with pytest.raises(UserError) as err:
        load_claim(path, tmp_path)
    assert expected in str(err.value) and "measurements.sparse_30" in str(err.value)


@pytest.fixture(scope="module")
def minilm_tier():
    """The tiny tier with the real all-MiniLM-L6-v2 as the compressed encoder, on 24 pairs per benchmark."""
    return with_overrides(load_tier("tiny"), {"roles.compression-encoder": {"asset": "all-minilm-l6-v2"},
                                              "data.max_pairs": 24, "compression.importance_pairs": 16})


def _run(tier, tmp_path, data_root, method, params):
    run = compress_run(tier, "senteval", "all-minilm-l6-v2", "raw", method, params)
    out = tmp_path / method / run.setting / "metrics.json"
    out.parent.mkdir(parents=True)
    compress(tier, run, str(data_root), str(tmp_path / "resources"), out, threads=2)
    return json.loads(out.read_text())["values"], np.load(out.with_name("predictions.npz"))


def test_compressed_runs_write_what_the_verdicts_read(minilm_tier, tmp_path, data_root):
    ref, ref_pred = _run(minilm_tier, tmp_path, data_root, "uncompressed", {})
    int8, int8_pred = _run(minilm_tier, tmp_path, data_root, "quantisation", {"backend": "torch"})
    onnx, _ = _run(minilm_tier, tmp_path, data_root, "quantisation", {"backend": "onnx"})
    pruned, _ = _run(minilm_tier, tmp_path, data_root, "magnitude-pruning", {"fraction": 0.5})
    heads, heads_pred = _run(minilm_tier, tmp_path, data_root, "head-pruning", {"fraction": 0.25})
    for b in BENCHMARKS:  # the score-run layout, paired on the same documents
        assert {f"{b}::{k}" for k in ("pred", "gold", "subsets", "index")} <= set(ref_pred.files)
        assert np.array_equal(ref_pred[f"{b}::index"], int8_pred[f"{b}::index"])
        assert len(ref_pred[f"{b}::pred"]) == 24
    assert set(ref["benchmarks"]) == set(BENCHMARKS)
    # int8 changes the similarities a little, never wholesale (quantize tests bound the vectors themselves)
    diff = np.concatenate([ref_pred[f"{b}::pred"] - int8_pred[f"{b}::pred"] for b in BENCHMARKS])
    assert 0 < np.abs(diff).max() < 0.1
    assert int8["size_mb"] < 0.8 * int8["size_mb_float32"] and onnx["size_mb"] < 0.5 * onnx["size_mb_float32"]
    assert abs(pruned["sparsity"] - 0.5) < 1e-3
    assert heads["heads_total"] == 72 and heads["heads_masked"] == 18 and len(heads["masked"]) == 18
    assert heads["importance_pairs"] == 16 and np.asarray(heads["importance"]).shape == (6, 12)
    assert not np.allclose(heads_pred["STS12::pred"], ref_pred["STS12::pred"])  # masking reached the forward pass
