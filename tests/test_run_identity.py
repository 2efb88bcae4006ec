"""Run identity in the workflow: an edit reruns exactly what it changes (read from `snakemake -n`'s job table),
the long pole is scheduled first, and values with spaces or shell syntax reach the CLI as data, never as code."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from plmclaims import batching, plan as P
from plmclaims.families.sts.plan import score_run
from plmclaims.claims import load_claims
from plmclaims.tiers import load_tier

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _snakemake(repo: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "--directory", str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env={**os.environ, **OFFLINE}, timeout=600)


def _planned_jobs(repo: Path, workdir: Path, config: list[str]) -> Counter:
    """rule -> job count from a dry run's 'Job stats' table (empty when nothing is to be done); a batch of short runs
    (rule <name>_batch_<upstream key>_<n>: common.smk) counts under <name>_batch."""
    res = _snakemake(repo, workdir, "-n", *config)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout + res.stderr
    if "Nothing to be done" in out:
        return Counter()
    table = out.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    rows = (re.fullmatch(r"(\w+)\s+(\d+)", line.strip()) for line in table.splitlines())
    jobs = Counter()
    for m in rows:
        if m and m[1] != "total":
            jobs[re.sub(r"_batch_\w+$", "_batch", m[1])] += int(m[2])
    return jobs


def _with(config: list[str], **values: str) -> list[str]:
    keep = [c for c in config if c.split("=", 1)[0] not in values]
    return keep + [f"{k}={v}" for k, v in values.items()]


def test_budget_edit_reruns_exactly_the_runs_it_affects(tiny_run, repo, tmp_path):
    work, config = tiny_run
    tier_file = tmp_path / "tiny-edited.yaml"
    data = yaml.safe_load((repo / "workflows" / "tiers" / "tiny.yaml").read_text())
    data["finetune"]["budget"]["max_train"] += 8  # `name: tiny` stays: same results folder
    tier_file.write_text(yaml.safe_dump(data))
    # what the plan says changes: every fine-tuning run and every run that reads fine-tuned weights, nothing else
    claims = load_claims(repo / "replications")
    old, new = (P.plan_all(claims, load_tier(t)) for t in ("tiny", str(tier_file)))
    before = set(P.all_runs(r for p in old for r in p.score_runs()))
    changed = [r for r in P.all_runs(r for p in new for r in p.score_runs()).values() if r.key not in before]
    assert {r.kind for r in changed} == {"finetune", "finetuned", "cka", "cka-layer", "compress-glue"}
    keys = {r.key for r in changed}
    users = {p.claim.slug for p in new if keys & set(P.all_runs(p.score_runs()))}
    assert users == {"peft--lora-matches-finetuning", "peft--adapters-match-finetuning",
                     "peft--prompt-tuning-gap-closes-with-scale", "compression--seed-variance",
                     "intrinsic--finetuning-changes-top-layers", "compression--heads-can-be-masked-glue",
                     "compression--magnitude-pruning-glue", "compression--int8-costs-little-glue"}
    jobs = _planned_jobs(repo, work, _with(config, tier=str(tier_file)))
    # run kind -> its rule's name; the short rules run in batches, one job per batch (plmclaims.batching)
    rules = Counter(r.kind.replace("-", "_") for r in changed if r.kind not in batching.BATCHED_KINDS)
    rules.update({f"{k.replace('-', '_')}_batch": len(batching.batches(changed, k)) for k in batching.BATCHED_KINDS
                  if any(r.kind == k for r in changed)})
    assert jobs == Counter({**rules, "verdict": len(users), "report": 1, "all": 1})


def test_tolerance_edit_reruns_only_that_verdict_and_the_report(tiny_run, repo, tmp_path):
    work, config = tiny_run
    claims = tmp_path / "claims"
    shutil.copytree(repo / "replications", claims)
    path = claims / "sts" / "glove-avg-beats-bert-avg.yaml"
    data = yaml.safe_load(path.read_text())
    data["tolerance"] = float(data.get("tolerance", 1.0)) + 0.5
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    jobs = _planned_jobs(repo, work, _with(config, claims_dir=str(claims)))
    assert jobs == Counter({"verdict": 1, "report": 1, "all": 1})
    # the unedited copy of the claims folder alone reruns nothing
    shutil.copytree(repo / "replications", tmp_path / "same")
    assert _planned_jobs(repo, work, _with(config, claims_dir=str(tmp_path / "same"))) == Counter()


def test_long_pole_chain_is_scheduled_first(repo, data_root, tmp_path):
    """--touch walks the scheduler (priorities included) without computing: corpus, tokenizers, pre-training first."""
    res = _snakemake(repo, tmp_path, "--touch", "--cores", "1", "--config", "tier=tiny", f"data_root={data_root}",
                     f"claims_dir={repo / 'replications'}")
    assert res.returncode == 0, res.stderr[-3000:]
    order = re.findall(r"^(?:local)?rule (\w+):", res.stdout + res.stderr, flags=re.M)
    chain = {"corpus", "tokenizer", "pretrain"}
    n = sum(1 for r in order if r in chain)
    assert n == 5 and order[0] == "corpus" and set(order[:n]) == chain, order[:10]


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["my data", "data$(touch INJECTED)"])
def test_values_reach_the_shell_quoted(repo, data_root, tmp_path, folder):
    """A data root and results folder with a space or shell syntax run one real job; nothing is executed from them."""
    work = tmp_path / "work dir"
    work.mkdir()
    (tmp_path / folder).symlink_to(data_root)
    tier = load_tier("tiny")
    run = score_run(tier, "senteval", "lexical", "tokenised", "bow-cosine")
    results = tmp_path / "my results $(touch INJECTED)"
    target = run.path(f"{results}/tiny")
    config = ["--config", "tier=tiny", f"data_root={tmp_path / folder}", f"results={results}",
              f"claims_dir={repo / 'replications'}"]
    res = _snakemake(repo, work, "--cores", "1", target, *config)
    assert res.returncode == 0, res.stderr[-3000:]
    assert Path(target).is_file()
    assert not list(tmp_path.rglob("INJECTED")), "a value was run as a shell command"


def test_missing_data_root_stops_a_dry_run(repo, tmp_path):
    res = _snakemake(repo, tmp_path, "-n", "--config", "tier=tiny", "data_root=data$(touch INJECTED)",
                     f"claims_dir={repo / 'replications'}")
    assert res.returncode == 2
    assert re.search(r"^plmclaims: error: data_root .*folder not found", res.stderr, flags=re.M), res.stderr[-2000:]
    assert "Traceback" not in res.stderr and not list(tmp_path.rglob("INJECTED"))
