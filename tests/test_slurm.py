"""The tiny workflow through the slurm profile, against a real single-node SLURM cluster (no mock).

`.ci/run` starts the cluster with `.ci/slurm-up.sh` and sets PLMCLAIMS_REQUIRE_SLURM=1, so in CI a
missing cluster fails the test; elsewhere the test is skipped unless `sinfo` answers.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

REQUIRE = os.environ.get("PLMCLAIMS_REQUIRE_SLURM") == "1"
SLURM_FLAGS = ["--slurm-no-account", "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5"]


def _jobs() -> dict[str, tuple[str, str]]:
    """Every job slurmctld still remembers (MinJobAge=3600 in .ci/slurm-up.sh: the whole tiny run must stay visible): id -> (state, comment)."""
    out = subprocess.run(["squeue", "-t", "all", "-h", "-o", "%i|%T|%k"], capture_output=True, text=True, check=True).stdout
    return {i: (state, comment) for i, state, comment in (line.split("|", 2) for line in out.splitlines() if line)}


@pytest.fixture(scope="module")
def cluster():
    ok = shutil.which("sinfo") is not None
    if ok:
        res = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
        ok = res.returncode == 0 and any(s in res.stdout for s in ("idle", "mixed", "allocated"))
    if not ok:
        if REQUIRE:
            pytest.fail("PLMCLAIMS_REQUIRE_SLURM=1 but no SLURM cluster answers sinfo; run bash .ci/slurm-up.sh as root")
        pytest.skip("no SLURM cluster here (bash .ci/slurm-up.sh starts one, as root)")


def _snakemake(repo, work, *args):
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "--directory", str(work),
           "--profile", str(repo / "workflows" / "profiles" / "slurm"), *SLURM_FLAGS, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800)


def test_tiny_workflow_runs_under_slurm(cluster, repo, data_root, tmp_path):
    before = set(_jobs())
    # the STS family plus one claim per other rule set (finetune; lm_model, lm_tasks, lm_train, lm_eval; compress;
    # probe_encode, probe): every rule goes through sbatch, without repeating each family's other jobs
    claims = [p.relative_to(repo / "replications").with_suffix("").as_posix() for p in sorted((repo / "replications" / "sts").glob("*.yaml"))]
    claims += ["peft/lora-matches-finetuning", "peft/prefix-tuning-matches-finetuning", "compression/int8-costs-little",
               "probing/structural-probe-middle-layers"]
    res = _snakemake(repo, tmp_path, "--config", "tier=tiny", f"data_root={data_root}", f"claims_dir={repo / 'replications'}",
                     f"claims={json.dumps(claims)}")
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "results" / "tiny" / "claims.md").exists()
    new = {i: v for i, v in _jobs().items() if i not in before}
    comments = [c for _, c in new.values()]
    # every job of the DAG went through sbatch and completed there
    assert any(c.startswith("rule_pretrain") for c in comments)
    assert any(c.startswith("rule_verdict") for c in comments)
    assert any(c == "rule_report" for c in comments)
    for rule in ("finetune", "lm_model", "lm_tasks", "lm_train", "lm_eval", "compress", "probe_encode", "probe"):
        assert any(c.startswith(f"rule_{rule}") for c in comments), rule
    assert len(new) >= 20 and all(state == "COMPLETED" for state, _ in new.values()), new


def test_failing_rule_is_reported_failed(cluster, repo, tmp_path, broken_data_root):
    """A job that fails inside SLURM (a malformed data row, let through planning by allow_unverified_data)."""
    before = set(_jobs())
    root = broken_data_root(tmp_path)
    res = _snakemake(repo, tmp_path, "--retries", "0", "--config", "tier=tiny", f"data_root={root}", "allow_unverified_data=true",
                     f"claims_dir={repo / 'replications'}", 'claims=["sts/released-checkpoint-reproduces"]')
    assert res.returncode != 0
    assert "Error in rule encode" in res.stdout + res.stderr
    new = {i: v for i, v in _jobs().items() if i not in before}
    assert [state for state, comment in new.values() if comment.startswith("rule_encode")] == ["FAILED"], new
