"""Distillation (P10): the half-depth student trained on the teacher's pooled vectors, and its compress run.
The student's initialisation (the teacher's chosen layers) is tested in test_compression_methods.py."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from plmclaims import encoders
from plmclaims import plan as P
from plmclaims.claims import load_claims
from plmclaims.data.sts import BENCHMARKS
from plmclaims.errors import UserError
from plmclaims.families.compression.plan import compress_run
from plmclaims.families.compression.runs import compress
from plmclaims.methods import distill
from plmclaims.tiers import load_tier, with_overrides
from samples import SENTENCES

CLAIM = "compression/distilled-half-keeps-97"


@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["mean", "cls-before-pooler", "first-last", "last2avg"])
def test_the_trained_vectors_are_the_scored_vectors(minilm, pooling):
    """The loss is taken on the very pooling the compress run scores (encoders.pool over encode_layers)."""
    model, tok = minilm
    ours = distill._vectors(model, tok, SENTENCES, pooling, max_length=64).numpy()
    scored = encoders.pool(encoders.encode_layers(model, tok, SENTENCES, batch_size=5, max_length=64, progress=False), pooling)
    np.testing.assert_allclose(ours, scored, atol=2e-5)


def test_a_few_steps_bring_the_student_closer_to_the_teacher(minilm):
    model, tok = minilm
    before = {k: v.clone() for k, v in model.state_dict().items()}
    student, info = distill.distill(model, tok, SENTENCES, steps=6, batch_size=8, lr=2e-4, seed=0, max_length=64)
    assert info["mse_end"] < 0.8 * info["mse_start"] and info["mse_sentences"] == len(SENTENCES)
    assert len(info["loss_history"]) == 6 and info["final_loss"] == pytest.approx(info["loss_history"][-1], abs=1e-7)
    assert (info["teacher_layers"], info["student_layers"]) == (6, 3)
    layer = sum(p.numel() for p in model.encoder.layer[0].parameters())
    assert info["teacher_parameters"] == 22_713_216 and info["student_parameters"] == 22_713_216 - 3 * layer
    assert not student.training and not model.training
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # only the student trains
    # and the student moved away from its initialisation (layers 0, 2, 4 of the teacher)
    assert not torch.equal(student.encoder.layer[1].output.dense.weight, model.encoder.layer[2].output.dense.weight)


def test_the_same_seed_gives_the_same_student_and_another_seed_another(minilm):
    model, tok = minilm
    run = lambda seed: distill.distill(model, tok, SENTENCES, steps=2, batch_size=4, lr=1e-4, seed=seed, max_length=32)  # noqa: E731
    (a, ia), (b, ib), (c, _) = run(3), run(3), run(4)
    assert ia["loss_history"] == ib["loss_history"]
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())
    assert not all(torch.equal(v, c.state_dict()[k]) for k, v in a.state_dict().items())


def test_a_missing_budget_or_no_sentences_is_an_error_or_not_run(minilm, repo):
    model, tok = minilm
    with pytest.raises(UserError, match="distillation needs sentences"):
        distill.distill(model, tok, [], steps=2, batch_size=4, lr=1e-4, seed=0)
    with pytest.raises(UserError, match="pooling 'max' unknown; allowed values: mean"):
        distill.distill(model, tok, SENTENCES, steps=1, batch_size=4, lr=1e-4, seed=0, pooling="max")
    tier = load_tier("tiny")
    del tier["compression"]["distill"]
    [p] = P.plan_all(load_claims(repo / "replications", [CLAIM]), tier)
    assert p.measurements["teacher"].status == "ok"
    assert p.measurements["student"].status == "not-run" and "compression.distill" in p.measurements["student"].reason


def test_the_budget_changes_only_the_distilled_run_and_it_reads_the_train_sentences(repo, data_root):
    tier = load_tier("micro")
    [p] = P.plan_all(load_claims(repo / "replications", [CLAIM]), tier)
    student, teacher = p.measurements["student"].runs[0], p.measurements["teacher"].runs[0]
    assert (student.instance, student.method, student.setting) == ("all-minilm-l6-v2", "distillation", "none")
    more = with_overrides(tier, {"compression.distill.steps": 999})
    assert compress_run(more, "senteval", "all-minilm-l6-v2", "raw", "distillation", {}).key != student.key
    assert compress_run(more, "senteval", "all-minilm-l6-v2", "raw", "uncompressed", {}).key == teacher.key
    files = P.data_files(student, tier, str(data_root))
    assert any(f.endswith("stsbenchmark/sts-train.csv") for f in files) and any(f.endswith("SICK_train.txt") for f in files)
    assert not any(f.endswith("SICK_train.txt") for f in P.data_files(teacher, tier, str(data_root)))


@pytest.mark.slow
def test_the_distillation_run_writes_the_score_layout_and_the_parameter_counts(tmp_path, data_root):
    tier = with_overrides(load_tier("tiny"), {"roles.compression-encoder": {"asset": "all-minilm-l6-v2"}, "data.max_pairs": 24,
                                              "compression.distill": {"sentences": 48, "steps": 3, "batch_size": 8,
                                                                      "lr": 1.0e-4, "seed": 0}})
    run = compress_run(tier, "senteval", "all-minilm-l6-v2", "raw", "distillation", {})
    out = tmp_path / "distillation" / "metrics.json"
    out.parent.mkdir()
    compress(tier, run, str(data_root), str(tmp_path / "resources"), out, threads=2)
    metrics = json.loads(out.read_text())
    values, pred = metrics["values"], np.load(out.with_name("predictions.npz"))
    for b in BENCHMARKS:
        assert {f"{b}::{k}" for k in ("pred", "gold", "subsets", "index")} <= set(pred.files)
        assert len(pred[f"{b}::pred"]) == 24
    assert set(values["benchmarks"]) == set(BENCHMARKS)
    assert values["teacher_parameters"] == 22_713_216 and values["student_parameters"] < 0.8 * values["teacher_parameters"]
    assert values["size_mb"] < 0.8 * values["size_mb_float32"]
    assert values["distill"]["sentences"] == 48 and values["distill"]["steps"] == 3
    read = metrics["provenance"]["data_sha256"]
    assert any(f.endswith("sts-train.csv") for f in read) and any(f.endswith("SICK_train.txt") for f in read)
