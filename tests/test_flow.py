"""BERT-flow (plmclaims.methods.flow) and its place in the STS family: the flow Gaussianises what it is fitted on, is
invertible and seeded; a score run with `flow-target` writes what the verdicts read, keyed by the flow's settings."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from plmclaims import plan as P, verdicts
from plmclaims.families.sts import runs as sts_runs
from plmclaims.families.sts.plan import score_run
from plmclaims.methods import flow
from plmclaims.tiers import load_tier

SMALL = {"levels": 1, "depth": 2, "width": 16, "batch_size": 64}


def _correlated(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Anisotropic, shifted and strongly correlated vectors, like raw BERT vectors in miniature."""
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(dim, dim)) * np.linspace(3.0, 0.2, dim)[:, None]
    return rng.normal(size=(n, dim)) @ mix + rng.normal(scale=4.0, size=dim)


@pytest.mark.parametrize("dim", [2, 8])
def test_flow_gaussianises_its_fit_vectors(dim):
    x = _correlated(1500, dim)
    assert np.abs(np.corrcoef(x.T) - np.eye(dim)).max() > 0.3  # the toy set is far from white
    fitted = flow.fit(x, seed=0, epochs=15, batch_size=100, lr=2e-3)  # the paper's Glow: 3 levels x depth 3
    z = fitted.forward(x)
    assert np.abs(z.mean(0)).max() < 0.2
    assert np.abs(np.cov(z.T) - np.eye(dim)).max() < 0.25
    nll = fitted.mean_nll
    assert len(nll) == 16 and nll[-1] < nll[0] - 0.3  # maximum likelihood did the work, not the ActNorm init alone
    assert fitted.steps == 15 * 15


def test_flow_is_invertible():
    x = _correlated(300, 8, seed=1)
    fitted = flow.fit(x, seed=0, epochs=2, **SMALL)
    z = fitted.forward(x)
    assert not np.allclose(z, x, atol=0.1)
    np.testing.assert_allclose(fitted.inverse(z), x, rtol=1e-4, atol=1e-3)


def test_same_seed_same_bytes_other_seed_other_flow():
    x = _correlated(400, 8, seed=2)
    a = flow.fit(x, seed=3, epochs=2, **SMALL).forward(x)
    b = flow.fit(x, seed=3, epochs=2, **SMALL).forward(x)
    c = flow.fit(x, seed=4, epochs=2, **SMALL).forward(x)
    assert a.tobytes() == b.tobytes()
    assert not np.array_equal(a, c)


def _fake_vectors(tier: dict, data_root: Path, out: Path) -> Path:
    """An encode run's vectors.npz and sentences.json for the tiny tier's STS samples: each sentence a seeded vector
    that mixes its bag of words (so similar sentences have similar vectors) with a large shared offset (anisotropy)."""
    rng = np.random.default_rng(0)
    words: dict[str, np.ndarray] = {}
    offset = rng.normal(scale=5.0, size=16)
    arrays, sentences = {}, {}
    for d in sts_runs.load_benchmarks(tier, "senteval", "tokenised", str(data_root)):
        sents = d.sentences()
        bags = np.stack([np.mean([words.setdefault(w, rng.normal(size=16)) for w in s.split() or ["<empty>"]], 0)
                         for s in sents])
        for layer in (0, 1, 2):
            arrays[f"{d.name}::mean_{layer}"] = (bags + offset + 0.1 * layer).astype(np.float32)
        arrays[f"{d.name}::n_layers"] = np.asarray(2)
        sentences[d.name] = sents
    out.mkdir(parents=True)
    np.savez(out / "vectors.npz", **arrays)
    (out / "sentences.json").write_text(json.dumps(sentences))
    return out / "vectors.npz"


def test_score_run_with_flow_writes_what_verdicts_read(tmp_path, data_root):
    tier = load_tier("tiny")
    run = score_run(tier, "senteval", "micro-bert.s1", "tokenised", "first-last", "flow-target")
    assert run.spec["tier"]["postprocess"]["flow"] == tier["postprocess"]["flow"]
    vectors = _fake_vectors(tier, data_root, tmp_path / "encode")
    results = tmp_path / "results"
    spec, view = P.run_from_json(run.to_json(tier))  # as the rule hands it to the CLI: the tier view the key covers
    assert spec.key == run.key
    sts_runs.score(view, spec, str(data_root), vectors, Path(run.path(str(results))))
    metrics, npz = verdicts.load_run(run, str(results))
    bench = metrics["values"]["benchmarks"]
    assert set(bench) == {"STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R"}
    for name, v in bench.items():
        assert v["fit_on"] == "target" and v["flow_steps"] >= 1 and np.isfinite(v["all"])
        assert np.isfinite(npz[f"{name}::pred"]).all() and len(npz[f"{name}::pred"]) == len(npz[f"{name}::gold"])
    assert "degenerate" not in metrics["values"]
    # the flow changes the scores: they are not those of the same pooling without it
    plain = score_run(tier, "senteval", "micro-bert.s1", "tokenised", "first-last", "none")
    spec, view = P.run_from_json(plain.to_json(tier))
    sts_runs.score(view, spec, str(data_root), vectors, Path(plain.path(str(results))))
    _, npz_plain = verdicts.load_run(plain, str(results))
    assert not np.allclose(npz["STS12::pred"], npz_plain["STS12::pred"])


def test_flow_settings_are_in_the_key_and_only_in_flow_runs():
    tier = load_tier("micro")
    edited = copy.deepcopy(tier)
    edited["postprocess"]["flow"]["epochs"] += 1
    key = lambda t, post: score_run(t, "senteval", "micro-bert.s1", "tokenised", "first-last", post).key  # noqa: E731
    assert key(tier, "flow-target") != key(edited, "flow-target")
    assert key(tier, "whitening-target") == key(edited, "whitening-target")
    assert key(tier, "none") == key(edited, "none")


def test_unknown_post_processing_is_one_clear_error():
    with pytest.raises(Exception, match="allowed values: none, whitening-<corpus>"):
        sts_runs._fit_post("flow-target-k2", {}, 0, np.zeros((4, 2)))


def _local_all_nli(folder: Path, n: int = 120) -> Path:
    """A local copy laid out like sentence-transformers/all-nli (subset 'pair', split 'train'), loaded by the same
    datasets call as the hub repository."""
    import datasets

    (folder / "pair").mkdir(parents=True)
    anchors = [f"a person number {i} is walking a dog in the park" for i in range(n)]
    positives = [f"someone walks dog {i} outside" if i % 3 else anchors[0] for i in range(n)]  # duplicates collapse
    datasets.Dataset.from_dict({"anchor": anchors, "positive": positives}).to_parquet(
        str(folder / "pair" / "train-00000-of-00001.parquet"))
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: pair\n  data_files:\n  - split: train\n"
                                      "    path: pair/train-*\n---\n")
    return folder


def test_whitening_and_flow_fitted_on_a_hub_corpus(tmp_path, data_root):
    """The paper tier's 'nli' fit: one fitencode run per model over the corpus's sentences, its vectors pooled like
    the benchmark's, the fit done once and applied to every benchmark."""
    tier = load_tier("micro")
    tier["data"]["max_pairs"] = 40
    tier["postprocess"]["flow"] = {"levels": 1, "depth": 1, "width": 8, "epochs": 1, "batch_size": 64}
    tier["fit_corpora"]["nli"] = {"use": "hub", "id": str(_local_all_nli(tmp_path / "all-nli")), "subset": "pair",
                                  "split": "train", "columns": ["anchor", "positive"], "max_sentences": 150}
    results, resources = tmp_path / "results", str(tmp_path / "resources")
    runs = {post: score_run(tier, "senteval", "all-minilm-l6-v2", "tokenised", "mean", post)
            for post in ("whitening-nli", "flow-nli", "whitening-target")}
    fit_run = [u for u in runs["whitening-nli"].upstream if u.kind == "fitencode"]
    assert len(fit_run) == 1 and [u.kind for u in runs["whitening-target"].upstream] == ["encode"]
    assert fit_run[0].key == [u for u in runs["flow-nli"].upstream if u.kind == "fitencode"][0].key  # one pass, shared
    encode = runs["whitening-nli"].upstream[0]
    spec, view = P.run_from_json(encode.to_json(tier))
    sts_runs.encode(view, spec.instance, spec.evaluator, spec.form, str(data_root), resources, Path(encode.path(str(results))))
    spec, view = P.run_from_json(fit_run[0].to_json(tier))
    sts_runs.fit_encode(view, spec.instance, spec.corpus, str(data_root), resources, Path(fit_run[0].path(str(results))))
    fit_metrics = json.loads(Path(fit_run[0].path(str(results))).with_name("metrics.json").read_text())
    assert fit_metrics["values"]["sentences"] == 150  # a seeded sample of max_sentences
    everything, _ = sts_runs.load_fit_sentences({**tier["fit_corpora"]["nli"], "max_sentences": None})
    assert len(everything) == 120 + 80  # unique sentences: the 40 positives that repeat anchor 0 are not added
    preds = {}
    for post, run in runs.items():
        spec, view = P.run_from_json(run.to_json(tier))
        fit = Path(fit_run[0].path(str(results))) if post.endswith("nli") else None
        sts_runs.score(view, spec, str(data_root), Path(encode.path(str(results))), Path(run.path(str(results))), fit)
        metrics, npz = verdicts.load_run(run, str(results))
        sts12 = metrics["values"]["benchmarks"]["STS12"]
        assert sts12["fit_on"] == post.split("-")[1]
        # NLI: the corpus's 150 sentences; target: STS12's own (at most 2 x 40 pairs, repeated sentences once)
        assert sts12["fit_sentences"] == 150 if post.endswith("nli") else 40 < sts12["fit_sentences"] <= 80
        preds[post] = npz["STS12::pred"]
    assert not np.allclose(preds["whitening-nli"], preds["whitening-target"])
    spec, view = P.run_from_json(runs["whitening-nli"].to_json(tier))
    with pytest.raises(Exception, match="--fit-vectors"):
        sts_runs.score(view, spec, str(data_root), Path(encode.path(str(results))), tmp_path / "x" / "metrics.json")


def test_tiny_fits_on_glue_train_sentences(data_root, repo):
    """Tiny stands RTE's train sentences in for NLI (offline), so its workflow runs the fit-corpus encode rule."""
    from plmclaims.claims import load_claims
    from plmclaims.families.sts import plan as sts_plan

    tier = load_tier("tiny")
    sentences, files = sts_runs.load_fit_sentences(tier["fit_corpora"]["nli"], tier, str(data_root))
    assert len(sentences) == len(set(sentences)) == 200 and any(f.endswith("RTE/train.tsv") for f in files)
    plans = {p.claim.id: p for p in P.plan_all(load_claims(repo / "replications"), tier)}
    for claim, name in (("sts/whitening-improves-bert", "bert_whitening"), ("sts/flow-improves-bert", "bert_flow")):
        runs = plans[claim].measurements[name].runs
        assert runs and all(r.post.endswith("-nli") for r in runs)
        fit = [u for r in runs for u in r.upstream if u.kind == "fitencode"]
        assert len(fit) == len(runs) and all(u.corpus == "nli" for u in fit)
        assert sts_plan.data_files(fit[0], tier, str(data_root))[0].endswith("RTE/train.tsv")
