"""Every measurement on the role pretrained-lm (and its twin), and a causal LM's CKA, run end to end at the tiny tier:
the test-only claims of tests/pretrained_lm_claims on the tiny tier's 2-layer Gemma3 (random weights, a tokenizer that
adds <bos>), through Snakemake, to verdicts. They run in a copy of the session's tiny-tier run (tiny_run), whose own
claims already ran most of their runs with the same keys (every encode, score, probe and geometry run of Gemma3 and its
twin); the runs only these claims plan (attention, frozen transfer, CKA) and their verdicts run here."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import OFFLINE, start_snakemake
from plmclaims.claims import load_claims

CLAIMS = Path(__file__).parent / "pretrained_lm_claims"
# copied, not linked: text and figures, which jobs that run again here (the report, logs) may rewrite in place
COPIED = {".json", ".log", ".md", ".csv", ".txt", ".yaml", ".html", ".png"}


def _copy_run(src: Path, dst: Path) -> None:
    """A workflow folder's resources/, results/ and Snakemake's metadata, times kept (Snakemake reruns an output older
    than its inputs): COPIED files copied, the rest (weights, arrays) hard-linked: the run's own folder stays as it
    was for the other tests that read it."""
    def link(a, b):
        return shutil.copy2(a, b) if Path(a).suffix in COPIED else os.link(a, b)
    for part in ("resources", "results", ".snakemake/metadata", ".snakemake/incomplete"):
        if (src / part).exists():
            shutil.copytree(src / part, dst / part, copy_function=link, symlinks=True)


@pytest.fixture(scope="module")
def results(repo, data_root, tiny_run, tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("pretrained_lm_tiny")
    _copy_run(tiny_run[0], workdir)
    res = start_snakemake(repo, workdir, "--cores", "2", "--config", "tier=tiny", f"data_root={data_root}",
                          f"claims_dir={CLAIMS}", env=OFFLINE, timeout=1200).result()
    assert res.returncode == 0, res.stderr[-3000:]
    return workdir / "results" / "tiny"


def _values(path: Path) -> dict:
    return json.loads(path.read_text())["values"]


@pytest.fixture(scope="module")
def ours() -> set[str]:
    """The keys of the runs these claims plan: the copied folder also holds the tier's other runs of the same models."""
    from plmclaims.plan import all_runs, plan_all
    from plmclaims.tiers import load_tier

    return set(all_runs(r for p in plan_all(load_claims(CLAIMS), load_tier("tiny")) for r in p.score_runs()))


def _ours(results: Path, pattern: str, keys: set[str]) -> list[Path]:
    """The files matching `pattern` in the folders of these claims' runs (a run's folder is named by its key)."""
    return sorted(p for p in results.glob(pattern) if p.parent.name in keys)


def _one(results: Path, pattern: str, keys: set[str]) -> Path:
    (found,) = _ours(results, pattern, keys)
    return found


@pytest.mark.slow
def test_every_claim_gets_a_verdict(results):
    report = {r["id"]: r["verdict"] for r in json.loads((results / "claims.json").read_text())}
    assert set(report) == {c.id for c in load_claims(CLAIMS)} and len(report) == len(list(CLAIMS.glob("*/*.yaml")))
    verdicts = {cid: json.loads((results / "claims" / f"{cid.replace('/', '--')}.json").read_text())["verdict"]
                for cid in report}
    assert verdicts == report and "error" not in verdicts.values(), verdicts


@pytest.mark.slow
def test_sentence_vectors_have_the_decoder_poolings_for_the_model_and_its_twin(results, ours):
    for instance in ("tiny-gemma", "tiny-gemma.random-s1"):
        with np.load(_one(results, f"runs/encode/senteval/{instance}/tokenised/*/vectors.npz", ours)) as z:
            assert {"STSBenchmark::last", "STSBenchmark::mean_2"} <= set(z.files) and "STSBenchmark::cls" not in z.files
    scored = {p.parts[-4] for p in _ours(results, "runs/score/senteval/tiny-gemma/tokenised/*/*/*/metrics.json", ours)}
    assert scored == {"mean", "last-token"}
    posts = {p.parts[-3] for p in _ours(results, "runs/score/senteval/tiny-gemma/tokenised/mean/*/*/metrics.json",
                                        ours)}
    assert posts == {"none", "whitening-nli", "flow-nli"}


@pytest.mark.slow
def test_probes_geometry_and_attention_read_every_layer(results, ours):
    with np.load(_one(results, "runs/probe-encode/tiny-gemma/dev/*/words.npz", ours)) as z:
        assert {f"train::layer{i}" for i in range(3)} <= set(z.files)
    found = _ours(results, "runs/probe/tiny-gemma.random-s1/*/*/dev/*/*/metrics.json", ours)
    probes = {(p.parts[-5], p.parts[-3]) for p in found}
    assert {t for t, _ in probes} == {"upos", "dependency", "tree"} and {l for _, l in probes} == {"l0", "l1", "l2"}
    geometry = _values(_one(results, "runs/geometry/tiny-gemma/dev/l2/*/metrics.json", ours))["benchmarks"]
    assert set(geometry) >= {"anisotropy", "self-similarity", "explainable-variance"}
    with np.load(_one(results, "runs/attention-maps/tiny-gemma/dev/*/attention.npz", ours)) as z:
        assert {"first::share", "first::uniform", "punctuation::share"} <= set(z.files) and "sep::share" not in z.files
        assert (z["first::uniform"] > 1 / z["tokens"]).all()  # the causal chance level: above |first| / T
    attention = _values(_one(results, "runs/attention/tiny-gemma/dev/l1/*/metrics.json", ours))["benchmarks"]
    assert set(attention) == {"attention-to-first", "attention-to-punctuation"}


@pytest.mark.slow
def test_the_frozen_decoder_trains_its_input_output_and_norms(results, ours):
    for task in ("bit-memory", "bit-xor", "listops"):
        for instance in ("tiny-gemma", "tiny-gemma.random-s1"):
            run = _one(results, f"runs/transfer/{instance}/{task}/s0/*/metrics.json", ours)
            groups = _values(run)["parameters"]["groups"]
            assert groups["positions"] == 0 and min(groups["layernorm"], groups["input"], groups["output"]) > 0


@pytest.mark.slow
def test_the_causal_lm_s_cka_compares_it_with_its_lm_tasks_full_fine_tuning(results, ours):
    cka = _values(_one(results, "runs/cka/tiny-lm/linear-cka/MRPC/s1/*/metrics.json", ours))
    assert set(cka["layers"]) == {"0", "1", "2"} and cka["examples"] == 24  # the dev sample lm-eval scored
    assert "MRPC" in cka["finetuned_dev"]
