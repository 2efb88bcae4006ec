"""Integration: the whole Snakemake workflow on the tiny budget, the report it writes, and its dry runs."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def _run(repo: Path, workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = SNAKEMAKE + ["--snakefile", str(repo / "Snakefile"), "--directory", str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env={**os.environ, **(env or {})}, timeout=1800)


def test_report_lists_every_claim_with_a_verdict(tiny_run, repo):
    work, _ = tiny_run
    md = (work / "results" / "tiny" / "claims.md").read_text()
    claims = sorted(p.relative_to(repo / "replications").with_suffix("").as_posix() for p in (repo / "replications").glob("*/*.yaml"))
    for cid in claims:
        assert f"`{cid}`" in md
    assert "**What a verdict at this tier can and cannot say.**" in md
    verdicts = json.loads((work / "results" / "tiny" / "claims.json").read_text())
    assert sorted(v["id"] for v in verdicts) == claims
    allowed = {"reproduced", "direction-holds", "not-reproduced", "inconclusive", "shown", "not-run", "error"}
    for v in verdicts:
        assert {"id", "seed_point", "tier", "verdict", "measurements"} <= set(v)
        assert v["verdict"] in allowed and v["verdict"] != "error"
        for m in v["measurements"].values():
            assert {"reported", "measured", "ci_low", "ci_high"} <= set(m)
    simcse = next(v for v in verdicts if v["id"] == "sts/released-simcse-reproduces")
    assert simcse["verdict"] == "not-run" and "SimCSE" in simcse["note"]
    glove = next(v for v in verdicts if v["id"] == "sts/glove-avg-beats-bert-avg")
    assert glove["measurements"]["bert_avg"]["random_weights"]["measured"] is not None
    assert set(glove["controls"]) == {"bow", "tfidf"}
    csv_lines = (work / "results" / "tiny" / "claims.csv").read_text().splitlines()
    assert csv_lines[0].startswith("claim,seed_point,tier,verdict")
    # one row per (model, measurement): a claim measured on several models has each model's rows, a baseline they
    # share once (report.common.all_measurements)
    from plmclaims.report.common import all_measurements

    assert len(csv_lines) == 1 + sum(len(all_measurements(v)) for v in verdicts)
    several = [v for v in verdicts if len(v.get("models") or {}) > 1]
    assert several and {"model", "model_verdict"} <= set(csv_lines[0].split(","))
    assert sum(len(all_measurements(v)) for v in several) > sum(len(v["measurements"]) for v in several)
    assert (work / "results" / "tiny" / "figures" / "forest.png").read_bytes()[:4] == b"\x89PNG"


def test_every_run_carries_provenance(tiny_run):
    work, _ = tiny_run
    runs = list((work / "results" / "tiny" / "runs").rglob("metrics.json")) + list((work / "resources" / "tiny").rglob("metrics.json"))
    assert len(runs) >= 10
    for path in runs:
        prov = json.loads(path.read_text())["provenance"]
        assert {"git_commit", "packages", "config_hash", "data_sha256", "seed", "device", "wall_time_s"} <= set(prov)
        assert prov["packages"]["torch"] and prov["packages"]["mteb"]
    score = next(p for p in runs if "/score/senteval/" in str(p))
    assert json.loads(score.read_text())["provenance"]["data_sha256"]


def test_second_run_has_nothing_to_do(tiny_run, repo):
    work, config = tiny_run
    res = _run(repo, work, "--cores", "2", *config)
    assert res.returncode == 0
    assert "Nothing to be done" in res.stdout + res.stderr


def test_snakemake_report_html(tiny_run, repo):
    work, config = tiny_run
    res = _run(repo, work, "--report", "report.html", *config)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (work / "report.html").stat().st_size > 10_000


def test_malformed_claim_stops_before_compute(tmp_path, repo, data_root):
    claims = tmp_path / "claims" / "sts"
    claims.mkdir(parents=True)
    data = yaml.safe_load((repo / "replications" / "sts" / "glove-avg-beats-bert-avg.yaml").read_text())
    data["protocol"]["aggregation"] = "median"
    (claims / "glove-avg-beats-bert-avg.yaml").write_text(yaml.safe_dump(data))
    res = _run(repo, tmp_path, "-n", "--config", f"claims_dir={tmp_path / 'claims'}", f"data_root={data_root}")
    assert res.returncode != 0
    err = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(err) == 1, res.stderr
    assert "field 'protocol.aggregation'" in err[0] and "allowed values: all, wmean, mean" in err[0]
    assert not (tmp_path / "results").exists()


def test_paper_tier_dry_run_needs_no_network(tmp_path, repo, data_root):
    res = _run(repo, tmp_path, "-n", "--config", "tier=paper", f"data_root={data_root}", f"claims_dir={repo / 'replications'}",
               env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    assert "bert-base-uncased" in out and "glove-840b-300d" in out and "unsup-simcse-bert-base" in out
    assert "rule report" in out or "report" in out
    stats = out.split("Job stats")[1].split("\n\n")[0]  # the job table: one "<rule> <count>" line per rule
    assert "finetune" in stats and not re.search(r"^pretrain\s+\d+$", stats, re.M)  # the paper tier pre-trains nothing


def test_peft_family_runs_offline_with_parameter_counts(tiny_run):
    """Fine-tuning runs and the lm-eval runs of the language-model variant, inside the workflow, with HF offline."""
    work, _ = tiny_run
    res = work / "results" / "tiny"
    verdicts = {v["id"]: v for v in json.loads((res / "claims.json").read_text())}
    for cid in ("peft/lora-matches-finetuning", "peft/adapters-match-finetuning", "peft/prefix-tuning-matches-finetuning"):
        v = verdicts[cid]
        ratio = next(c for c in v["checks"] if c["type"] == "ratio")
        assert ratio["outcome"] in ("holds", "contradicted") and ratio["details"][0]["estimate"] > 0
        ms = [m for m in v["measurements"].values() if m["method"] != "zero-shot"]
        for m in ms:
            assert 0 < m["trained_params"] <= m["total_params"] and m["peak_memory_mb"] > 0
    prefix = verdicts["peft/prefix-tuning-matches-finetuning"]["measurements"]
    assert prefix["zero_shot"]["trained_params"] == 0 and prefix["prefix"]["trained_fraction"] < prefix["full_ft"]["trained_fraction"]
    every_lm_run = sorted((res / "runs" / "lm").rglob("metrics.json"))
    lm_runs = [p for p in every_lm_run if p.relative_to(res / "runs" / "lm").parts[2] in ("SST-2", "RTE")]
    assert len(lm_runs) == 2 * 3  # SST-2 and RTE: zero-shot, prefix tuning, full fine-tuning (1 seed at this tier)
    # the others are compression/seed-variance's causal-LM seeds: full fine-tuning on its GLUE task
    assert {p.relative_to(res / "runs" / "lm").parts[1:3] for p in every_lm_run if p not in lm_runs} == {
        ("full-finetuning", "MRPC")}
    for path in lm_runs:
        values = json.loads(path.read_text())["values"]
        (task, row), = values["benchmarks"].items()
        assert row["accuracy"] == pytest.approx(100 * row["lm_eval_acc"]) and row["examples"] == 24
    task_runs = sorted((res / "runs" / "lm-tasks").rglob("tasks.json"))
    # one lm-eval task folder per task: SST-2 and RTE, and MRPC for seed-variance's causal-LM runs
    assert sorted(p.relative_to(res / "runs" / "lm-tasks").parts[0] for p in task_runs) == ["MRPC", "RTE", "SST-2"]
    for path in task_runs:
        tasks = json.loads(path.read_text())
        assert any("glue" in f for f in tasks["provenance"]["data_sha256"])  # generated from the local GLUE files
    md = (res / "claims.md").read_text()
    assert "trained / total params" in md
    assert (res / "figures" / "quality-vs-params.png").read_bytes()[:4] == b"\x89PNG"
