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
from plmclaims import hub as hubmod
from plmclaims.data import sts
from plmclaims.errors import UserError

CLAIM = "sts/released-checkpoint-reproduces"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
# the paper tier's pin, so these tests load MiniLM at the commit the paper tier names
PIN = yaml.safe_load((Path(__file__).parents[1] / "workflows" / "tiers" / "paper.yaml").read_text()
                     )["assets"]["all-minilm-l6-v2-hub"]["revision"]


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
    tier["assets"]["minilm-hub"] = {"kind": "transformer", "source": "hub", "id": MINILM, "revision": PIN, "max_length": 256}
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
    assert any(f"/api/models/{MINILM}/revision/{PIN}" in r for r in hub.requests)
    assert not any("/main" in r for r in hub.requests)  # no asset of this tier falls back to the moving branch
    manifest = json.loads((project / "resources" / "hub" / "manifest.json").read_text())
    entry = manifest["assets"][f"model:{MINILM}"]
    assert entry["revision"] == PIN and entry["pinned"]
    assert manifest["assets"]["dataset:mteb/sts12-sts"]["revision"] == sts.HUB_IDS["STS12"][1]
    src = hub_repos[("model", "sentence-transformers/all-MiniLM-L6-v2")]
    assert entry["files"]["model.safetensors"] == hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    assert len(manifest["assets"]) == 8


def _snakemake(project: Path, repo: Path, *args, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "--directory", str(project),
           "--cores", "2", "--config", f"tier={project / 'hubtest.yaml'}", f"claims_dir={project / 'claims'}",
           f"data_root={project / 'no-local-data'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)


@pytest.mark.slow
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
    assert encode["provenance"]["config"]["revision"] == PIN  # the run records the commit it loaded


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


@pytest.fixture()
def prefetched(project, hub_repos, monkeypatch):
    """The fidelity claim's assets prefetched into project/resources/hub, and this process pointed at them."""
    with FakeHub(hub_repos) as hub:
        res = _prefetch(project, hub)
    assert res.returncode == 0, res.stderr[-2000:]
    root = project / "resources" / "hub"
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(root))
    monkeypatch.setattr(hubmod, "_verified", set())  # a fresh process's cache
    return root


def _changed(folder: Path) -> Path:
    path = folder / "config.json"
    path.write_bytes(path.read_bytes().replace(b"384", b"385", 1))
    return path


def _missing(folder: Path) -> Path:
    (folder / "vocab.txt").unlink()
    return folder / "vocab.txt"


def _added(folder: Path) -> Path:
    (folder / "pytorch_model.bin").write_bytes(b"planted")  # a second weights file a loader could pick up
    return folder / "pytorch_model.bin"


@pytest.mark.slow
@pytest.mark.parametrize("tamper, says", [(_changed, "sha256 differs"), (_missing, "missing"), (_added, "not in manifest.json")])
def test_tampered_prefetched_file_stops_the_load_in_one_line(prefetched, tamper, says):
    folder = prefetched / "models" / MINILM
    path = tamper(folder)
    with pytest.raises(UserError) as err:
        hubmod.resolve(MINILM, "model", "hubtest", PIN)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path}: {says}")
    assert f"plmclaims prefetch --tier hubtest --out {prefetched}" in line


@pytest.mark.slow
def test_a_tokenizer_of_another_model_is_prefetched_and_refused_at_load(project, hub_repos, tmp_path, monkeypatch):
    """The hub serves what it has: a MiniLM repository whose tokenizer names ids past the embedding's 30522 rows (a
    byte-level BPE's, say) is prefetched, and the first load (every rule's, through hub.resolve) stops in one line
    rather than with an index error mid-run."""
    bad = tmp_path / "minilm-other-tokenizer"
    shutil.copytree(hub_repos[("model", MINILM)], bad)
    tok = json.loads((bad / "tokenizer.json").read_text())
    tok["model"]["vocab"]["<filler-past-the-rows>"] = 31000
    (bad / "tokenizer.json").write_text(json.dumps(tok))
    with FakeHub({**hub_repos, ("model", MINILM): bad}) as hub:
        res = _prefetch(project, hub)
    assert res.returncode == 0, res.stderr[-2000:]
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(project / "resources" / "hub"))
    monkeypatch.setattr(hubmod, "_verified", set())
    with pytest.raises(UserError) as err:
        hubmod.resolve(MINILM, "model", "hubtest", PIN)
    line = str(err.value)
    assert "\n" not in line and "the tokenizer has ids up to 31000, but config.json's vocab_size is 30522" in line


def test_verified_once_per_process_and_a_changed_pin_refused(prefetched, monkeypatch):
    folder = prefetched / "models" / MINILM
    assert hubmod.resolve(MINILM, "model", "hubtest", PIN) == str(folder)
    hashed = []
    monkeypatch.setattr(hubmod, "sha256_file", lambda p: hashed.append(p))
    assert hubmod.resolve(MINILM, "model", "hubtest", PIN) == str(folder)
    assert hashed == []  # the second load of the asset in this process hashes nothing
    other = "f" * 40
    with pytest.raises(UserError, match=f"prefetched into .* at revision {PIN}, but the tier pins {other}; prefetch it again"):
        hubmod.resolve(MINILM, "model", "hubtest", other)


def test_online_model_load_reads_the_pinned_commit(tmp_path, minilm_path):
    """Without a prefetched copy, a pinned model is read from the hub cache's snapshot of that commit, never main."""
    repo = tmp_path / "repo"
    shutil.copytree(minilm_path, repo)
    (repo / "onnx").mkdir(exist_ok=True)
    (repo / "onnx" / "model.onnx").write_bytes(b"weights for another framework")
    code = f"from plmclaims import hub; print(hub.resolve({MINILM!r}, 'model', 'hubtest', {PIN!r}))"
    with FakeHub({("model", MINILM): repo}) as hub:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                             env=_env(tmp_path, HF_ENDPOINT=hub.url, PLMCLAIMS_HUB_DIR=str(tmp_path / "no-prefetch")))
    assert res.returncode == 0, res.stderr[-2000:]
    snapshot = Path(res.stdout.strip().splitlines()[-1])
    assert snapshot.parent.name == "snapshots" and snapshot.name == PIN
    assert (snapshot / "model.safetensors").is_file() and not (snapshot / "onnx").exists()
    assert any(PIN in r for r in hub.requests) and not any("/main" in r for r in hub.requests)
