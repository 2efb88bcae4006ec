"""The same seed gives the same result: a second clean run, in a separate folder, agrees with the session's tiny-tier
run on every verdict, every run's main file (each run kind in plmclaims.plan.LAYOUTS), every metrics.json, tokenizer
and prediction array once the provenance that says when, where and from which checkout a run happened is left out.

The second run (the `second_run` fixture, conftest.py) does not redo every claim: it runs `covering_claims`, a few
claims whose runs touch every claim family, every run kind and every evaluator the tier plans (under half the runs). A
run's path holds the key hashed from its spec, not from the claims that asked for it, so each of its runs is the same
run as in the full tier and is compared file by file; the test asserts that the second run wrote every run kind the
full run wrote, so the coverage cannot shrink unnoticed. Where a SLURM cluster answers (CI) the second run goes through
the slurm profile and is also test_slurm's run, so the same seed gives the same bytes across executors too. Adding a
claim to an existing family adds nothing to this test's time."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from plmclaims.plan import LAYOUTS

# What differs between two honest runs of the same inputs: how long a run took and when it finished (and so a
# training run's steps per second) and the CPU time it used (cpu_s), the memory the process peaked at (read from the
# OS, so it moves with the allocator: peak_memory_mb, peak_rss_mb), and the checkout (the working tree may be
# edited between the two runs of one test session; a verdict's runs_provenance counts its runs by commit), and whether
# a finetune run was trained or copied from its finetuned twin (copied_from: the twin is planned only with a claim
# that reads its model, so the full tier and the covering claims may differ; the values are the same). Only keys
# with exactly these names are dropped, wherever they sit (the memory peak is a measurement in metrics.json and in
# claims.json); every other value is compared.
VOLATILE = {"wall_time_s", "startup_s", "finished_at", "git_commit", "train_wall_s", "steps_per_second", "peak_memory_mb",
            "runs_provenance", "copied_from", "peak_rss_mb", "cpu_s"}


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


def kind_files(work: Path, tier: str = "tiny") -> dict[str, list[Path]]:
    """run kind -> the main file of each run of that kind in work (the layout's folder and file, any field values)."""
    out = {}
    for kind, lay in LAYOUTS.items():
        pattern = re.sub(r"\{\w+\}", "*", f"{lay.base}/{tier}/{lay.folder}/{lay.main}")
        found = sorted(p.relative_to(work) for p in work.glob(pattern))
        if found:
            out[kind] = found
    return out


def same_content(a: Path, b: Path, first: Path, second: Path) -> bool:
    """JSON compared without its volatile fields, arrays value by value (dtype included), anything else byte by byte."""
    if a.suffix == ".json" and a.name != "tokenizer.json":  # the workflow's tokenizers must be byte-identical
        return _canonical_json(a, first) == _canonical_json(b, second)
    if a.suffix == ".npz":
        with np.load(a) as x, np.load(b) as y:
            return sorted(x.files) == sorted(y.files) and all(
                x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k], equal_nan=x[k].dtype.kind in "fc") for k in x.files)
    return a.read_bytes() == b.read_bytes()


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


def test_covering_claims_exercise_all_the_tier_plans_with_fewer_runs(repo, covering_claims):
    from conftest import claim_features

    claims = claim_features(repo)
    everything = set().union(*(f for f, _ in claims.values()))
    assert set().union(*(claims[c][0] for c in covering_claims)) == everything
    assert {("kind", "lm", ""), ("kind", "probe", ""), ("kind", "encode", "mteb"), ("family", "glue")} <= everything
    runs = set().union(*(k for _, k in claims.values()))
    assert len(set().union(*(claims[c][1] for c in covering_claims))) < len(runs)


def test_two_clean_tiny_runs_agree(tiny_run, second_run):
    first, _ = tiny_run
    second, claims, _ = second_run
    assert first != second
    kinds, again = kind_files(first), kind_files(second)
    # every run kind the whole tier writes is rerun, and every rerun is a run of the full tier (same key, same path)
    assert sorted(again) == sorted(kinds), f"run kinds of only one run, with the claims {claims}: {sorted(set(kinds) ^ set(again))}"
    compared = {p for ps in again.values() for p in ps}
    for name in ("metrics.json", "tokenizer.json", "predictions.npz"):
        compared |= set(_files(second, name))
    assert {"metrics.json", "tokenizer.json", "predictions.npz"} <= {p.name for p in compared}
    missing = sorted(str(p) for p in compared if not (first / p).is_file())
    assert not missing, f"the second run wrote files the full run did not: {missing}"
    differ = sorted(str(p) for p in compared if not same_content(first / p, second / p, first, second))
    assert not differ, f"files differ between two clean runs: {differ}"
    # the report: each claim of the second run has the same entry in both claims.json
    report = Path("results/tiny/claims.json")
    full = {v["id"]: comparable(v, first) for v in json.loads((first / report).read_text())}
    part = {v["id"]: comparable(v, second) for v in json.loads((second / report).read_text())}
    assert sorted(part) == sorted(claims)
    assert {cid: full[cid] for cid in part} == part
