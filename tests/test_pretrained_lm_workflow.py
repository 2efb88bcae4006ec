"""Every measurement on the role pretrained-lm (and its twin), and a causal LM's CKA, run end to end at the tiny tier:
the test-only claims of tests/pretrained_lm_claims on the tiny tier's 2-layer Gemma3 (random weights, a tokenizer that
adds <bos>), through Snakemake, to verdicts. About a minute on 2 cores."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import OFFLINE, start_snakemake

CLAIMS = Path(__file__).parent / "pretrained_lm_claims"


@pytest.fixture(scope="module")
def results(repo, data_root, tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("pretrained_lm_tiny")
    res = start_snakemake(repo, workdir, "--cores", "2", "--config", "tier=tiny", f"data_root={data_root}",
                          f"claims_dir={CLAIMS}", env=OFFLINE, timeout=1200).result()
    assert res.returncode == 0, res.stderr[-3000:]
    return workdir / "results" / "tiny"


def _values(path: Path) -> dict:
    return json.loads(path.read_text())["values"]


def _one(results: Path, pattern: str) -> Path:
    (found,) = sorted(results.glob(pattern))
    return found


@pytest.mark.slow
def test_every_claim_gets_a_verdict(results):
    verdicts = {p.stem: json.loads(p.read_text())["verdict"] for p in (results / "claims").glob("*.json")}
    assert len(verdicts) == len(list(CLAIMS.glob("*/*.yaml"))) and "error" not in verdicts.values(), verdicts


@pytest.mark.slow
def test_sentence_vectors_have_the_decoder_poolings_for_the_model_and_its_twin(results):
    for instance in ("tiny-gemma", "tiny-gemma.random-s1"):
        with np.load(_one(results, f"runs/encode/senteval/{instance}/tokenised/*/vectors.npz")) as z:
            assert {"STSBenchmark::last", "STSBenchmark::mean_2"} <= set(z.files) and "STSBenchmark::cls" not in z.files
    scored = {p.parts[-4] for p in results.glob("runs/score/senteval/tiny-gemma/tokenised/*/*/*/metrics.json")}
    assert scored == {"mean", "last-token"}
    posts = {p.parts[-3] for p in results.glob("runs/score/senteval/tiny-gemma/tokenised/mean/*/*/metrics.json")}
    assert posts == {"none", "whitening-nli", "flow-nli"}


@pytest.mark.slow
def test_probes_geometry_and_attention_read_every_layer(results):
    with np.load(_one(results, "runs/probe-encode/tiny-gemma/dev/*/words.npz")) as z:
        assert {f"train::layer{i}" for i in range(3)} <= set(z.files)
    found = results.glob("runs/probe/tiny-gemma.random-s1/*/*/dev/*/*/metrics.json")
    probes = {(p.parts[-5], p.parts[-3]) for p in found}
    assert {t for t, _ in probes} == {"upos", "dependency", "tree"} and {l for _, l in probes} == {"l0", "l1", "l2"}
    geometry = _values(_one(results, "runs/geometry/tiny-gemma/dev/l2/*/metrics.json"))["benchmarks"]
    assert set(geometry) >= {"anisotropy", "self-similarity", "explainable-variance"}
    with np.load(_one(results, "runs/attention-maps/tiny-gemma/dev/*/attention.npz")) as z:
        assert {"first::share", "first::uniform", "punctuation::share"} <= set(z.files) and "sep::share" not in z.files
        assert (z["first::uniform"] > 1 / z["tokens"]).all()  # the causal chance level: above |first| / T
    attention = _values(_one(results, "runs/attention/tiny-gemma/dev/l1/*/metrics.json"))["benchmarks"]
    assert set(attention) == {"attention-to-first", "attention-to-punctuation"}


@pytest.mark.slow
def test_the_frozen_decoder_trains_its_input_output_and_norms(results):
    for task in ("bit-memory", "bit-xor", "listops"):
        for instance in ("tiny-gemma", "tiny-gemma.random-s1"):
            run = _one(results, f"runs/transfer/{instance}/{task}/s0/*/metrics.json")
            groups = _values(run)["parameters"]["groups"]
            assert groups["positions"] == 0 and min(groups["layernorm"], groups["input"], groups["output"]) > 0


@pytest.mark.slow
def test_the_causal_lm_s_cka_compares_it_with_its_lm_tasks_full_fine_tuning(results):
    cka = _values(_one(results, "runs/cka/tiny-lm/linear-cka/MRPC/s1/*/metrics.json"))
    assert set(cka["layers"]) == {"0", "1", "2"} and cka["examples"] == 24  # the dev sample lm-eval scored
    assert "MRPC" in cka["finetuned_dev"]
