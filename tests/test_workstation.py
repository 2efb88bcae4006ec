"""The workstation tier: the paper tier's models, data and recipes with budgets cut to one GPU for one day
(workflows/tiers/workstation.yaml, docs/workstation.md). Its rehearsal is tests/test_rehearsal.py's."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from plmclaims import costs, plan_report
from plmclaims.claims import load_claims
from plmclaims.plan import all_runs, plan_all, skipped_tasks
from plmclaims.schema import read_yaml
from plmclaims.tiers import TIERS_DIR, load_tier

GPU_DAY_H, GPU_MEMORY_GIB = 24.0, 80.0  # one A100 80GB for one day
LADDER = ("ladder-small", "ladder-medium", "ladder-large")


@pytest.fixture(scope="module")
def tiers(repo):
    claims = load_claims(repo / "replications")
    paper, ws = load_tier("paper"), load_tier("workstation")
    return paper, ws, {p.claim.id: p for p in plan_all(claims, paper)}, {p.claim.id: p for p in plan_all(claims, ws)}


def test_the_whole_tier_fits_one_gpu_for_one_day(tiers, repo):
    """Priced at the GPU and utilisation the tier states (gpu_estimate), every model run priced: at most 24 GPU-hours
    in all and no run above 80 GB; `plmclaims plan --tier workstation` prints that price without flags."""
    _, ws, _, plans = tiers
    est = ws["gpu_estimate"]
    table = plan_report.gpu_estimate(costs.load_table(device_type="cpu")[1], est["gpu"], est["mfu"])
    res = costs.plan_costs(list(plans.values()), table)
    assert res["total"]["unknown"] == 0  # no model run left out of the sum
    hours = res["total"]["seconds"] / 3600
    assert 0 < hours <= GPU_DAY_H
    peak = max(c.peak_mb for c in res["costs"].values()) / 1024
    assert 0 < peak <= GPU_MEMORY_GIB
    out = subprocess.run([sys.executable, "-m", "plmclaims.cli", "plan", "--tier", "workstation", "--claims-dir",
                          str(repo / "replications")], capture_output=True, text=True, cwd=repo, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"NVIDIA {est['gpu']}'s dense bf16 peak" in out.stdout
    assert f"at {100 * est['mfu']:.0f}% utilisation" in out.stdout
    total = re.search(r"^total .* ([\d.]+)$", out.stdout, re.M)
    assert total and float(total.group(1)) == pytest.approx(hours, abs=0.05)
    assert "prefetch disk:" in out.stdout and "\nfamily " in out.stdout


def test_it_is_the_paper_tier_with_its_budgets_cut(tiers):
    """The papers' own assets, data, recipes and checks: what differs from paper.yaml is seeds, epochs, steps,
    examples and grid points, the prompt-tuning ladder (unavailable, with its reason), and how magnitudes are judged."""
    paper, ws, _, _ = tiers
    assert ws["assets"] == paper["assets"] and ws["data"] == paper["data"] and ws["fit_corpora"] == paper["fit_corpora"]
    assert {r: s for r, s in ws["roles"].items() if r not in LADDER} == \
        {r: s for r, s in paper["roles"].items() if r not in LADDER}
    assert all(set(ws["roles"][r]) == {"unavailable"} and "not run at this tier" in ws["roles"][r]["unavailable"]
               for r in LADDER)
    own = read_yaml(TIERS_DIR / "workstation.yaml")
    cut = {"finetune", "lm", "contrastive", "transfer"}
    assert own["base"] == "paper" and cut <= set(own)
    for section in cut:  # each says what it cuts and what the cut can still show
        assert own[section]["note"].startswith("Cut: ") and "Shows: " in own[section]["note"], section
        assert ws[section]["budget"].items() >= paper[section]["budget"].items()  # adds caps, changes no setting
    # the recipes are the paper's: the only recipe setting changed is LoRA's RTE length (80 GB without accumulation)
    assert own["finetune"]["methods"] == {"lora": {"tasks": {"RTE": {"max_length": 256}}}}
    for section in cut - {"finetune"}:
        assert ws[section].get("methods") == paper[section].get("methods"), section
    assert ws["magnitudes"]["same_runs_as"] == "paper"


def test_nothing_is_dropped_silently(tiers):
    """Every measurement and task the paper tier runs is run here, or not run with its reason."""
    paper, ws, paper_plans, plans = tiers
    for cid, pp in paper_plans.items():
        wp = plans[cid]
        for name, pm in pp.measurements.items():
            mine = wp.measurements[name]
            if pm.status == "ok" and mine.status != "ok":
                assert mine.reason, (cid, name)
            tasks = lambda p: {r.spec["fields"].get("task") for r in all_runs(p.runs).values()} - {None}  # noqa: E731
            gone = tasks(pm) - tasks(mine)
            if mine.status == "ok" and gone:  # a task left out is one the tier skips, with its reason
                assert gone <= set(skipped_tasks(wp.claim, ws)), (cid, name, gone)
    prompt = plans["peft/prompt-tuning-gap-closes-with-scale"]
    assert {pm.status for pm in prompt.measurements.values()} == {"not-run"} and prompt.score_runs() == []
    assert "SST-2" in skipped_tasks(plans["compression/seed-variance"].claim, ws)  # not in the 3 x 3 grid


def test_magnitudes_are_judged_only_at_the_paper_budget(tiers):
    """Training-free encoders, released checkpoints and the compression claims' fine-tuned BERT run exactly the paper
    tier's runs, so their magnitudes are judged; what this tier trains under a cut budget is judged on relations."""
    _, _, _, plans = tiers
    judged = {("sts/glove-avg-beats-bert-avg", "bert_avg"), ("sts/glove-avg-beats-bert-avg", "glove_avg"),
              ("sts/whitening-improves-bert", "bert_whitening"), ("sts/flow-improves-bert", "bert_flow"),
              ("sts/released-simcse-reproduces", "simcse"), ("contrastive/released-checkpoints-reproduce", "declutr"),
              ("contrastive/diffcse-beats-simcse", "diffcse_released"), ("intrinsic/anisotropy-upper-layers", "top"),
              ("compression/int8-costs-little-glue", "int8_torch")}
    cut = {("peft/lora-matches-finetuning", "full_ft"), ("transfer/frozen-pretrained-beats-random", "pretrained"),
           ("contrastive/simcse-beats-consert-bsl-dino", "consert_transductive")}
    for cid, name in judged:
        assert plans[cid].measurements[name].magnitudes == "", (cid, name)
    for cid, name in cut:
        assert re.search(r"budget cut from tier paper's|runs tier paper runs for it",
                         plans[cid].measurements[name].magnitudes), (cid, name)


def test_checks_far_below_the_papers_budget_are_budget_limited_here(tiers):
    """Where a side trains fewer epochs or steps than its recipe, or the seed grid is smaller, a shortfall here is
    inconclusive, not a contradiction: the claim lists workstation in that check's budget_limited tiers."""
    _, _, _, plans = tiers
    expected = {"peft/lora-matches-finetuning": [0], "peft/adapters-match-finetuning": [0],
                "compression/seed-variance": [0, 1, 2, 3], "transfer/frozen-pretrained-beats-random": [0]}
    for cid, plan in plans.items():
        limited = [i for i, c in enumerate(plan.claim.checks)
                   if "workstation" in c.get("budget_limited", {}).get("tiers", [])]
        assert limited == expected.get(cid, []), cid
