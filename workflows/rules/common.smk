# Load and validate claims and the tier before any compute, plan the runs they need, and check the data those runs
# read. A malformed file, a missing data root or a changed data file stops here with one line (dry runs included).
# Every path and every spec a rule uses comes from plmclaims.plan; every value that reaches a shell is quoted.
import json
import os
import shlex
import sys

from plmclaims import batching, checkpoint, families, hub
from plmclaims import plan as P
from plmclaims.assets import needed_assets
from plmclaims.claims import load_claims
from plmclaims.data import verify
from plmclaims.errors import UserError
from plmclaims.schema import validate
from plmclaims.tiers import load_tier, missing_packages

# Snakemake sets its output settings before it parses the Snakefile, so a dry run is known here (-n, -qn, --dry-run)
DRY_RUN = bool(workflow.output_settings is not None and workflow.output_settings.dryrun)


def stop(lines):
    sys.stderr.write("".join(f"plmclaims: error: {line}\n" for line in lines))
    sys.exit(2)


try:
    validate(config, "config", "config (config/config.yaml + --config)")
    TIER = load_tier(config["tier"])
    CLAIMS = load_claims(config["claims_dir"], config.get("claims") or None)
    PLANS = {p.claim.slug: p for p in P.plan_all(CLAIMS, TIER)}
    R = f"{config['results']}/{TIER['name']}"
    RES = f"{config['resources']}/{TIER['name']}"
    ROOTS = {"results": R, "resources": RES}
    DATA_ROOT = config["data_root"]
    # key -> planned run, for the runs the verdicts read and every run upstream of them; rules look runs up by {key}
    RUNS = P.all_runs(r for p in PLANS.values() for r in p.score_runs())
    DATA = {key: P.data_files(run, TIER, DATA_ROOT) for key, run in RUNS.items()}  # inputs of the rules that read data
    _files = sorted({f for files in DATA.values() for f in files})
    if _files:
        verify.check_data_root(DATA_ROOT, TIER, _files)
        for line in verify.verify_files(_files, DATA_ROOT, verify.allow_unverified(config)):
            sys.stderr.write(f"plmclaims: warning: {line}\n")
except UserError as err:
    stop([err])

# prefetched hub assets live beside the other resources; jobs inherit this (sbatch exports the environment)
os.environ.setdefault("PLMCLAIMS_HUB_DIR", f"{config['resources']}/hub")
# where training jobs keep their resume state and how often they write it (the tier's checkpoint section): handed
# through the environment, never a run's spec, so the interval moves no key and reruns no finished job
os.environ[checkpoint.ENV] = checkpoint.workflow_settings(TIER, os.path.abspath(f"{RES}/checkpoints"))
try:  # air-gapped: with HF_HUB_OFFLINE=1 a never-prefetched asset stops the workflow before any compute
    hub.check_offline(needed_assets(PLANS.values(), TIER), TIER["name"])
except UserError as err:
    if not DRY_RUN:  # a dry run still prints the DAG, and says what a real run would lack
        stop([err])
    sys.stderr.write(f"plmclaims: warning: {err}\n")
# a package asset that is not installed (SmolLM2 installs with --no-deps, outside the extras) stops here, not mid-run
_missing = missing_packages(TIER, {r.instance.partition(".")[0] for p in PLANS.values() for r in p.score_runs()})
if _missing:
    stop(_missing)

THREADS = int(config.get("threads_per_job", 1))
# jobs call the rule commands (`plmclaims rule <name>`) through this interpreter, so the workflow runs from a venv
# without activating it; a rule's shell line is "{CLI} <name> ..."
CLI = f"{shlex.quote(sys.executable)} -m plmclaims.cli rule"
# quoted once here: these reach shell commands as they are (rule values use Snakemake's {...:q})
TIER_Q, DATA_Q, R_Q, RES_Q, CLAIMS_Q = map(shlex.quote, (TIER["_path"], DATA_ROOT, R, RES, config["claims_dir"]))
SLURM_PARTITION = config.get("slurm_partition") or os.environ.get("PLMCLAIMS_SLURM_PARTITION", "")
SLURM_ACCOUNT = config.get("slurm_account") or os.environ.get("PLMCLAIMS_SLURM_ACCOUNT", "")
SLURM_SIGNAL_LEAD = int(config.get("slurm_signal_lead", 300))
REPORT_FILES = [f"{R}/claims.md", f"{R}/claims.csv", f"{R}/claims.json", f"{R}/provenance.json", f"{R}/figures/forest.png",
                f"{R}/figures/quality-vs-params.png", f"{R}/figures/curves.png", f"{R}/figures/contrastive-training.png"]
# The long pole (pre-training, 20 minutes at the micro tier) waits for the corpus and the tokenizer. A priority
# does not reach a job's upstream jobs, so the whole chain carries it: otherwise dozens of cheap jobs run first.
LONG_POLE = 10
LAYOUT = P.LAYOUTS
FAMILY_RULES = families.rules_files()

wildcard_constraints:
    asset=r"[a-z0-9-]+",
    seed=r"\d+",
    instance=r"[a-z0-9.-]+",
    evaluator=r"senteval|mteb",
    form=r"raw|tokenised",
    method=r"[a-z0-9-]+",
    post=r"[a-z0-9-]+",
    slug=r"[a-z0-9-]+",
    key=P.KEY_PATTERN,
    task=r"[A-Za-z0-9-]+",


def planned(wc, output=None):
    """The planned run behind a rule's {key}."""
    return P.lookup(RUNS, wc.key, output[0] if output else wc.key)


def path_of(run):
    return run.path(ROOTS[run.layout().base])


def spec_of(wc, output):
    """The run's spec for the CLI: exactly what its key was hashed from (plus the tier's name and file)."""
    return planned(wc, output).to_json(TIER)


def upstream(kind):
    """An input function: the main file of the run's upstream run of `kind` (none when it has none)."""
    return lambda wc: [path_of(u) for u in planned(wc).upstream if u.kind == kind]


def data_of(wc):
    """The data files the run reads: inputs, so changed data reruns exactly what reads it."""
    return DATA[planned(wc).key]


def batches(kind):
    """(name, runs) for each batch of the planned runs of `kind`: one job per batch (plmclaims.batching)."""
    return batching.batches(RUNS.values(), kind)


def batch_outputs(runs, *extra):
    """Each run's main file and the other files it writes beside it."""
    return [f for r in runs for f in (path_of(r), *(f"{r.dir(ROOTS[r.layout().base])}/{x}" for x in extra))]


def batch_runs(runs):
    """`plmclaims batch --runs`: each run's spec and main output."""
    return json.dumps([[r.to_json(TIER), path_of(r)] for r in runs], separators=(",", ":"))


def batch_log(kind, name):
    return f"{R}/logs/batches/{kind}/{name}.log"


def rule_resources(rule):
    """Resources for `rule` from the tier's budget; memory and time grow with each retry attempt; under SLURM, a
    SIGTERM ahead of the time limit (checkpoint.slurm_signal)."""
    table = TIER.get("resources", {})
    spec = {"runtime": 30, "mem_mb": 2000, **table.get("default", {}), **table.get(rule, {})}
    res = {
        "mem_mb": lambda wc, attempt, base=int(spec["mem_mb"]): base * attempt,
        "runtime": lambda wc, attempt, base=int(spec["runtime"]): base * attempt,
        "slurm_extra": lambda wc, attempt, base=int(spec["runtime"]): checkpoint.slurm_signal(base * attempt,
                                                                                              SLURM_SIGNAL_LEAD),
    }
    for key in ("gpu", "gpu_model", "cpus_per_gpu"):
        if spec.get(key):
            res[key] = spec[key]
    if SLURM_PARTITION:  # never hard-coded: from --config slurm_partition=... or the environment
        res["slurm_partition"] = SLURM_PARTITION
    if SLURM_ACCOUNT:
        res["slurm_account"] = SLURM_ACCOUNT
    return res
