"""Reading failed jobs from a real Snakemake log, as the workflow's onerror handler does."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FAILING_CLAIMS, run_snakemake
from plmclaims.failures import Failure, attribute, failed_jobs

SNAKEFILE = """
rule all:
    input: "runs/a/metrics.json", "runs/b/metrics.json", "runs/c/metrics.json"
rule a:
    output: "runs/a/metrics.json"
    log: "logs/a.log"
    shell: "echo boom > {log}; exit 3"
rule b:
    output: "runs/b/metrics.json"
    shell: "echo ok > {output}"
rule c:
    output: "runs/c/metrics.json"
    shell: "exit 1"
"""


def test_failed_jobs_read_from_a_keep_going_log(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--keep-going"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode != 0
    logs = sorted((tmp_path / ".snakemake" / "log").glob("*.snakemake.log"))
    failures = failed_jobs(logs)
    assert {f.rule for f in failures} == {"a", "c"}
    a = next(f for f in failures if f.rule == "a")
    assert a.outputs == ("runs/a/metrics.json",) and a.logs == ("logs/a.log",)
    assert "rule a failed; log: logs/a.log" == a.describe()
    c = next(f for f in failures if f.rule == "c")
    assert c.logs == () and "no log file" in c.describe()


def test_attribute_prefers_the_job_that_was_to_write_a_needed_file(tmp_path):
    a = Failure("finetune", (str(tmp_path / "runs/x/metrics.json"),), ("logs/x.log",))
    p = Failure("pretrain", (str(tmp_path / "models/m/metrics.json"),), ("logs/p.log",))
    assert attribute([str(tmp_path / "runs/x/metrics.json")], [p, a]) == [a]
    # an upstream run the claim reads (pre-training) is named when it is among the needed files
    assert attribute([str(tmp_path / "runs/y/metrics.json"), str(tmp_path / "models/m/metrics.json")], [p, a]) == [p]
    # nothing this claim reads failed: it was left undone when the workflow stopped elsewhere
    assert attribute([str(tmp_path / "runs/y/metrics.json")], [p, a]) == []
    assert failed_jobs([tmp_path / "missing.log"]) == []


@pytest.mark.slow
def test_keep_going_writes_the_report_with_an_error_row(failed_run, repo, data_root):
    """A failed run (conftest.failed_run): the report still lists every claim; the failed one says `error` with the
    failing rule and log."""
    work, root, res, _ = failed_run
    claims = FAILING_CLAIMS
    assert res.returncode != 0
    assert "despite failures: 1 of 2 claims are 'error'" in res.stderr, res.stderr[-3000:]
    # the terminal's closing lines: the counts, a line per claim (the failed one names its rule and log), the report
    tail = res.stderr[res.stderr.index("plmclaims: 2 claims: "):].splitlines()
    assert tail[0] == "plmclaims: 2 claims: 1 not-run, 1 error"
    assert [line.split()[:2] for line in tail[1:3]] == [["sts/released-simcse-reproduces", "not-run"],
                                                        ["sts/released-checkpoint-reproduces", "error"]]
    assert "failed (log: " in tail[2] and tail[3].startswith("plmclaims: report: results/tiny/claims.md")
    verdicts = {v["id"]: v for v in json.loads((work / "results" / "tiny" / "claims.json").read_text())}
    assert set(verdicts) == set(claims)
    assert verdicts["sts/released-simcse-reproduces"]["verdict"] == "not-run"
    failed = verdicts["sts/released-checkpoint-reproduces"]
    assert failed["verdict"] == "error"
    assert "rule encode failed (log: " in failed["note"] or "rule score failed (log: " in failed["note"], failed["note"]
    # the job's log first (through SLURM, the job's SLURM log follows it)
    log = failed["note"].split("(log: ")[1].split(")")[0].split(", ")[0]
    assert "STS.input.MSRpar.txt" in (work / log).read_text()  # the log names the bad file
    md = (work / "results" / "tiny" / "claims.md").read_text()
    assert "`sts/released-checkpoint-reproduces`" in md and "error" in md
    # the missing verdict is not taken as done: a rerun with the same settings plans it (and the report) again, ...
    res = run_snakemake(repo, work, "-n", "--config", "tier=tiny", f"data_root={root}", f"claims_dir={repo / 'replications'}",
                        f"claims={json.dumps(claims)}", "allow_unverified_data=true")
    assert res.returncode == 0 and "verdict" in res.stdout and "report" in res.stdout, res.stdout[-2000:]
    # ... and so does one on good data
    res = run_snakemake(repo, work, "-n", "--config", "tier=tiny", f"data_root={data_root}", f"claims_dir={repo / 'replications'}",
                        f"claims={json.dumps(claims)}")
    assert res.returncode == 0 and "verdict" in res.stdout and "report" in res.stdout, res.stderr[-2000:]
