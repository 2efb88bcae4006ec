# Load and validate claims and the tier before any compute, and expand the runs they need.
# A malformed file stops here with one line naming the file, the field and the allowed values.
import json
import os
import shlex
import sys

from plmclaims import hub
from plmclaims import plan as P
from plmclaims.assets import needed_assets
from plmclaims.claims import load_claims
from plmclaims.errors import UserError
from plmclaims.schema import validate
from plmclaims.tiers import load_tier

try:
    validate(config, "config", "config (config/config.yaml + --config)")
    TIER = load_tier(config["tier"])
    CLAIMS = load_claims(config["claims_dir"], config.get("claims") or None)
except UserError as err:
    sys.stderr.write(f"plmclaims: error: {err}\n")
    sys.exit(2)

PLANS = {p.claim.slug: p for p in P.plan_all(CLAIMS, TIER)}
# prefetched hub assets live beside the other resources; jobs inherit this (sbatch exports the environment)
os.environ.setdefault("PLMCLAIMS_HUB_DIR", f"{config['resources']}/hub")
try:  # air-gapped: with HF_HUB_OFFLINE=1 a never-prefetched asset stops the workflow before any compute
    hub.check_offline(needed_assets(PLANS.values(), TIER), TIER["name"])
except UserError as err:
    # a dry run still prints the DAG, and says what a real run would lack (the executor is not set up yet here,
    # so the flag is read from the command line)
    dry = workflow.dryrun or any(a in ("--dry-run", "--dryrun") or (a[:1] == "-" and a[1:2] != "-" and "n" in a)
                                 for a in sys.argv[1:])
    if not dry:
        sys.stderr.write(f"plmclaims: error: {err}\n")
        sys.exit(2)
    sys.stderr.write(f"plmclaims: warning: {err}\n")
# a package asset that is not installed (SmolLM2 installs with --no-deps, outside the extras) stops here, not mid-run
from plmclaims.tiers import missing_packages

_missing = missing_packages(TIER, {r.instance.partition(".")[0] for p in PLANS.values() for r in p.score_runs()})
if _missing:
    sys.stderr.write("".join(f"plmclaims: error: {line}\n" for line in _missing))
    sys.exit(2)
TIER_ARG = TIER["_path"]  # the CLI reloads the same tier file inside each job
R = f"{config['results']}/{TIER['name']}"
RES = f"{config['resources']}/{TIER['name']}"
DATA_ROOT = config["data_root"]
THREADS = int(config.get("threads_per_job", 1))
# jobs call the CLI through this interpreter, so the workflow runs from a venv without activating it
CLI = f"{sys.executable} -m plmclaims.cli"
SLURM_PARTITION = config.get("slurm_partition") or os.environ.get("PLMCLAIMS_SLURM_PARTITION", "")
SLURM_ACCOUNT = config.get("slurm_account") or os.environ.get("PLMCLAIMS_SLURM_ACCOUNT", "")
REPORT_FILES = [f"{R}/claims.md", f"{R}/claims.csv", f"{R}/claims.json", f"{R}/figures/forest.png",
                f"{R}/figures/quality-vs-params.png"]
# (run kind, method, params key) -> hyper-parameters, for the rules that train
TRAIN_PARAMS = P.training_params(list(PLANS.values()), TIER)
# the tasks the lm-eval task folder must hold: every task of every lm-tasks claim
LM_TASKS = sorted({b for p in PLANS.values() if p.claim.protocol["family"] == "lm-tasks" for b in p.claim.protocol["benchmarks"]})

wildcard_constraints:
    asset=r"[a-z0-9-]+",
    seed=r"\d+",
    instance=r"[a-z0-9.-]+",
    evaluator=r"senteval|mteb",
    form=r"raw|tokenised",
    method=r"[a-z0-9-]+",
    post=r"[a-z0-9-]+",
    slug=r"[a-z0-9-]+",
    pkey=r"[a-z0-9]+",
    task=r"[A-Za-z0-9-]+",



def rule_resources(rule):
    """Resources for `rule` from the tier's budget; memory and time grow with each retry attempt."""
    table = TIER.get("resources", {})
    spec = {"runtime": 30, "mem_mb": 2000, **table.get("default", {}), **table.get(rule, {})}
    res = {
        "mem_mb": lambda wc, attempt, base=int(spec["mem_mb"]): base * attempt,
        "runtime": lambda wc, attempt, base=int(spec["runtime"]): base * attempt,
    }
    for key in ("gpu", "gpu_model", "cpus_per_gpu"):
        if spec.get(key):
            res[key] = spec[key]
    if SLURM_PARTITION:  # never hard-coded: from --config slurm_partition=... or the environment
        res["slurm_partition"] = SLURM_PARTITION
    if SLURM_ACCOUNT:
        res["slurm_account"] = SLURM_ACCOUNT
    return res
