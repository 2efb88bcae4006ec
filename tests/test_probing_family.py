"""The probing family (issue 11: P1, T2): layer names scaled to the tier's model, runs per layer sharing one encode,
keys that follow the probe settings, real runs on a small model whose predictions the verdict engine reads, and the
verdict of a synthetic claim whose truth we control."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from plmclaims import plan as P
from samples import execute_on_words
from plmclaims.claims import check_against_tier, load_claim
from plmclaims.data import ud
from plmclaims.errors import UserError
from plmclaims.families.probing import resolve_layer
from plmclaims.provenance import atomic_save_npz, atomic_write_json
from plmclaims.stats import document_index
from plmclaims.tiers import load_tier, with_overrides
from plmclaims.verdicts import decide_claim

P1 = "probing/structural-probe-middle-layers"
T2 = "probing/pos-below-dependencies"


def _claim(repo, cid, models: bool = False):
    """The shipped claim; without `models` only on its own (raw-encoder) model, the one these tests write runs for
    (the claim on several models has its own tests in test_verdicts.py and test_pretrained_lm_family.py)."""
    claim = load_claim(repo / "replications" / f"{cid}.yaml", repo / "replications")
    if models:
        return claim
    from dataclasses import replace

    return replace(claim, data={k: v for k, v in claim.data.items() if k != "models"})


def test_paper_layers_scale_to_the_tiers_model():
    assert [resolve_layer(v, 12) for v in (0, 7, "0/12", "3/12", "7/12", "12/12")] == [0, 7, 0, 3, 7, 12]
    assert [resolve_layer(v, 4) for v in ("3/12", "6/12", "7/12", "12/12")] == [1, 2, 2, 4]
    assert resolve_layer("1/12", 2) == 1  # a layer above the embeddings never maps onto them


def test_runs_per_layer_share_one_encode_and_follow_the_settings(repo, data_root):
    tier = load_tier("micro")
    cplan = P.plan_claim(_claim(repo, P1), tier)
    ms = cplan.measurements
    assert {r.layer for r in ms["layer0"].runs} == {0} and {r.layer for r in ms["middle"].runs} == {2}
    assert {r.layer for r in ms["top"].runs} == {4}
    assert {r.instance for r in ms["middle"].runs} == {"micro-bert.s1", "micro-bert.s2"}
    assert {r.instance for r in ms["middle"].controls} == {"micro-bert.random-s1", "micro-bert.random-s2"}
    assert all(r.kind == "probe" and r.task == "tree" and r.split == "dev" for r in ms["middle"].runs)
    a, b = ms["layer0"].runs[0], ms["middle"].runs[0]
    assert a.key != b.key and a.upstream == b.upstream and a.upstream[0].kind == "probe-encode"
    assert a.upstream[0].upstream[0].kind == "pretrain"  # the encode reads the pre-trained model
    # a structural setting moves the structural runs only; the sample moves every run, through the shared encode
    t2 = P.plan_claim(_claim(repo, T2), tier).measurements["middle"].runs[0]
    rank = P.plan_claim(_claim(repo, P1), with_overrides(tier, {"probing.structural.rank": 32})).measurements["middle"].runs[0]
    assert rank.key != b.key and rank.upstream == b.upstream
    assert P.plan_claim(_claim(repo, T2), with_overrides(tier, {"probing.structural.rank": 32})).measurements["middle"].runs[0] == t2
    sample = P.plan_claim(_claim(repo, P1), with_overrides(tier, {"probing.train_sentences": 900})).measurements["middle"].runs[0]
    assert sample.key != b.key and sample.upstream != b.upstream
    files = P.data_files(b, tier, str(data_root))
    assert [Path(f).name for f in files] == ["en_ewt-ud-train.conllu", "en_ewt-ud-dev.conllu"]
    assert P.data_files(b.upstream[0], tier, str(data_root)) == files


def test_bigram_shift_reads_its_own_encode_and_other_keys_stay(repo):
    """The shifted sentences need their own forward pass: a second encode of the same sample, keyed by the run
    parameter words: bigram-shift, while the encode every other task reads has no parameters (keys as before)."""
    tier = load_tier("micro")
    runs = P.plan_claim(_claim(repo, T2), tier).measurements["middle"].runs
    by_task = {(r.task, r.instance): r for r in runs}
    shift, upos = by_task[("bigram-shift", "micro-bert.s1")], by_task[("upos", "micro-bert.s1")]
    assert shift.upstream[0].params == {"words": "bigram-shift"} and "params" not in upos.upstream[0].spec
    assert shift.upstream[0].key != upos.upstream[0].key and upos.upstream[0] == by_task[("dependency", "micro-bert.s1")].upstream[0]
    assert shift.upstream[0].tier("micro", "-") == upos.upstream[0].tier("micro", "-")  # the same sample and model
    assert shift.upstream[0].upstream == upos.upstream[0].upstream


def test_minilm_is_a_contrast_at_micro_and_not_run_at_tiny(repo):
    for cid in (T2, P1):
        claim = _claim(repo, cid)
        assert not any(m in (c.get("a"), c.get("b"), c.get("measurement")) for c in claim.checks for m in ["minilm_layers"])
        pm = P.plan_claim(claim, load_tier("micro")).measurements["minilm_layers"]
        assert list(pm.points) == list(range(7)) and {r.instance for r in pm.runs} == {"all-minilm-l6-v2"}
        assert not pm.controls  # the random-weights twins belong to the raw encoder
        tiny = P.plan_claim(claim, load_tier("tiny")).measurements["minilm_layers"]
        assert tiny.status == "not-run" and "probing.layers.all-minilm-l6-v2" in tiny.reason


def test_paper_tier_plans_bert_base_layer_7(repo):
    tier = load_tier("paper")
    ms = P.plan_claim(_claim(repo, P1), tier).measurements
    assert {(r.instance, r.layer) for r in ms["middle"].runs} == {("bert-base-uncased", 7)}
    assert len(ms["middle"].controls) == len(tier["controls"]["random_weights_seeds"])
    no_depth = with_overrides(tier, {"probing.layers": {}})
    pm = P.plan_claim(_claim(repo, P1), no_depth).measurements["middle"]
    assert pm.status == "not-run" and "probing.layers.bert-base-uncased" in pm.reason


def _write_claim(tmp_path, repo, cid, edit) -> Path:
    data = yaml.safe_load((repo / "replications" / f"{cid}.yaml").read_text())
    edit(data)
    path = tmp_path / "claims" / f"{cid}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["measurements"]["middle"]["params"].update(layer=9), "has layers 0-4"),
    (lambda d: (d["protocol"].update(benchmarks=["upos"]), [c.update(target="upos") for c in d["checks"]]),
     "structural-probe does not score upos"),
    (lambda d: d["measurements"]["middle"].pop("params"), "needs 'layer'"),
])
def test_what_the_tier_cannot_run_is_refused_in_one_line(tmp_path, repo, edit, words):
    claim = load_claim(_write_claim(tmp_path, repo, P1, edit), tmp_path / "claims")
    with pytest.raises(UserError, match=words):
        check_against_tier(claim, load_tier("micro"))


def test_a_malformed_layer_is_refused_when_the_claim_loads(tmp_path, repo):
    path = _write_claim(tmp_path, repo, P1, lambda d: d["measurements"]["middle"]["params"].update(layer="13/12"))
    with pytest.raises(UserError, match=r"params.layer': got '13/12'.*'k/n'"):
        load_claim(path, tmp_path / "claims")


# ---------------------------------------------------------------- real runs, read by the verdict engine

@pytest.mark.slow
def test_runs_write_predictions_the_verdict_engine_reads(tmp_path, repo, data_root):
    """P1 and T2 on all-MiniLM-L6-v2 and its random-weights twin at toy sizes, run by the rule bodies themselves."""
    tier = with_overrides(load_tier("tiny"), {"roles.raw-encoder": {"asset": "all-minilm-l6-v2"},
                                              "probing.layers": {"all-minilm-l6-v2": 6}})
    roots = {"results": str(tmp_path / "results"), "resources": str(tmp_path / "resources")}
    eval_sents = ud.load(data_root, "dev").sentences
    eval_ids = [s.sent_id for s in eval_sents]
    for cid in (P1, T2):
        cplan = P.plan_claim(_claim(repo, cid), tier)
        for run in cplan.score_runs():
            execute_on_words(run, tier, data_root, roots)
        verdict = decide_claim(cplan, tier, roots["results"])
        assert verdict["verdict"] in ("reproduced", "not-reproduced", "inconclusive"), verdict["note"]
        for name, pm in cplan.measurements.items():
            for run in pm.runs:
                metrics = json.loads(Path(run.path(roots["results"])).read_text())
                values = metrics["values"]["benchmarks"][run.task]
                npz = np.load(Path(run.path(roots["results"])).with_name("predictions.npz"))
                assert np.mean(npz[f"{run.task}::pred"] == npz[f"{run.task}::gold"]) == pytest.approx(values["accuracy"])
                shown = verdict["measurements"][name]
                if pm.points:  # a curve: each layer's point
                    shown = next(p for p in shown["curve"] if p["x"] == run.layer)
                assert shown["per_benchmark"][run.task]["measured"] == pytest.approx(100 * values["accuracy"])
                assert metrics["provenance"]["data_sha256"]
                # every item names its sentence: a bootstrap over sentences resamples these groups
                enc = np.load(run.upstream[0].path(roots["results"]))
                groups = npz[f"{run.task}::groups"]
                assert len(groups) == len(npz[f"{run.task}::gold"])
                assert set(groups) <= set(document_index([eval_ids[i] for i in enc["eval::sentences"]]))
                if run.task == "upos":  # one group per sentence, as many items as the sentence has words
                    lengths = [len(eval_sents[i]) for i in enc["eval::sentences"]]
                    ids = document_index([eval_ids[i] for i in enc["eval::sentences"]])
                    assert groups.tolist() == np.repeat(ids, lengths).tolist()
                if run.task == "bigram-shift":  # labels of what the encode swapped: half of the usable sentences
                    swaps = enc["eval::swaps"]
                    assert len(swaps) == len(enc["eval::sentences"]) and len(set(groups)) == len(groups)  # one item a sentence
                    assert values["classes"] == ["I", "O"] and (npz[f"{run.task}::gold"] == 0).sum() == (swaps >= 0).sum() > 0
                if run.task == "tree":  # per-edge accuracy is UUAS; DSpr. is shown beside it
                    assert values["accuracy"] == pytest.approx(values["uuas"]) and -1 <= values["distance_spearman"] <= 1
                    floor = shown["floors"]["chance"]["tree"]
                    assert floor == pytest.approx(100 * values["adjacent_chain_uuas"])
        trend = verdict["checks"][-1]
        assert trend["type"] == "trend" and trend["outcome"] in ("holds", "contradicted", "inconclusive"), trend
        assert [p["x"] for p in verdict["measurements"]["layers"]["curve"]] == list(range(7))
    enc = json.loads(Path(cplan.measurements["middle"].runs[0].upstream[0].path(roots["results"])).with_name("metrics.json").read_text())
    assert enc["values"]["layers"] == 7 and enc["values"]["parts"]["train"]["sentences"] > 30
    # the workflow runs probes in batches, one process for the probes of one encode (`plmclaims batch`): each run
    # writes what its own job would, with its own provenance
    from plmclaims import cli

    runs = cplan.measurements["layers"].runs[:2]  # two layers of the curve, reading one encode
    vectors = runs[0].upstream[0].path(roots["results"])
    batch = [[r.to_json(tier), str(tmp_path / "batch" / r.key / "metrics.json")] for r in runs]
    assert cli.main(["rule", "batch", "--runs", json.dumps(batch), "probe", "--data-root", str(data_root), "--vectors", vectors,
                     "--threads", "1"]) == 0
    for r, (_, out) in zip(runs, batch):
        alone, batched = (json.loads(Path(f).read_text()) for f in (r.path(roots["results"]), out))
        assert batched["values"] == alone["values"] and batched["provenance"]["config"]["key"] == r.key
        for name, arr in np.load(Path(r.path(roots["results"])).with_name("predictions.npz")).items():
            assert np.array_equal(np.load(Path(out).with_name("predictions.npz"))[name], arr), name


# ---------------------------------------------------------------- a synthetic claim

def _write_probe_run(run, root: Path, accuracy: float, gold: np.ndarray, order: np.ndarray) -> None:
    """A probe run's files with the given accuracy: the items after the first accuracy x n of `order` are wrong, so
    a higher accuracy is right wherever a lower one is (nested predictions)."""
    n = len(gold)
    pred = gold.copy()
    wrong = order[int(accuracy * n):]
    pred[wrong] = (pred[wrong] + 1) % 6
    out = Path(run.path(str(root)))
    atomic_save_npz(out.with_name("predictions.npz"), **{f"{run.task}::pred": pred, f"{run.task}::gold": gold,
                                                          f"{run.task}::subsets": np.full(n, "ewt-dev"),
                                                          f"{run.task}::index": np.arange(n)})
    atomic_write_json(out, {"values": {"benchmarks": {run.task: {"accuracy": accuracy}}}})


def test_synthetic_t2_verdict(tmp_path, repo):
    """Accuracies set per (layer, task, random or trained): dependencies grow to the middle, POS is done by the low
    layer; the random-weights twin sits at 30%."""
    tier = with_overrides(load_tier("micro"), {"bootstrap.resamples": 200})
    cplan = P.plan_claim(_claim(repo, T2), tier)
    rng = np.random.default_rng(0)
    n = 600
    gold = {t: rng.integers(0, 6, n) for t in ("upos", "dependency", "bigram-shift")}
    # the 4-layer micro-BERT: POS's whole gain at layer 1 (expected layer 1), dependencies' spread over 1-3 (1.6)
    acc = {("upos", 0): 0.6, ("upos", 1): 0.8, ("upos", 2): 0.8, ("upos", 3): 0.8, ("upos", 4): 0.79,
           ("dependency", 0): 0.5, ("dependency", 1): 0.65, ("dependency", 2): 0.8, ("dependency", 3): 0.82,
           ("dependency", 4): 0.8}
    order = rng.permutation(n)
    for pm in cplan.measurements.values():
        for run in pm.runs + pm.controls:
            # bigram shift and MiniLM's contrast curve are shown only: any accuracy leaves the checks as they are
            a = 0.3 if "random" in run.instance else acc.get((run.task, run.layer), 0.55) if "minilm" in run.instance or run.task == "bigram-shift" else acc[(run.task, run.layer)]
            _write_probe_run(run, tmp_path, a, gold[run.task], order)
    verdict = decide_claim(cplan, tier, str(tmp_path))
    outcomes = [c["outcome"] for c in verdict["checks"]]
    assert outcomes == ["holds", "holds", "holds", "holds"], verdict["checks"]
    assert verdict["verdict"] == "reproduced"
    order = verdict["checks"][3]["details"][0]
    assert order["expected"]["upos"] == pytest.approx(1.0) and order["expected"]["dependency"] == pytest.approx(
        (1 * 15 + 2 * 15 + 3 * 2) / 32, abs=0.01)  # 0.82 * 600 rounds down to 491 right answers
    curve = verdict["measurements"]["layers"]["curve"]
    assert [p["x"] for p in curve] == [0, 1, 2, 3, 4]
    # the report shows the curve as a table row per task and draws it
    from plmclaims.report import markdown, write_verdicts
    md = markdown([verdict], tier)
    assert "## Curves" in md and "| dependency | 50.00 (30.00) | 65.00 (30.00) | 80.00 (30.00) |" in md
    write_verdicts([verdict], tier, tmp_path / "report")
    assert (tmp_path / "report" / "figures" / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert [p["per_benchmark"]["dependency"]["measured"] for p in curve] == pytest.approx([50, 65, 80, 82, 80], abs=0.2)
    assert curve[2]["floors"]["random-weights"]["dependency"] == pytest.approx(30.0)
    floors = verdict["measurements"]["middle"]["floors"]
    assert floors["random-weights"]["dependency"] == pytest.approx(30.0)
    # the same numbers with dependencies flat past the low layer contradict the second check
    for run in cplan.measurements["middle"].runs:
        if run.task == "dependency":
            src = next(r for r in cplan.measurements["low"].runs if r.task == "dependency" and r.instance == run.instance)
            for f in ("metrics.json", "predictions.npz"):
                Path(run.path(str(tmp_path))).with_name(f).write_bytes(Path(src.path(str(tmp_path))).with_name(f).read_bytes())
    contradicted = decide_claim(cplan, tier, str(tmp_path))
    assert contradicted["checks"][1]["outcome"] in ("contradicted", "inconclusive")
    assert contradicted["verdict"] != "reproduced"


# ---------------------------------------------------------------- embryology (T3): a curve along pre-training steps

T3 = "probing/embryology"


def test_a_step_curve_probes_each_checkpoint_with_the_initialisation_as_step_0(repo):
    tier = load_tier("micro")
    pm = P.plan_claim(_claim(repo, T3), tier).measurements["steps"]
    assert list(pm.points) == [0, 100, 300, 600]
    assert {r.instance for r in pm.points[0]} == {"micro-bert.random-s1", "micro-bert.random-s2"}
    assert [sorted({r.upstream[0].params.get("step") for r in pm.points[s]}) for s in (100, 300)] == [[100], [300]]
    # the last step is the final model: its runs are T2's middle-layer runs, computed once for both claims
    t2 = P.plan_claim(_claim(repo, T2), tier).measurements["middle"]
    assert {r.key for r in pm.points[600]} == {r.key for r in t2.runs if r.task in ("upos", "dependency")}
    assert len({r.upstream[0].key for r in pm.runs}) == 2 * 3 + 2  # an encode per (seed, checkpoint), one per twin
    # a model the workflow does not pre-train has no checkpoints: not run, with the reason
    paper = P.plan_claim(_claim(repo, T3), load_tier("paper")).measurements["steps"]
    assert paper.status == "not-run" and "does not pre-train" in paper.reason


def test_a_step_checkpoint_loads_the_weights_saved_at_that_step(tmp_path):
    from plmclaims.plan import model_dir

    tier = load_tier("micro")
    final, at_100 = model_dir("res", tier, "micro-bert.s1"), model_dir("res", tier, "micro-bert.s1", 100)
    assert final.endswith("/checkpoints/step-600") and at_100 == final.replace("step-600", "step-100")


def test_synthetic_embryology_verdict(tmp_path, repo):
    """POS has nearly all its gain by step 100; dependencies gain until 600; the initialisation sits at 30%."""
    tier = with_overrides(load_tier("micro"), {"bootstrap.resamples": 200})
    cplan = P.plan_claim(_claim(repo, T3), tier)
    rng = np.random.default_rng(1)
    n = 600
    gold = {t: rng.integers(0, 6, n) for t in ("upos", "dependency")}
    acc = {("upos", 100): 0.78, ("upos", 300): 0.8, ("upos", 600): 0.8,
           ("dependency", 100): 0.5, ("dependency", 300): 0.7, ("dependency", 600): 0.8}
    order = rng.permutation(n)
    step_of = {r.key: s for s, rs in cplan.measurements["steps"].points.items() for r in rs}
    for run in cplan.score_runs():
        a = 0.3 if step_of[run.key] == 0 else acc[(run.task, step_of[run.key])]
        _write_probe_run(run, tmp_path, a, gold[run.task], order)
    verdict = decide_claim(cplan, tier, str(tmp_path))
    assert [c["outcome"] for c in verdict["checks"]] == ["holds", "holds"], verdict["checks"]
    expected = verdict["checks"][0]["details"][0]["expected"]
    # POS: gains 48 at 100, 2 at 300 -> (100*48 + 300*2) / 50 = 108; dependencies: 20, 20, 10 -> 14000 / 50 = 280
    assert expected["upos"] == pytest.approx(108, abs=2) and expected["dependency"] == pytest.approx(280, abs=2)
