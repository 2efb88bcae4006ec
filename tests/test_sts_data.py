"""The STS data layer: known counts, both text forms, unscored pairs skipped, sha256 recorded, hub path."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from plmclaims.data import sts
from plmclaims.errors import UserError


@pytest.mark.parametrize("form", ["tokenised", "raw"])
def test_known_counts_both_forms(senteval_root, form):
    counts = {name: len(sts.load_local(senteval_root, name, form)) for name in sts.BENCHMARKS}
    assert counts == {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186, "STSBenchmark": 1379, "SICK-R": 4927}


def test_sick_all_is_mteb_definition(senteval_root):
    assert len(sts.load_local(senteval_root, "SICK-R", "raw", "all")) == 9927


def test_forms_differ_and_pairs_align(senteval_root):
    tok = sts.load_local(senteval_root, "STS12", "tokenised")
    raw = sts.load_local(senteval_root, "STS12", "raw")
    assert tok.sentence1[0] == tok.sentence1[0].lower()
    assert raw.sentence1[0] != raw.sentence1[0].lower()
    # same pairs in the same order, same gold
    assert np.array_equal(tok.scores, raw.scores)
    assert tok.subsets == raw.subsets
    assert raw.sentence1[0].lower().split()[:3] == tok.sentence1[0].split()[:3]


def test_unscored_pairs_are_skipped(senteval_root):
    data = sts.load_local(senteval_root, "STS15", "tokenised")
    gs = (senteval_root / "STS" / "STS15-en-test" / "STS.gs.answers-forums.txt").read_text().splitlines()
    blank = sum(1 for g in gs if not g.strip())
    assert blank > 0
    assert data.subsets.count("answers-forums") == len(gs) - blank
    assert not np.isnan(data.scores).any()


def test_sha256_of_every_file_read(data_root, senteval_root):
    data = sts.load_local(senteval_root, "STS13", "tokenised")
    sums = {}
    for line in (data_root / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[(data_root / name.lstrip("*").removeprefix("./")).resolve()] = digest
    assert len(data.files) == 6  # three subsets x (input, gold)
    from pathlib import Path

    for path, digest in data.files.items():
        assert digest == hashlib.sha256(Path(path).read_bytes()).hexdigest()
        assert sums[Path(path).resolve()] == digest


def test_wrong_root_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="STS file not found; check data_root"):
        sts.load_local(tmp_path, "STS12", "tokenised")


def test_unknown_split_and_form(senteval_root):
    with pytest.raises(UserError, match="allowed values: raw, tokenised"):
        sts.load_local(senteval_root, "STS12", "lemmas")
    with pytest.raises(UserError, match="allowed values: test"):
        sts.load_local(senteval_root, "STS12", "raw", "dev")


def test_count_mismatch_is_detected(tmp_path, senteval_root):
    import shutil

    dst = tmp_path / "STS" / "STSBenchmark"
    dst.mkdir(parents=True)
    lines = (senteval_root / "STS" / "STSBenchmark" / "sts-test.csv").read_text().splitlines()
    (dst / "sts-test.csv").write_text("\n".join(lines[:-5]) + "\n")
    with pytest.raises(UserError, match="has 1374 scored pairs, expected 1379"):
        sts.load_local(tmp_path, "STSBenchmark", "tokenised")
    shutil.rmtree(dst)


@pytest.fixture(scope="module")
def hub_like(tmp_path_factory, senteval_root):
    """A local folder laid out like the hub's mteb/stsbenchmark-sts (parquet test split)."""
    import datasets

    raw = sts.load_local(senteval_root, "STSBenchmark", "raw")
    root = tmp_path_factory.mktemp("hub") / "stsbenchmark-sts"
    (root / "data").mkdir(parents=True)
    ds = datasets.Dataset.from_dict({"sentence1": raw.sentence1, "sentence2": raw.sentence2, "score": raw.scores.tolist()})
    ds.to_parquet(str(root / "data" / "test-00000-of-00001.parquet"))
    return root, raw


def test_hub_path_reads_through_datasets(hub_like):
    root, raw = hub_like
    data = sts.load_hub("STSBenchmark", "raw", hub_id=str(root))
    assert len(data) == 1379
    assert data.sentence1 == raw.sentence1 and np.allclose(data.scores, raw.scores)
    assert data.files and all(len(v) == 64 for v in data.files.values())


def test_hub_tokenised_form_approximates_senteval(hub_like, senteval_root):
    root, _ = hub_like
    data = sts.load_hub("STSBenchmark", "tokenised", hub_id=str(root))
    senteval = sts.load_local(senteval_root, "STSBenchmark", "tokenised")
    same = np.mean([a == b for a, b in zip(data.sentence1, senteval.sentence1)])
    assert same > 0.6, same  # Moses differs from SentEval's script on clitics ("poor ' s")
    assert "sacremoses" in data.form_note


def test_hub_sick_test_split_is_refused():
    with pytest.raises(UserError, match="use split 'all'"):
        sts.load_hub("SICK-R", "raw", "test")


def test_hub_unreachable_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match=r"'mteb/sts12-sts' is not prefetched .* plmclaims prefetch --tier"):
        sts.load_hub("STS12", "raw")
    # not offline, but the dataset cannot be loaded: the loader names the asset and the way out
    monkeypatch.delenv("HF_HUB_OFFLINE")
    missing = str(tmp_path / "no-such-copy")
    with pytest.raises(UserError, match=f"could not load '{missing}' .* prefetch"):
        sts.load_hub("STS12", "raw", hub_id=missing)
