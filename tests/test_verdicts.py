"""Verdicts from synthetic runs whose truth we control: holds, contradicted, inconclusive, not-judged, controls."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from plmclaims import plan as P
from plmclaims.claims import load_claim
from plmclaims.provenance import atomic_save_npz, atomic_write_json
from plmclaims.tiers import load_tier, with_overrides
from plmclaims.verdicts import decide_claim

BENCH = ["STSBenchmark", "SICK-R"]
N = 300


def _claim(tmp_path: Path, checks: list, measurements: dict, controls=("random-weights",)) -> object:
    data = {"id": "sts/synthetic", "version": 1, "statement": "A synthetic claim for testing verdicts.", "seed_point": "T5",
            "source": {"paper": "Test", "table": "T1"},
            "protocol": {"family": "sts", "evaluator": "senteval", "benchmarks": BENCH, "split": "test", "aggregation": "all",
                         "metric": "spearman", "text_form": "tokenised"},
            "tolerance": 1.0, "measurements": measurements, "checks": checks, "controls": list(controls)}
    path = tmp_path / "claims" / "sts" / "synthetic.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return load_claim(path, tmp_path / "claims")


def _write_run(results: Path, run: P.ScoreRun, noise: float, seed: int, gold: dict) -> None:
    rng = np.random.default_rng(seed)
    arrays = {}
    for b in BENCH:
        arrays[f"{b}::pred"] = gold[b] + rng.normal(scale=noise, size=N)
        arrays[f"{b}::gold"] = gold[b]
        arrays[f"{b}::subsets"] = np.array([b] * N)
    out = Path(run.path(str(results)))
    atomic_save_npz(out.with_name("predictions.npz"), **arrays)
    atomic_write_json(out, {"values": {"benchmarks": {b: {} for b in BENCH}}, "provenance": {}})


def _materialise(cplan, results: Path, noise_of: dict) -> None:
    gold = {b: np.random.default_rng(99).normal(size=N) for b in BENCH}
    for i, run in enumerate(cplan.score_runs()):
        _write_run(results, run, noise_of(run), 1000 + i, gold)


@pytest.fixture
def tier():
    return with_overrides(load_tier("micro"), {"bootstrap.resamples": 200})


M = {"good": {"role": "raw-encoder", "method": "mean", "reported": {"avg": 80.0}},
     "bad": {"role": "raw-encoder", "method": "cls-before-pooler", "reported": {"avg": 30.0}}}


def _noise(good, bad, random=None):
    def f(run):
        if ".random-" in run.instance and random is not None:
            return random
        return good if run.method == "mean" else bad
    return f


def test_clear_difference_holds(tmp_path, tier):
    claim = _claim(tmp_path, [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}], M, controls=())
    cplan = P.plan_claim(claim, tier)
    _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    assert v["checks"][0]["outcome"] == "holds"
    assert v["verdict"] == "reproduced" and "relations only" in v["note"]
    m = v["measurements"]["good"]
    assert m["ci_low"] < m["measured"] < m["ci_high"] and len(m["seeds"]) == 2


def test_reversed_difference_is_contradicted(tmp_path, tier):
    claim = _claim(tmp_path, [{"type": "greater", "a": "bad", "b": "good", "scope": "mechanics"}], M, controls=())
    cplan = P.plan_claim(claim, tier)
    _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    assert v["checks"][0]["outcome"] == "contradicted" and v["verdict"] == "not-reproduced"


def test_equal_methods_are_inconclusive_and_approx_equal_holds(tmp_path, tier):
    checks = [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"},
              {"type": "approx-equal", "a": "good", "b": "bad", "delta": 12.0, "scope": "mechanics"}]
    claim = _claim(tmp_path, checks, M, controls=())
    cplan = P.plan_claim(claim, tier)
    _materialise(cplan, tmp_path / "r", _noise(1.0, 1.0))
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    assert v["checks"][0]["outcome"] == "inconclusive"
    assert v["checks"][1]["outcome"] == "holds", v["checks"][1]["details"]
    assert v["verdict"] == "inconclusive"


def test_semantic_check_is_shown_but_not_judged_at_micro(tmp_path, tier):
    claim = _claim(tmp_path, [{"type": "greater", "a": "bad", "b": "good", "scope": "semantic"}], M, controls=())
    cplan = P.plan_claim(claim, tier)
    _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    assert v["checks"][0]["outcome"] == "not-judged" and v["checks"][0]["measured_outcome"] == "contradicted"
    assert v["verdict"] == "not-run"


def test_random_weights_control_turns_a_hold_into_inconclusive(tmp_path, tier):
    check = {"type": "greater", "a": "good", "b": "bad", "scope": "mechanics", "control": "random-weights"}
    claim = _claim(tmp_path, [check], M)
    cplan = P.plan_claim(claim, tier)
    assert all(".random-s" in r.instance for r in cplan.measurements["good"].controls)
    _materialise(cplan, tmp_path / "r", _noise(0.5, 2.0, random=0.5))  # random weights as good as trained
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    assert v["checks"][0]["outcome"] == "inconclusive" and "random weights" in v["checks"][0]["reason"]
    _materialise(cplan, tmp_path / "r2", _noise(0.3, 2.0, random=3.0))  # trained clearly beats random
    v = decide_claim(cplan, tier, str(tmp_path / "r2"))
    assert v["checks"][0]["outcome"] == "holds" and v["checks"][0]["control"]["outcome"] == "holds"


def test_magnitudes_decide_direction_holds_on_paper_assets(tmp_path, tier):
    paper_like = with_overrides(tier, {"roles.raw-encoder": {"asset": "micro-bert"}})  # no substitute_for: magnitudes judged
    claim = _claim(tmp_path, [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}], M, controls=())
    cplan = P.plan_claim(claim, paper_like)
    _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
    v = decide_claim(cplan, paper_like, str(tmp_path / "r"))
    assert v["verdict"] == "direction-holds" and "magnitudes are off" in v["note"]


def test_reproduces_check_uses_tolerance(tmp_path, tier):
    plain = with_overrides(tier, {"roles.raw-encoder": {"asset": "micro-bert"}})
    ms = {"good": {"role": "raw-encoder", "method": "mean", "reported": {}}}
    claim = _claim(tmp_path, [{"type": "reproduces", "measurement": "good", "target": "STSBenchmark", "tolerance": 0.5,
                               "scope": "mechanics"}], ms, controls=())
    cplan = P.plan_claim(claim, plain)
    _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
    measured = decide_claim(cplan, plain, str(tmp_path / "r"))["measurements"]["good"]["per_benchmark"]["STSBenchmark"]["measured"]
    for reported, outcome in ((measured + 0.4, "holds"), (measured - 0.6, "contradicted")):
        claim.measurements["good"].reported["STSBenchmark"] = reported
        v = decide_claim(P.plan_claim(claim, plain), plain, str(tmp_path / "r"))
        assert v["checks"][0]["outcome"] == outcome


def test_unavailable_role_gives_not_run_with_reason(tmp_path, tier):
    ms = {"s": {"role": "released-simcse", "method": "cls-before-pooler", "reported": {"avg": 76.25}}}
    claim = _claim(tmp_path, [{"type": "reproduces", "measurement": "s", "scope": "mechanics"}], ms, controls=())
    cplan = P.plan_claim(claim, tier)
    assert cplan.score_runs() == []
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    assert v["verdict"] == "not-run" and "no released SimCSE" in v["note"]
    assert v["measurements"]["s"]["measured"] is None
