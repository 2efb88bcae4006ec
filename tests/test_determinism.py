"""The same seed gives the same result: two clean runs of the tiny tier, in separate folders, agree on every verdict,
every per-run metrics.json and every prediction array once the provenance that says when, where and from which
checkout a run happened is left out. Runs the tiny tier a second time (minutes)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

# What differs between two honest runs of the same inputs: how long a run took and when it finished, the memory the
# process peaked at (read from the OS, so it moves with the allocator), and the checkout (the working tree may be
# edited between the two runs of one test session). Only keys with exactly these names are dropped, wherever they
# sit (the memory peak is a measurement in metrics.json and in claims.json); every other value is compared.
VOLATILE = {"wall_time_s", "finished_at", "git_commit", "train_wall_s", "peak_memory_mb"}


def comparable(obj, workdir: Path):
    """obj without the VOLATILE fields, with the run folder in any path written as <workdir>."""
    if isinstance(obj, dict):
        return {_no_workdir(k, workdir): comparable(_sha_without_workdir(k, v, workdir), workdir)
                for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [comparable(v, workdir) for v in obj]
    if isinstance(obj, str):
        return _no_workdir(obj, workdir)
    return obj


def _no_workdir(text, workdir: Path):
    return text.replace(str(workdir), "<workdir>") if isinstance(text, str) else text


def _sha_without_workdir(name, sha, workdir: Path):
    """A sha256 recorded for a file of the run that names the run folder (lm-eval task YAMLs hold absolute paths)
    becomes the sha256 of that file with the folder written <workdir>, once the recorded one is checked; any other
    value is returned as it is."""
    path = workdir / name if isinstance(name, str) else None
    if isinstance(sha, str) and len(sha) == 64 and path is not None and path.is_file():
        data = path.read_bytes()
        if str(workdir).encode() in data and hashlib.sha256(data).hexdigest() == sha:
            return hashlib.sha256(data.replace(str(workdir).encode(), b"<workdir>")).hexdigest()
    return sha


def _canonical_json(path: Path, workdir: Path) -> str:
    return json.dumps(comparable(json.loads(path.read_text()), workdir), indent=1)


def _files(work: Path, name: str) -> list[Path]:
    return sorted(p.relative_to(work) for top in ("results", "resources") for p in (work / top).rglob(name))


@pytest.fixture(scope="module")
def second_run(tmp_path_factory, tiny_tier):
    work = tmp_path_factory.mktemp("wf-again")
    tiny_tier(work)
    return work


def test_comparable_drops_only_volatile_fields(tmp_path):
    record = {"values": {"loss_history": [0.5, 0.25], "peak_memory_mb": 588.3, "train_wall_s": 13.9, "wall": 1,
                         "out": f"{tmp_path}/runs/x", "model": "/elsewhere/model"},
              "provenance": {"packages": {"torch": "2"}, "wall_time_s": 2.0, "finished_at": "t", "git_commit": "abc",
                             "seed": 1, "data_sha256": {"/data/a.tsv": "ff"}}}
    assert comparable(record, tmp_path) == {
        "values": {"loss_history": [0.5, 0.25], "wall": 1, "out": "<workdir>/runs/x", "model": "/elsewhere/model"},
        "provenance": {"packages": {"torch": "2"}, "seed": 1, "data_sha256": {"/data/a.tsv": "ff"}}}


def test_comparable_hashes_a_file_naming_the_run_folder_as_if_it_were_elsewhere(tmp_path):
    a, b = tmp_path / "a", tmp_path / "bb"
    hashes = []
    for work in (a, b):
        (work / "tasks").mkdir(parents=True)
        text = f"data_files: {work}/tasks/rte.jsonl\n".encode()
        (work / "tasks" / "rte.yaml").write_bytes(text)
        hashes.append(comparable({"files": {"tasks/rte.yaml": hashlib.sha256(text).hexdigest()}}, work))
    assert hashes[0] == hashes[1]
    assert comparable({"files": {"tasks/rte.yaml": "0" * 64}}, a) == {"files": {"tasks/rte.yaml": "0" * 64}}


def test_two_clean_tiny_runs_agree(tiny_run, second_run):
    first, _ = tiny_run
    assert first != second_run
    claims = Path("results/tiny/claims.json")
    assert _canonical_json(first / claims, first) == _canonical_json(second_run / claims, second_run)
    metrics = _files(first, "metrics.json")
    assert len(metrics) >= 10 and metrics == _files(second_run, "metrics.json")
    differ = [str(p) for p in metrics if _canonical_json(first / p, first) != _canonical_json(second_run / p, second_run)]
    assert not differ, f"metrics.json differ between two clean runs: {differ}"
    # the workflow's own tokenizers are byte-identical (tokenizers' WordPiece trainer alone is not)
    tokenizers = _files(first, "tokenizer.json")
    assert tokenizers and tokenizers == _files(second_run, "tokenizer.json")
    assert [p for p in tokenizers if (first / p).read_bytes() != (second_run / p).read_bytes()] == []
    predictions = _files(first, "predictions.npz")
    assert predictions and predictions == _files(second_run, "predictions.npz")
    for p in predictions:
        with np.load(first / p) as a, np.load(second_run / p) as b:
            assert sorted(a.files) == sorted(b.files), p
            for k in a.files:
                assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind in "fc"), (p, k)
