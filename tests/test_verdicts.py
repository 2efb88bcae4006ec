"""Verdicts from synthetic runs whose truth we control: holds, contradicted, inconclusive, shown, controls."""
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
    if "random-weights" not in controls:
        data["no_twin"] = "a synthetic claim testing one rule of the verdict engine without the twin"
    path = tmp_path / "claims" / "sts" / "synthetic.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return load_claim(path, tmp_path / "claims")


def _write_run(results: Path, run: P.Run, noise: float, seed: int, gold: dict) -> None:
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
    assert v["checks"][0]["outcome"] == "shown" and v["checks"][0]["measured_outcome"] == "contradicted"
    # rule: not-run is for what did not run; a measured check this tier does not judge is shown, with its outcome
    assert v["verdict"] == "shown" and "measured, not judged here: bad > good on avg: measured contradicted" in v["note"]


def test_random_weights_control_turns_a_hold_into_inconclusive(tmp_path, tier):
    check = {"type": "greater", "a": "good", "b": "bad", "scope": "mechanics", "control": "random-weights"}
    claim = _claim(tmp_path, [check], M)
    cplan = P.plan_claim(claim, tier)
    assert all(".random-s" in r.instance for r in cplan.measurements["good"].controls)
    _materialise(cplan, tmp_path / "r", _noise(0.5, 2.0, random=0.5))  # random weights as good as trained
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    c = v["checks"][0]
    # no side beats its random twin on either benchmark: nothing is informative
    assert c["outcome"] == "inconclusive" and "only 0 of 2 tasks are informative" in c["reason"]
    assert "good" in c["uninformative"]["SICK-R"] and "vs random-weights" in c["uninformative"]["SICK-R"]
    _materialise(cplan, tmp_path / "r2", _noise(0.3, 2.0, random=3.0))  # trained clearly beats random
    v = decide_claim(cplan, tier, str(tmp_path / "r2"))
    assert v["checks"][0]["outcome"] == "holds"
    assert [(f["side"], f["above"]) for f in v["checks"][0]["floors"]] == [("good", True)]


def test_magnitudes_decide_direction_holds_on_paper_assets(tmp_path, tier):
    paper_like = with_overrides(tier, {"roles.raw-encoder": {"asset": "micro-bert"}})  # no substitute_for: magnitudes judged
    claim = _claim(tmp_path, [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}], M, controls=())
    cplan = P.plan_claim(claim, paper_like)
    _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
    v = decide_claim(cplan, paper_like, str(tmp_path / "r"))
    assert v["verdict"] == "direction-holds" and "magnitudes are off" in v["note"]


def test_magnitudes_are_judged_only_where_the_runs_are_the_reference_tiers(tmp_path, tier):
    """magnitudes.same_runs_as: a measurement whose runs are exactly the reference tier's is judged on its magnitudes;
    one whose runs differ (a cut budget) on relations only, its reason in the verdict and in a reproduces check."""
    plain = with_overrides(tier, {"roles.raw-encoder": {"asset": "micro-bert"}})
    same = tmp_path / "same.yaml"  # plans exactly these runs
    same.write_text(yaml.safe_dump({"base": plain["_path"], "name": "same",
                                    "roles": {"raw-encoder": {"asset": "micro-bert"}}}))
    other = tmp_path / "other.yaml"  # another encode budget: every run differs
    other.write_text(yaml.safe_dump({"base": str(same), "name": "other", "encode": {"max_length": 96}}))
    checks = [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"},
              {"type": "reproduces", "measurement": "good", "scope": "mechanics"}]
    claim = _claim(tmp_path, checks, M, controls=())
    outcomes = {}
    for ref in (same, other):
        t = with_overrides(plain, {"magnitudes": {"same_runs_as": str(ref)}})
        cplan = P.plan_claim(claim, t)  # as the verdict command plans it
        _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
        outcomes[ref.stem] = (cplan, decide_claim(cplan, t, str(tmp_path / "r")), P.verdict_params(cplan, t))
    cplan, v, judged_params = outcomes["same"]
    assert all(pm.magnitudes == "" for pm in cplan.measurements.values())
    assert v["verdict"] == "not-reproduced" and v["checks"][1]["outcome"] == "contradicted"  # 80 is far off
    cplan, v, cut_params = outcomes["other"]
    why = "tier micro runs it under a budget cut from tier other's (other steps, epochs, examples or samples)"
    assert {pm.magnitudes for pm in cplan.measurements.values()} == {why}
    assert v["checks"][1]["outcome"] == "shown" and v["checks"][1]["measured_outcome"] == "contradicted"
    assert v["checks"][1]["reason"] == f"magnitudes are not judged {why}"
    assert v["verdict"] == "reproduced"
    assert v["note"].startswith(f"relations only: magnitudes are not judged here ({why})")
    assert v["measurements"]["good"]["magnitude_not_judged"] == why
    assert judged_params != cut_params  # the verdict reruns when the reference tier's runs change


def test_reproduces_check_uses_tolerance(tmp_path, tier):
    plain = with_overrides(tier, {"roles.raw-encoder": {"asset": "micro-bert"}})
    ms = {"good": {"role": "raw-encoder", "method": "mean", "reported": {"STSBenchmark": 0.0}}}
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


# ---------------------------------------------------------------- floors: no verdict rests on a side without signal

def test_trained_side_below_its_random_weights_floor_is_inconclusive(tmp_path, tier):
    """The micro report's 'Avg. BERT > CLS' case: the relation holds, but the credited side is below its random twin."""
    claim = _claim(tmp_path, [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}], M)
    cplan = P.plan_claim(claim, tier)
    noise = {("mean", True): 0.4, ("mean", False): 1.0, ("cls-before-pooler", True): 5.0, ("cls-before-pooler", False): 3.0}
    _materialise(cplan, tmp_path / "r", lambda run: noise[run.method, ".random-" in run.instance])
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    c = v["checks"][0]
    assert c["outcome"] == "inconclusive" and v["verdict"] == "inconclusive"
    assert v["measurements"]["good"]["floors"]["random-weights"]["avg"] > v["measurements"]["good"]["measured"]
    ft = next(f for f in c["floors"] if f["side"] == "good")  # on the tasks the check was judged on
    assert ft["floor"] == "random-weights" and not ft["above"] and ft["floor_value"] > ft["value"]
    assert f"good {ft['value']:.2f} on avg is not above its random-weights floor {ft['floor_value']:.2f}" in c["reason"]
    assert c["reason"] in v["note"]


def test_ordering_reports_the_interval_of_its_weakest_link(tmp_path, tier):
    ms = {**M, "mid": {"role": "raw-encoder", "method": "first-last"}}
    claim = _claim(tmp_path, [{"type": "ordering", "order": ["good", "mid", "bad"], "scope": "mechanics"}], ms, controls=())
    cplan = P.plan_claim(claim, tier)
    noise = {"mean": 0.5, "first-last": 0.6, "cls-before-pooler": 2.5}
    _materialise(cplan, tmp_path / "r", lambda run: noise[run.method])
    d = decide_claim(cplan, tier, str(tmp_path / "r"))["checks"][0]["details"][0]
    pairs = {p["on"]: p for p in d["pairs"]}
    weak = pairs["good > mid"]
    assert weak["ci_low"] < pairs["mid > bad"]["ci_low"] and d["weakest"] == "good > mid"
    # one pair's interval, not the lower ends of two different pairs
    assert (d["ci_low"], d["ci_high"], d["estimate"]) == (weak["ci_low"], weak["ci_high"], weak["estimate"])


def test_runs_on_other_documents_with_the_same_gold_are_not_paired(tmp_path, tier):
    claim = _claim(tmp_path, [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}], M, controls=())
    cplan = P.plan_claim(claim, tier)
    results = tmp_path / "r"
    _materialise(cplan, results, _noise(0.3, 2.0))
    run = cplan.measurements["bad"].runs[0]
    path = Path(run.path(str(results))).with_name("predictions.npz")
    arrays = dict(np.load(path))
    for b in BENCH:  # same gold labels, but a different sample of documents
        arrays[f"{b}::index"] = np.arange(N) + 1
    atomic_save_npz(path, **arrays)
    first = Path(cplan.measurements["good"].runs[0].path(str(results))).with_name("predictions.npz")
    atomic_save_npz(first, **{**dict(np.load(first)), **{f"{b}::index": np.arange(N) for b in BENCH}})
    v = decide_claim(cplan, tier, str(results))
    assert v["verdict"] == "error"
    assert "STSBenchmark scores other documents" in v["note"] and run.path(str(results)) in v["note"]


def test_error_verdict_names_the_failed_rule_and_log(tmp_path, tier):
    from plmclaims.verdicts import error_verdict

    claim = _claim(tmp_path, [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}], M, controls=())
    v = error_verdict(P.plan_claim(claim, tier), tier, [("finetune", "results/micro/logs/finetune-x.log")])
    assert v["verdict"] == "error" and v["note"] == "rule finetune failed (log: results/micro/logs/finetune-x.log)"
    assert v["checks"][0]["outcome"] == "error" and v["measurements"]["good"]["measured"] is None
    # no failure of its own: the workflow stopped at another claim's failure, and the row says so, not that it failed
    v = error_verdict(P.plan_claim(claim, tier), tier, [], [("verdict", "results/micro/logs/verdict-other.log")])
    assert v["verdict"] == "error" and v["note"].startswith("not computed: the workflow stopped at a failure this claim")
    assert "rule verdict failed (log: results/micro/logs/verdict-other.log)" in v["note"] and "--keep-going" in v["note"]
    # no job failed anywhere (the run was stopped): the row says so, and how to resume
    v = error_verdict(P.plan_claim(claim, tier), tier, [], [])
    assert v["note"].startswith("not computed: the workflow stopped before") and "no job failed" in v["note"]
    assert "failure" not in v["note"] and "--rerun-incomplete" in v["note"]


# GLUE-style synthetic runs: classification right with probability `quality` (0.5 = chance), STS-B regression

TASKS = ["CoLA", "RTE", "STS-B"]
NG = 1500
GLUE_M = {"ft": {"role": "peft-encoder-base", "method": "full-finetuning"},
          "peft": {"role": "peft-encoder-base", "method": "lora", "params": {"r": 4}}}
NONINF = {"type": "non-inferior", "a": "peft", "b": "ft", "delta": 2.0, "scope": "mechanics"}
RATIO = {"type": "ratio", "quantity": "trained-params", "direction": "at-most", "a": "peft", "b": "ft", "ratio": 0.01,
         "scope": "mechanics"}


def _glue_claim(tmp_path: Path, checks: list, **extra) -> object:
    data = {"id": "glue/synthetic", "version": 1, "statement": "A synthetic GLUE claim for testing.", "seed_point": "T11",
            "source": {"paper": "Test", "table": "T2"},
            "protocol": {"family": "glue", "evaluator": "glue-dev", "benchmarks": TASKS, "split": "dev",
                         "metric": "accuracy", "task_metrics": {"CoLA": "matthews", "STS-B": "pearson"}},
            "measurements": GLUE_M, "checks": checks, **extra}
    path = tmp_path / "claims" / "glue" / "synthetic.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return load_claim(path, tmp_path / "claims")


def chance(task: str) -> float:
    return 0.0 if task == "STS-B" else 0.5


def _glue_runs(cplan, results: Path, quality, edit=None) -> None:
    """quality(name, task) -> probability of a right label (0.5: chance) or, for STS-B, 0 = unrelated to gold."""
    rng = np.random.default_rng(7)
    gold = {"CoLA": rng.integers(0, 2, NG).astype(float), "RTE": rng.integers(0, 2, NG).astype(float),
            "STS-B": rng.uniform(0, 5, NG)}
    for name, pm in cplan.measurements.items():
        for i, run in enumerate(pm.runs):
            r = np.random.default_rng(100 * i + len(name))
            q, g = quality(name, run.task), gold[run.task]
            if run.task == "STS-B":
                pred = q * g + (1 - q) * r.uniform(0, 5, NG)
            else:
                pred = np.where(r.random(NG) < q, g, 1 - g)
            values = {"benchmarks": {run.task: {}}, "parameters": {"trainable": 5_000 if name == "peft" else 1_000_000,
                                                                   "total": 1_000_000, "fraction": 0.0}}
            arrays = {f"{run.task}::pred": pred, f"{run.task}::gold": g, f"{run.task}::subsets": np.array([run.task] * NG),
                      f"{run.task}::index": np.arange(NG)}
            if edit:
                edit(name, run, arrays, values)
            out = Path(run.path(str(results)))
            atomic_save_npz(out.with_name("predictions.npz"), **arrays)
            atomic_write_json(out, {"values": values, "provenance": {}})


@pytest.fixture
def gtier():
    t = with_overrides(load_tier("micro"), {"bootstrap.resamples": 200})
    t["roles"]["peft-encoder-base"] = {"asset": "all-minilm-l6-v2"}
    t["finetune"].pop("skip_tasks", None)  # these tests run every task; skipping has its own test
    return t


def _decide(tmp_path, tier, checks, quality, edit=None, **extra):
    cplan = P.plan_claim(_glue_claim(tmp_path, checks, **extra), tier)
    _glue_runs(cplan, tmp_path / "r", quality, edit)
    return decide_claim(cplan, tier, str(tmp_path / "r"))


def test_collapsed_baseline_makes_non_inferiority_inconclusive(tmp_path, gtier):
    """Adapters 'match' a full fine-tuning that learned nothing: the reference side failed, the method did not win."""
    v = _decide(tmp_path, gtier, [NONINF, RATIO], lambda n, t: chance(t) if n == "ft" else 0.9)
    c = v["checks"][0]
    assert c["outcome"] == "inconclusive" and v["verdict"] == "inconclusive"
    assert "ft " in c["reason"] and "on avg is not above its chance floor" in c["reason"]
    ft = [f for f in c["floors"] if f["side"] == "ft"][0]
    assert not ft["above"] and f"{ft['value']:.2f}" in c["reason"] and f"{ft['floor_value']:.2f}" in c["reason"]
    # the parameter ratio holds, but it cannot carry the claim without its quality check
    r = v["checks"][1]
    assert r["outcome"] == "inconclusive" and r["qualifies"] == 0 and "ratio alone reproduces nothing" in r["reason"]


def test_both_sides_at_chance_leave_no_informative_task(tmp_path, gtier):
    v = _decide(tmp_path, gtier, [NONINF], lambda n, t: chance(t))
    c = v["checks"][0]
    assert c["outcome"] == "inconclusive" and v["verdict"] == "inconclusive"
    assert "only 0 of 3 tasks are informative at this budget (at least 2 needed)" in c["reason"]
    assert set(c["uninformative"]) == set(TASKS) and "no side above its floor" in c["uninformative"]["RTE"]


def test_uninformative_task_is_dropped_from_the_average(tmp_path, gtier):
    quality = lambda n, t: chance(t) if t == "CoLA" else 0.9  # noqa: E731  CoLA at chance for both methods
    v = _decide(tmp_path, gtier, [NONINF], quality)
    c = v["checks"][0]
    assert c["outcome"] == "holds" and v["verdict"] == "reproduced"
    assert list(c["uninformative"]) == ["CoLA"] and c["details"][0]["tasks"] == ["RTE", "STS-B"]
    assert "judged on RTE, STS-B; uninformative (no side above its floor): CoLA" in c["reason"]
    assert "CoLA" in v["note"]
    # a claim may ask for more informative tasks than remain
    v = _decide(tmp_path, gtier, [NONINF], quality, min_informative=1.0)
    assert v["checks"][0]["outcome"] == "inconclusive" and "only 2 of 3 tasks are informative" in v["note"]


@pytest.mark.parametrize("bad, reason", [
    (lambda a: a.__setitem__("RTE::pred", np.where(np.arange(NG) % 7 == 0, np.nan, a["RTE::pred"])),
     f"{NG // 7 + 1} of {NG} predictions are NaN or infinite"),
    (lambda a: a.__setitem__("RTE::pred", np.ones(NG)), "constant predictions (all 1)"),
])
def test_one_degenerate_seed_of_three_is_shown_and_the_side_stands_on_the_other_two(tmp_path, gtier, bad, reason):
    """Rule: a degenerate seed is a finding, not a veto (Dodge et al. count failed restarts as fine-tuning's behaviour):
    it is counted and shown, left out of its side's mean, and the check is judged on the remaining seeds."""
    first = gtier["finetune"]["seeds"][0]

    def edit(name, run, arrays, values):
        if name == "peft" and run.task == "RTE" and run.seed == first:
            bad(arrays)
    v = _decide(tmp_path, gtier, [NONINF], lambda n, t: 0.9, edit)
    c = v["checks"][0]
    assert c["outcome"] == "holds" and v["verdict"] == "reproduced"
    assert "1 degenerate run(s) left out, each side judged on its other runs: peft on RTE: " in c["reason"]
    assert reason in c["reason"] and "/lora/" in c["reason"] and f"/RTE/s{first}" in c["reason"]  # names the run
    m = v["measurements"]["peft"]
    rte = m["per_benchmark"]["RTE"]
    assert "RTE" in m["degenerate"] and rte["measured"] is not None
    assert rte["seeds"][0] is None or np.isnan(rte["seeds"][0])  # shown as the failed seed, not averaged in
    assert rte["measured"] == pytest.approx(np.mean(rte["seeds"][1:]))


def test_two_degenerate_seeds_of_three_leave_the_side_without_a_number(tmp_path, gtier):
    def edit(name, run, arrays, values):
        if name == "peft" and run.task == "RTE" and run.seed != gtier["finetune"]["seeds"][-1]:
            arrays["RTE::pred"] = np.ones(NG)
    v = _decide(tmp_path, gtier, [NONINF], lambda n, t: 0.9, edit)
    c = v["checks"][0]
    assert c["outcome"] == "inconclusive" and v["verdict"] == "inconclusive"
    assert "side(s) without a number: peft on RTE: 1 of 3 run(s) usable, 2 needed; degenerate: " in c["reason"]
    assert v["measurements"]["peft"]["per_benchmark"]["RTE"]["measured"] is None


def test_run_marked_degenerate_by_its_writer_is_inconclusive(tmp_path, gtier):
    def edit(name, run, arrays, values):
        if name == "ft" and run.task == "CoLA":
            values["degenerate"] = "the training loss became NaN or infinite"
    v = _decide(tmp_path, gtier, [NONINF], lambda n, t: 0.9, edit)
    assert v["checks"][0]["outcome"] == "inconclusive" and "ft on CoLA" in v["note"] and "loss became NaN" in v["note"]


def test_ratio_without_quality_cannot_reproduce(tmp_path, gtier):
    v = _decide(tmp_path, gtier, [RATIO], lambda n, t: 0.9)
    r = v["checks"][0]
    assert r["outcome"] == "inconclusive" and v["verdict"] == "inconclusive"
    assert "no quality check compares peft with ft: a parameter ratio alone reproduces nothing" in r["reason"]
    # a quality check this tier does not judge does not let the ratio through either
    v = _decide(tmp_path, gtier, [{**NONINF, "scope": "semantic"}, RATIO], lambda n, t: 0.9)
    assert v["checks"][1]["outcome"] == "inconclusive" and "which is shown" in v["checks"][1]["reason"]
    assert v["verdict"] == "inconclusive"
    # with its quality check holding, the ratio counts
    v = _decide(tmp_path, gtier, [NONINF, RATIO], lambda n, t: 0.9)
    assert [c["outcome"] for c in v["checks"]] == ["holds", "holds"] and v["verdict"] == "reproduced"


def test_zero_shot_is_a_floor_for_trained_lm_measurements(tmp_path, tier):
    """Prefix tuning below the untrained model's zero-shot score carries no evidence about prefix tuning."""
    pytest.importorskip("lm_eval")
    data = yaml.safe_load((Path(__file__).parents[1] / "replications/peft/prefix-tuning-matches-finetuning.yaml").read_text())
    path = tmp_path / "claims" / "peft" / "prefix-tuning-matches-finetuning.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data))
    cplan = P.plan_claim(load_claim(path, tmp_path / "claims"), tier)
    quality = {"zero_shot": 0.75, "prefix": 0.6, "full_ft": 0.9}
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 2, 400).astype(float)
    for name, pm in cplan.measurements.items():
        for i, run in enumerate(pm.runs):
            pred = np.where(np.random.default_rng(i + 10 * len(name)).random(400) < quality[name], gold, 1 - gold)
            out = Path(run.path(str(tmp_path / "r")))
            atomic_save_npz(out.with_name("predictions.npz"), **{f"{run.task}::pred": pred, f"{run.task}::gold": gold,
                                                                 f"{run.task}::subsets": np.array([run.task] * 400)})
            atomic_write_json(out, {"values": {"benchmarks": {run.task: {}}, "parameters": {"trainable": 1, "total": 9}},
                                    "provenance": {}})
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    c = v["checks"][0]
    assert c["outcome"] == "inconclusive" and "prefix" in c["reason"] and "its zero_shot floor" in c["reason"]
    # the explicit check against zero-shot is decided as a relation (zero-shot is its other side, not its floor)
    assert v["checks"][1]["outcome"] == "contradicted" and "prefix > zero_shot" in v["note"]


def test_task_the_tier_skips_is_uninformative_with_the_tier_reason(tmp_path, gtier):
    """finetune.skip_tasks: the task is never run, shown as uninformative with the tier's reason, left out of the
    judged average; a check on that task alone is not run."""
    gtier["finetune"]["skip_tasks"] = {"CoLA": "nothing beats chance at 600 examples"}
    checks = [NONINF, {**NONINF, "target": "CoLA"}]
    cplan = P.plan_claim(_glue_claim(tmp_path, checks), gtier)
    assert {r.task for pm in cplan.measurements.values() for r in pm.runs} == {"RTE", "STS-B"}
    _glue_runs(cplan, tmp_path / "r", lambda n, t: 0.9)
    v = decide_claim(cplan, gtier, str(tmp_path / "r"))
    avg, cola = v["checks"]
    assert avg["outcome"] == "holds" and avg["details"][0]["tasks"] == ["RTE", "STS-B"]
    assert avg["uninformative"] == {"CoLA": "not run at tier micro: nothing beats chance at 600 examples"}
    # the check's reason names the task as not run, not as a task without signal
    assert "judged on RTE, STS-B; not run at tier micro: CoLA" in avg["reason"] and "no side above" not in avg["reason"]
    assert cola["outcome"] == "not-run" and "CoLA is not run at tier micro" in cola["reason"]
    assert "CoLA" not in v["measurements"]["ft"]["per_benchmark"]
    from plmclaims.report import markdown

    assert "| not run |" in markdown([v], gtier)  # the per-benchmark table says so instead of a number
    # every task skipped: the measurement cannot run, and says why
    gtier["finetune"]["skip_tasks"] = {t: "nothing beats chance here" for t in TASKS}
    cplan = P.plan_claim(_glue_claim(tmp_path, [NONINF]), gtier)
    assert cplan.measurements["ft"].status == "not-run" and "skips every task" in cplan.measurements["ft"].reason


def test_runs_on_data_other_than_the_release_are_marked_in_the_report(tmp_path, tier, data_root):
    """allow_unverified_data lets other data through planning; the verdict and the report then flag every row whose
    runs read a file that is not the known release file (from the checksums each run recorded)."""
    from plmclaims.provenance import sha256_file
    from plmclaims.report import markdown
    from plmclaims.verdicts import mark_unverified_data

    claim = _claim(tmp_path, [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}], M, controls=())
    cplan = P.plan_claim(claim, tier)
    _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
    release = data_root / "senteval" / "STS" / "STSBenchmark" / "sts-test.csv"
    for name, pm in cplan.measurements.items():
        sha = sha256_file(release) if name == "good" else "0" * 64  # 'bad' read a changed copy
        for run in pm.runs:
            path = Path(run.path(str(tmp_path / "r")))
            m = json.loads(path.read_text())
            m["provenance"]["data_sha256"] = {str(release): sha}
            atomic_write_json(path, m)
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    mark_unverified_data(v, cplan, str(tmp_path / "r"), str(data_root))
    assert v["unverified_data"] == [str(release)]
    assert "unverified_data" not in v["measurements"]["good"] and v["measurements"]["bad"]["unverified_data"] == [str(release)]
    md = markdown([v], tier)
    assert "**Unverified data** (not the release files)" in md and "(unverified data)" in md


def test_a_rehearsal_marks_every_verdict_and_row_as_meaningless(tmp_path, tier):
    """A tier with `rehearsal: true` (the paper DAG on random stand-in weights) still decides its checks, so the
    verdict code runs; every verdict, table row and CSV row then says the number means nothing."""
    from plmclaims.report import REHEARSAL, markdown, rows

    claim = _claim(tmp_path, [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}], M, controls=())
    cplan = P.plan_claim(claim, tier)
    _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
    plain = decide_claim(cplan, tier, str(tmp_path / "r"))
    rehearsed = decide_claim(cplan, dict(tier, rehearsal=True), str(tmp_path / "r"))
    assert plain["rehearsal"] is False and rehearsed["rehearsal"] is True
    assert rehearsed["verdict"] == plain["verdict"]  # the same decision, only marked
    md = markdown([rehearsed], dict(tier, rehearsal=True))
    assert md.count(REHEARSAL) == 1 + len(rehearsed["measurements"]) and "**Rehearsal.**" in md
    assert f"**{plain['verdict']} (rehearsal)**" in md
    assert all(r["verdict"].endswith("(rehearsal)") and REHEARSAL in r["note"] for r in rows([rehearsed]))
    assert REHEARSAL not in markdown([plain], tier) and not any("rehearsal" in r["verdict"] for r in rows([plain]))


def test_seed_spread_widens_the_interval_of_a_side(tmp_path, tier):
    """Rule: seed spread belongs in the interval. The micro-BERT's two pre-training seeds resampled with the items
    (Multi-Bootstrap): a side whose seeds disagree gets a wider interval than the items alone give, and a relation
    that the items alone would call a hold is inconclusive when one seed does not show it."""
    claim = _claim(tmp_path, [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}], M, controls=())
    cplan = P.plan_claim(claim, tier)
    seeds = sorted({r.instance for r in cplan.measurements["good"].runs})
    assert len(seeds) == 2
    agree = {("mean", seeds[0]): 0.9, ("mean", seeds[1]): 0.9}
    split = {("mean", seeds[0]): 0.3, ("mean", seeds[1]): 3.0}  # one seed learned, the other did not

    def noise(table):
        return lambda run: table.get((run.method, run.instance), 1.6)
    _materialise(cplan, tmp_path / "agree", noise(agree))
    _materialise(cplan, tmp_path / "split", noise(split))
    a = decide_claim(cplan, tier, str(tmp_path / "agree"))
    s = decide_claim(cplan, tier, str(tmp_path / "split"))
    wa = a["measurements"]["good"]["ci_high"] - a["measurements"]["good"]["ci_low"]
    ws = s["measurements"]["good"]["ci_high"] - s["measurements"]["good"]["ci_low"]
    assert ws > 3 * wa
    lo, hi = s["measurements"]["good"]["seeds"]
    # with two seeds a quarter of the resamples draw one seed twice: the interval reaches both seeds' scores
    assert s["measurements"]["good"]["ci_low"] < min(lo, hi) + 1 and s["measurements"]["good"]["ci_high"] > max(lo, hi) - 1
    assert a["checks"][0]["outcome"] == "holds" and s["checks"][0]["outcome"] == "inconclusive"


# ---------------------------------------------------------------- rules a verdict must hold (issue: expert review)

def test_a_relation_the_random_twin_shows_as_strongly_is_not_credited(tmp_path, tier):
    """Rule: a relation about what pre-training does must hold for the trained model and not for its twin, or hold
    significantly more strongly. Both sides above their twins, the relation holds, but the untrained network shows the
    same gap: inconclusive. With the twin's gap smaller, the trained model's gap is credited."""
    claim = _claim(tmp_path, [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}], M)
    cplan = P.plan_claim(claim, tier)
    same = {("mean", False): 0.5, ("cls-before-pooler", False): 2.0, ("mean", True): 0.8, ("cls-before-pooler", True): 6.0}
    _materialise(cplan, tmp_path / "same", lambda run: same[run.method, ".random-" in run.instance])
    v = decide_claim(cplan, tier, str(tmp_path / "same"))
    c = v["checks"][0]
    assert c["outcome"] == "inconclusive" and v["verdict"] == "inconclusive", c
    assert all(f["above"] for f in c["floors"])  # not the floors: each trained side beats its own twin
    assert "the random-weights twin shows the same relation" in c["reason"] and "not significantly stronger" in c["reason"]
    twin = c["details"][0]["twin"]
    assert twin["outcome"] == "holds" and twin["stronger"]["ci_low"] <= 0
    weaker = {**same, ("cls-before-pooler", True): 1.0}  # the untrained network's CLS is as good as its mean
    _materialise(cplan, tmp_path / "weaker", lambda run: weaker[run.method, ".random-" in run.instance])
    v = decide_claim(cplan, tier, str(tmp_path / "weaker"))
    assert v["checks"][0]["outcome"] == "holds" and v["verdict"] == "reproduced", v["checks"][0]


def test_a_check_that_holds_by_construction_is_shown_never_credited(tmp_path, tier):
    """Rule: removing more of a model lowers it whatever the paper says: such a check is shown with what it measured,
    and a claim whose only holding check it is, is shown, not reproduced."""
    check = {"type": "greater", "a": "good", "b": "bad", "scope": "mechanics",
             "construction": "masking more heads leaves less of the model"}
    claim = _claim(tmp_path, [check], M, controls=())
    cplan = P.plan_claim(claim, tier)
    _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    c = v["checks"][0]
    assert c["outcome"] == "shown" and c["measured_outcome"] == "holds"
    assert "holds by construction" in c["reason"] and "masking more heads" in c["reason"]
    assert v["verdict"] == "shown"
    real = {"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"}
    claim = _claim(tmp_path, [check, real], M, controls=())
    v = decide_claim(P.plan_claim(claim, tier), tier, str(tmp_path / "r"))
    assert v["verdict"] == "reproduced" and "Shown, not judged here: good > bad on avg: measured holds" in v["note"]


def test_a_check_that_cannot_carry_the_claim_alone(tmp_path, tier):
    """A comparison that is nearly the model against itself is judged and labelled, but cannot reproduce a claim."""
    check = {"type": "greater", "a": "good", "b": "bad", "scope": "mechanics",
             "supporting": "int8 weights multiplied in float32: nearly the model against itself"}
    claim = _claim(tmp_path, [check], M, controls=())
    cplan = P.plan_claim(claim, tier)
    _materialise(cplan, tmp_path / "r", _noise(0.3, 2.0))
    v = decide_claim(cplan, tier, str(tmp_path / "r"))
    assert v["checks"][0]["outcome"] == "holds" and v["verdict"] == "inconclusive"
    assert "only checks that cannot carry the claim alone hold" in v["note"] and "nearly the model" in v["note"]


def test_a_shortfall_at_a_cut_budget_is_no_contradiction_unless_its_control_shows_the_method_falls_short(tmp_path, gtier):
    """Rule: a contradiction must be one the tier can make. The method trails its reference at a budget far below the
    paper's: inconclusive with the numbers. Where the control check (the method against the same model without it)
    is contradicted too, the method itself falls short and the contradiction stands."""
    budget = {"tiers": ["micro"], "why": "600 steps of MSE on 9.6k sentences, against DistilBERT's 3 epochs"}
    short = {"type": "non-inferior", "a": "peft", "b": "ft", "delta": 1.0, "scope": "mechanics", "budget_limited": budget}
    v = _decide(tmp_path / "a", gtier, [short], lambda n, t: 0.7 if n == "peft" else 0.9)
    c = v["checks"][0]
    assert c["outcome"] == "inconclusive" and c["measured_outcome"] == "contradicted" and v["verdict"] == "inconclusive"
    assert "at a budget far below the paper's (600 steps" in c["reason"] and "no control check isolates" in c["reason"]
    assert c["reason"].startswith("measured avg -")  # the numbers of the shortfall, after the check's description
    assert v["note"].count("peft >= ft - 1.0 on avg") == 1
    control = {"type": "greater", "a": "peft", "b": "ft", "scope": "mechanics"}  # stands in for 'distilled > undistilled'
    limited = {**short, "budget_limited": {**budget, "control_check": 1}}
    v = _decide(tmp_path / "b", gtier, [limited, control], lambda n, t: 0.7 if n == "peft" else 0.9)
    assert v["checks"][1]["outcome"] == "contradicted"
    assert v["checks"][0]["outcome"] == "contradicted" and "the method itself falls short" in v["checks"][0]["reason"]
    assert v["verdict"] == "not-reproduced"
    paper = with_overrides(gtier, {"name": "paper-like"})  # a tier the check is not budget-limited at
    v = _decide(tmp_path / "c", paper, [short], lambda n, t: 0.7 if n == "peft" else 0.9)
    assert v["checks"][0]["outcome"] == "contradicted" and v["verdict"] == "not-reproduced"


def test_a_claim_measured_on_two_models_rests_on_the_tiers_headline_model(tmp_path, tier):
    """A claim about pre-trained models in general names a further model (`models:`): its raw-encoder measurements
    are planned again on that role (with the method analogues given), every model is judged on its own with the
    scopes the tier lets it judge, and the claim's verdict is the headline model's, named with what it stands for."""
    lm = {"asset": "micro-bert-small", "judges": ["mechanics", "semantic"],
          "stands_for": "a real pre-trained LM: evidence about pre-trained LMs in general"}
    t = with_overrides(tier, {"roles.pretrained-lm": lm, "headline": ["pretrained-lm", "raw-encoder"]})
    checks = [{"type": "greater", "a": "good", "b": "bad", "scope": "mechanics"},
              {"type": "greater", "a": "bad", "b": "good", "scope": "semantic"}]
    claim = _claim(tmp_path, checks, M, controls=())
    claim.data["models"] = {"pretrained-lm": {"methods": {"cls-before-pooler": "first-last"},
                                              "note": "first-last stands in for the decoder's last token here"}}
    cplan = P.plan_claim(claim, t)
    lm_plan = cplan.models["pretrained-lm"]
    assert {r.instance for r in lm_plan.measurements["bad"].runs} == {"micro-bert-small.s1"}
    assert {r.method for r in lm_plan.measurements["bad"].runs} == {"first-last"}  # the analogue
    assert set(lm_plan.score_runs()) <= set(cplan.score_runs())
    assert lm_plan.claim.measurements["good"].reported == {}  # the paper's numbers are no target for another model

    def noise(run):  # the micro-BERT: good beats bad; the other model: the reverse
        small = run.instance.startswith("micro-bert-small")
        return (2.0 if run.method == "mean" else 0.3) if small else (0.3 if run.method == "mean" else 2.0)
    _materialise(cplan, tmp_path / "r", noise)
    v = decide_claim(cplan, t, str(tmp_path / "r"))
    assert v["headline_model"] == "pretrained-lm" and "pre-trained LMs in general" in v["headline_note"]
    assert set(v["models"]) == {"raw-encoder", "pretrained-lm"}
    base, other = v["models"]["raw-encoder"], v["models"]["pretrained-lm"]
    assert base["verdict"] == "reproduced" and base["checks"][1]["outcome"] == "shown"  # semantic: not judged here
    assert [c["outcome"] for c in other["checks"]] == ["contradicted", "holds"]  # this model may judge semantic checks
    assert v["verdict"] == other["verdict"] == "not-reproduced" and v["checks"] == other["checks"]
    # the tier that puts the raw encoder first rests the claim on it
    v = decide_claim(cplan, with_overrides(t, {"headline": ["raw-encoder"]}), str(tmp_path / "r"))
    assert v["headline_model"] == "raw-encoder" and v["verdict"] == "reproduced"
