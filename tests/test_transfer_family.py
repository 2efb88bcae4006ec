"""The transfer family (issue 11: T4, Lu et al. 2021): exactly the named parameter groups train, the plan pairs the
pre-trained runs with their random-weights twins (and says why a tier cannot run them), and a real run on a small
encoder writes what the verdict engine reads."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

from plmclaims import plan as P
from plmclaims.claims import load_claim
from plmclaims.data import synthetic as S
from plmclaims.methods import frozen_transfer as F
from plmclaims.tiers import load_tier, with_overrides
from plmclaims.verdicts import decide_claim

CLAIM = "transfer/frozen-pretrained-beats-random"
# a test budget (the tier files' transfer sections hold the real ones): seconds per run
SECTION = {"seeds": [0], "data_seed": 0, "methods": {"frozen-transfer": {"lr": 1.0e-3}},
           "budget": {"steps": 4, "batch_size": 8, "train_examples": 40, "test_examples": 30},
           "tasks": {"bit-memory": {"bits": 10, "bits_per_token": 5}, "bit-xor": {"bits": 4},
                     "listops": {"max_depth": 2, "max_args": 3, "max_length": 16}}}


def _claim(repo):
    return load_claim(repo / "replications" / f"{CLAIM}.yaml", repo / "replications")


def _tier(name="tiny", **overrides):
    # a copy of SECTION: dotted overrides write into the section they are applied to
    return with_overrides(with_overrides(load_tier(name), {"transfer": copy.deepcopy(SECTION)}), overrides)


def _trainable(model) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


def test_only_input_output_positions_and_layernorms_train():
    body = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=32))
    train = S.generate("bit-xor", 16, 0, "train", {"bits": 3})
    model, groups = F.build(body, train, seed=0)
    expected = {"body.embeddings.position_embeddings.weight", "body.embeddings.LayerNorm.weight",
                "body.embeddings.LayerNorm.bias", "input.weight", "input.bias", "head.weight", "head.bias"}
    for i in range(2):
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            expected |= {f"body.encoder.layer.{i}.{ln}.weight", f"body.encoder.layer.{i}.{ln}.bias"}
    assert _trainable(model) == expected
    assert {n for g in groups.values() for n in g} == expected and set(groups) == set(F.GROUPS)
    counts = F.parameter_counts(model, groups)
    assert counts["groups"] == {"input": 2 * 16, "output": 16 * 2 + 2, "positions": 32 * 16, "layernorm": 5 * 2 * 16}
    assert counts["trainable"] == sum(counts["groups"].values()) < counts["total"]
    # one optimiser step moves the trained groups and nothing else
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    values, _ = F.train_and_score(body, train, S.generate("bit-xor", 8, 0, "test", {"bits": 3}),
                                  {"steps": 1, "batch_size": 4}, 0.1, seed=0)
    moved = {n for n, p in model.body.named_parameters() if not torch.equal(before[f"body.{n}"], p)}
    assert moved and {f"body.{n}" for n in moved} <= expected
    assert values["parameters"]["trainable"] == counts["trainable"]


def test_a_causal_lm_freezes_the_same_groups_and_a_body_without_positions_is_refused():
    gpt2 = GPT2Model(GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=2, n_positions=32))
    groups = F.freeze(gpt2)
    assert groups["positions"] == ["wpe.weight"]
    assert set(groups["layernorm"]) == {f"h.{i}.{ln}.{w}" for i in range(2) for ln in ("ln_1", "ln_2")
                                         for w in ("weight", "bias")} | {"ln_f.weight", "ln_f.bias"}
    assert _trainable(gpt2) == set(groups["positions"] + groups["layernorm"])
    with pytest.raises(ValueError, match="no learned position embeddings"):
        F.freeze(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4)))


def test_plan_pairs_pretrained_runs_with_their_twins(repo):
    tier = _tier("micro")
    ms = P.plan_claim(_claim(repo), tier).measurements
    pre, rnd = ms["pretrained"], ms["random_weights"]
    assert pre.status == rnd.status == "ok"
    assert [(r.task, r.instance) for r in pre.runs] == [(t, i) for t in S.TASKS for i in ("micro-bert.s1", "micro-bert.s2")]
    assert {r.instance for r in rnd.runs} == {"micro-bert.random-s1", "micro-bert.random-s2"}
    assert pre.controls == rnd.runs  # the control twins and the random measurement are the same runs (one folder)
    assert all(r.kind == "transfer" and r.seed == 0 and r.params == {"lr": 1.0e-3} for r in pre.runs + rnd.runs)
    assert pre.runs[0].upstream[0].kind == "pretrain" and rnd.runs[0].upstream[0].kind == "tokenizer"
    assert P.data_files(pre.runs[0], tier, None) == []
    # a task's settings move that task's runs only
    moved = P.plan_claim(_claim(repo), with_overrides(tier, {"transfer.tasks.listops.max_args": 4})).measurements["pretrained"]
    changed = {r.task for r, s in zip(moved.runs, pre.runs) if r.key != s.key}
    assert changed == {"listops"}


def test_plan_says_why_a_tier_cannot_run(repo):
    claim = _claim(repo)
    no_section = load_tier("tiny")
    no_section.pop("transfer", None)
    reason = P.plan_claim(claim, no_section).measurements["pretrained"].reason
    assert "has no 'transfer' section" in reason
    # the tiny micro-BERT has 32 positions; the paper's bit memory has 6 x 1000 / 50 = 120 tokens
    long = _tier(**{"transfer.tasks.bit-memory": {"bits": 1000, "bits_per_token": 50}})
    reason = P.plan_claim(claim, long).measurements["pretrained"].reason
    assert "32 positions" in reason and "bit-memory (120)" in reason
    static = _tier(**{"roles.raw-encoder": {"asset": "glove-6b-50d"}})
    assert "kind static-vectors" in P.plan_claim(claim, static).measurements["pretrained"].reason
    skip = _tier(**{"transfer.skip_tasks": {t: "test" for t in S.TASKS}})
    assert "skips every task" in P.plan_claim(claim, skip).measurements["random_weights"].reason


@pytest.mark.slow
def test_a_real_run_and_its_verdict(tmp_path, repo, minilm_path):
    """all-MiniLM-L6-v2 (a packaged encoder) and its random-weights twin on the three tasks, a few steps each: the
    runs write the score-run layout and the verdict engine pairs and judges them."""
    from plmclaims.families.transfer.runs import transfer

    tier = _tier(**{"roles.raw-encoder": {"asset": "all-minilm-l6-v2"}, "controls.random_weights_seeds": [1]})
    cplan = P.plan_claim(_claim(repo), tier)
    results = str(tmp_path / "results")
    runs = {r.key: r for pm in cplan.measurements.values() for r in pm.runs + pm.controls}
    assert len(runs) == 6  # 3 tasks x (pre-trained, twin)
    for run in runs.values():
        out = tmp_path / "results" / run.path(".")
        transfer(run.tier(tier["name"], tier["_path"]), run, str(tmp_path / "resources"), out, threads=1)
        values = json.loads(out.read_text())["values"]
        assert values["parameters"]["groups"]["positions"] == 512 * 384  # MiniLM: 512 positions x 384
        npz = np.load(out.with_name("predictions.npz"))
        assert set(npz.files) == {f"{run.task}::{k}" for k in ("pred", "gold", "index", "subsets")}
        assert len(npz[f"{run.task}::pred"]) == values["benchmarks"][run.task]["examples"]
    twin = next(r for r in runs.values() if "random" in r.instance and r.task == "bit-xor")
    pre = next(r for r in runs.values() if "random" not in r.instance and r.task == "bit-xor")
    a, b = (np.load(tmp_path / "results" / r.path(".").replace("metrics.json", "predictions.npz")) for r in (pre, twin))
    np.testing.assert_array_equal(a["bit-xor::gold"], b["bit-xor::gold"])  # the same items: paired
    np.testing.assert_array_equal(a["bit-xor::index"], b["bit-xor::index"])
    result = decide_claim(cplan, tier, results)
    assert result["verdict"] in ("reproduced", "direction-holds", "not-reproduced", "inconclusive")
    assert result["checks"][0]["outcome"] in ("holds", "contradicted", "inconclusive")
    assert result["measurements"]["random_weights"]["status"] == "ok"


@pytest.mark.parametrize("name", ["tiny", "micro", "paper"])
def test_the_tiers_plan_every_task(repo, name):
    """Each tier's transfer section fits its raw encoder's positions: every task is planned, with twins."""
    tier = load_tier(name)
    if "transfer" not in tier:
        pytest.skip(f"tier {name} has no transfer section yet (it needs the tier schema's 'transfer' property)")
    ms = P.plan_claim(_claim(repo), tier).measurements
    assert all(pm.status == "ok" for pm in ms.values()), {n: pm.reason for n, pm in ms.items()}
    assert {r.task for r in ms["pretrained"].runs} == set(S.TASKS) and ms["pretrained"].controls
