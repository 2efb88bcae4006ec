"""A fresh clone's main job computes: the committed report lives in docs/results/, outside the workflow's results/,
so `snakemake -n` in a clone plans the tier's jobs instead of finding every output present ("Nothing to be done").
Runs on what is committed (a clone has no uncommitted change)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from plmclaims.claims import load_claims


def test_a_fresh_clone_plans_the_main_job(repo, data_root, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(repo), str(clone)], check=True)
    assert (clone / "docs" / "results" / "micro" / "claims.md").is_file()  # the published report comes with it
    assert not (clone / "results").exists()
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}  # the clone's code, not this checkout's
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--cores", "2", "--config",
                          "tier=micro", f"data_root={data_root}"], cwd=clone, env=env, capture_output=True, text=True)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "Nothing to be done" not in out
    stats = dict(re.findall(r"^([a-z_]+)\s+(\d+)$", out.split("Job stats:")[1], re.M))
    claims = load_claims(clone / "replications")
    assert stats["all"] == "1" and stats["report"] == "1" and int(stats["verdict"]) == len(claims), stats
    assert {"pretrain", "gguf", "score", "finetune", "probe_encode"} <= set(stats)
    assert int(stats["total"]) > 3 * len(claims)
