"""Prefetch for air-gapped clusters, through huggingface_hub's real download code against a local stand-in hub."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fakehub import FakeHub
from plmclaims.data import sts

CLAIM = "sts/released-checkpoint-reproduces"


@pytest.fixture(scope="module")
def hub_repos(tmp_path_factory, senteval_root, minilm_path):
    """The hub repositories the claim needs, laid out as on the hub, built from the local data and package."""
    import datasets

    root = tmp_path_factory.mktemp("hubrepos")
    repos = {("model", "sentence-transformers/all-MiniLM-L6-v2"): Path(minilm_path)}
    for name in sts.BENCHMARKS:
        data = sts.load_local(senteval_root, name, "raw", "all" if name == "SICK-R" else "test")
        repo_id = sts.HUB_IDS[name][0]
        folder = root / repo_id / "data"
        folder.mkdir(parents=True)
        datasets.Dataset.from_dict({"sentence1": data.sentence1, "sentence2": data.sentence2, "score": data.scores.tolist()}
                                   ).to_parquet(str(folder / "test-00000-of-00001.parquet"))
        repos[("dataset", repo_id)] = root / repo_id
    return repos


@pytest.fixture()
def project(tmp_path, repo):
    """A tier that reads MiniLM and the MTEB STS data from the hub, and a claims folder with the fidelity claim."""
    tier = yaml.safe_load((repo / "workflows" / "tiers" / "tiny.yaml").read_text())
    tier["name"] = "hubtest"
    tier["data"]["sts_mteb"] = {"source": "hub"}
    tier["assets"]["minilm-hub"] = {"kind": "transformer", "source": "hub", "id": "sentence-transformers/all-MiniLM-L6-v2",
                                    "max_length": 256}
    tier["roles"]["released-sentence-encoder"] = {"asset": "minilm-hub"}
    (tmp_path / "hubtest.yaml").write_text(yaml.safe_dump(tier))
    claims = tmp_path / "claims" / "sts"
    claims.mkdir(parents=True)
    shutil.copy(repo / "replications" / "sts" / "released-checkpoint-reproduces.yaml", claims)
    return tmp_path


def _env(tmp_path: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "PLMCLAIMS_HUB_DIR")}
    return {**env, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_DISABLE_XET": "1", **extra}


def _prefetch(project: Path, hub: FakeHub) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "plmclaims.cli", "prefetch", "--tier", str(project / "hubtest.yaml"),
           "--claims-dir", str(project / "claims"), "--out", str(project / "resources" / "hub")]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(project, HF_ENDPOINT=hub.url), timeout=600)


def test_prefetch_writes_assets_and_sha256_manifest(project, hub_repos):
    with FakeHub(hub_repos) as hub:
        res = _prefetch(project, hub)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "prefetched 8 assets" in res.stdout
    assert any("/api/datasets/mteb/sts12-sts/tree/a0d554a6" in r for r in hub.requests)  # the pinned revision is asked for
    manifest = json.loads((project / "resources" / "hub" / "manifest.json").read_text())
    entry = manifest["assets"]["model:sentence-transformers/all-MiniLM-L6-v2"]
    src = hub_repos[("model", "sentence-transformers/all-MiniLM-L6-v2")]
    assert entry["files"]["model.safetensors"] == hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    assert len(manifest["assets"]) == 8


def _snakemake(project: Path, repo: Path, *args, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "--directory", str(project),
           "--cores", "2", "--config", f"tier={project / 'hubtest.yaml'}", f"claims_dir={project / 'claims'}",
           f"data_root={project / 'no-local-data'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)


def test_offline_run_reads_only_the_prefetched_folder(project, repo, hub_repos):
    with FakeHub(hub_repos) as hub:
        assert _prefetch(project, hub).returncode == 0
    # the hub is gone: the endpoint points at a closed port, and offline mode is on
    env = _env(project, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9")
    res = _snakemake(project, repo, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    verdict = json.loads((project / "results" / "hubtest" / "claims" / "sts--released-checkpoint-reproduces.json").read_text())
    assert verdict["measurements"]["minilm"]["measured"] is not None
    metrics = json.loads(next((project / "results" / "hubtest" / "runs" / "score").rglob("metrics.json")).read_text())
    assert all("resources/hub/datasets/mteb/" in path for path in metrics["provenance"]["data_sha256"])
    encode = json.loads(next((project / "results" / "hubtest" / "runs" / "encode").rglob("metrics.json")).read_text())
    assert "resources/hub/models/sentence-transformers/all-MiniLM-L6-v2" in encode["values"]["model"]


def test_missing_asset_fails_at_once_naming_it_and_the_command(project, repo, hub_repos):
    with FakeHub(hub_repos) as hub:
        assert _prefetch(project, hub).returncode == 0
    manifest_path = project / "resources" / "hub" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["assets"]["dataset:mteb/sts15-sts"]
    manifest_path.write_text(json.dumps(manifest))
    res = _snakemake(project, repo, env=_env(project, HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9"))
    assert res.returncode != 0
    err = [l for l in res.stderr.splitlines() if l.startswith("plmclaims: error:")]
    assert len(err) == 1 and "dataset mteb/sts15-sts" in err[0] and "plmclaims prefetch --tier hubtest" in err[0]
    assert not (project / "results").exists()  # stopped before any compute
