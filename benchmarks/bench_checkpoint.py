"""The cost of resume state (plmclaims.checkpoint) on a tier's longest training runs, side by side.

For each kind asked for (default: contrastive, finetune, lm), the tier's costliest planned run of that kind (as
`plmclaims plan` prices it: costs.run_cost) runs through its rule command (`python -m plmclaims.cli rule <command>`, as
a workflow job), once with no resume state and once with the tier's checkpoint interval (or --every-steps /
--every-minutes), alternating which goes first on each repeat. Printed per run: both wall times and their ratio, the
saves made, the seconds per save and the size of one state. The two runs' outputs are compared too: checkpointing
must change no byte of metrics.json's values or of predictions.npz. The runs' upstream assets (a tokenizer, a
dequantised LM, a pre-trained micro-BERT) are built first by the workflow itself, under --workdir (default: this
checkout, so the workflow reuses them). Read the ratio, measured in one sitting, rather than the absolute times.

    python benchmarks/bench_checkpoint.py --data-root ../shared/data [--tier micro] [--kinds contrastive finetune lm]
        [--repeats 1] [--threads 1] [--every-steps N | --every-minutes M] [--workdir .]
    python benchmarks/bench_checkpoint.py --smallest    # the tiny tier's fine-tuning, in seconds (the smoke test)
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = {"contrastive": "contrastive", "finetune": "finetune", "finetuned": "finetuned", "lm": "lm-train",
            "transfer": "transfer", "compress": "compress", "pretrain": "pretrain"}
VOLATILE = {"wall_time_s", "startup_s", "finished_at", "train_wall_s", "steps_per_second", "peak_memory_mb", "out_dir"}

# the rule command, with each save timed and measured (appended to $BENCH_SAVES as JSON lines)
TIMED = """
import json, os, sys, time
from plmclaims import checkpoint
save = checkpoint.Resume.save
def timed(self, step, loop=None):
    t0 = time.perf_counter()
    path = save(self, step, loop)
    size = sum(f.stat().st_size for f in path.iterdir())
    with open(os.environ["BENCH_SAVES"], "a") as f:
        f.write(json.dumps({"step": step, "seconds": time.perf_counter() - t0, "bytes": size}) + "\\n")
    return path
checkpoint.Resume.save = timed
from plmclaims.cli import main
sys.exit(main(sys.argv[1:]))
"""


def longest(tier: dict, kinds: list[str]) -> dict:
    """kind -> the tier's costliest planned run of that kind."""
    from plmclaims import costs
    from plmclaims import plan as P
    from plmclaims.claims import load_claims

    _, table = costs.load_table()
    runs = P.all_runs(r for p in P.plan_all(load_claims(REPO / "replications"), tier) for r in p.score_runs()).values()
    out = {}
    for run in sorted(runs, key=lambda r: r.key):
        if run.kind in kinds and (run.kind != "compress" or run.method == "distillation"):
            cost = costs.run_cost(run, table).seconds
            if run.kind not in out or cost > out[run.kind][0]:
                out[run.kind] = (cost, run)
    missing = sorted(set(kinds) - set(out))
    if missing:
        sys.exit(f"tier {tier['name']} plans no run of kind {', '.join(missing)}")
    return {k: run for k, (_, run) in out.items()}


def build_upstream(runs: list, args) -> None:
    """The runs' upstream assets, built by the workflow (nothing is rebuilt that exists)."""
    from plmclaims.plan import LAYOUTS

    roots = {"results": f"results/{args.tier}", "resources": f"resources/{args.tier}"}
    targets = sorted({u.path(roots[LAYOUTS[u.kind].base]) for r in runs for u in r.upstream if u.kind != "lm_tasks"})
    if targets:
        print(f"building {len(targets)} upstream asset(s) with the workflow in {args.workdir} ...", flush=True)
        _quiet([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
                str(args.workdir), "--cores", str(args.cores), "--config", f"tier={args.tier}",
                f"data_root={args.data_root}", f"claims_dir={REPO / 'replications'}", "--", *targets],
               dict(os.environ), args.workdir, "snakemake")


def _quiet(argv: list[str], env: dict, cwd: str, what: str) -> None:
    """Run a command with its output kept aside; on failure, show the end of it and stop."""
    res = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{what} failed ({res.returncode}):\n{res.stderr[-3000:]}")


def command(run, tier: dict, out: Path, args) -> list[str]:
    """The rule command's arguments, as the run's rule passes them, with its outputs in `out`."""
    from plmclaims.plan import LAYOUTS

    cmd = COMMANDS[run.kind]
    main = out / {"lm": "model", "pretrain": ""}.get(run.kind, "metrics.json")
    argv = ["rule", cmd, "--spec", run.to_json(tier), "--out", str(main), "--threads", str(args.threads)]
    if cmd == "pretrain":
        res = f"{args.workdir}/resources/{args.tier}"
        argv += ["--corpus", LAYOUTS["corpus"].pattern(res), "--tokenizer", run.upstream[0].dir(res)]
    if cmd in ("contrastive", "finetune", "finetuned", "lm-train", "transfer", "compress"):
        argv += ["--resources", str(Path(args.workdir) / "resources" / args.tier)]
    if cmd not in ("transfer", "pretrain"):
        argv += ["--data-root", str(args.data_root)]
    return argv


def outputs(folder: Path) -> dict:
    """What must not change: metrics.json / train.json values (timing left out), every array, saved weights."""
    import numpy as np

    def clean(obj):
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items() if k not in VOLATILE}
        return [clean(v) for v in obj] if isinstance(obj, list) else obj

    out = {}
    for path in sorted(folder.rglob("*")):
        if path.name in ("metrics.json", "train.json"):
            out[path.name] = clean(json.loads(path.read_text())["values"])
        elif path.suffix == ".npz":
            with np.load(path) as npz:
                out[path.name] = {k: npz[k].tobytes() for k in npz.files}
        elif path.suffix == ".safetensors":  # saved weights (a trained LM, pre-training's steps)
            out[str(path.relative_to(folder))] = path.read_bytes()
    return out


def timed_run(run, tier: dict, scratch: Path, interval: dict | None, args) -> tuple[float, float, list[dict], dict]:
    """(wall seconds, CPU seconds, one row per save, the outputs) of one run of the rule command."""
    import resource

    name = "on" if interval is not None else "off"
    out = scratch / run.kind / name
    shutil.rmtree(out, ignore_errors=True)
    saves = scratch / f"{run.kind}-{name}.saves"
    saves.unlink(missing_ok=True)
    env = {**os.environ, "BENCH_SAVES": str(saves), "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1"}
    env.pop("PLMCLAIMS_CHECKPOINT", None)
    if interval is not None:
        env["PLMCLAIMS_CHECKPOINT"] = json.dumps({"dir": str(scratch / "state"), **interval})
    argv = command(run, tier, out, args)
    cpu0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    _quiet([sys.executable, "-c", TIMED, *argv], env, args.workdir, f"plmclaims rule {argv[1]} ({name})")
    wall, cpu1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    rows = [json.loads(line) for line in saves.read_text().splitlines()] if saves.exists() else []
    return wall, cpu, rows, outputs(out)


def main() -> None:
    from plmclaims.tiers import load_tier

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-root", default=os.environ.get("PLMCLAIMS_DATA_ROOT"),
                   help="the data root (default: $PLMCLAIMS_DATA_ROOT)")
    p.add_argument("--tier", default="micro")
    p.add_argument("--kinds", nargs="+", default=["contrastive", "finetune", "lm"], choices=sorted(COMMANDS))
    p.add_argument("--repeats", type=int, default=1, help="pairs of runs (off and on) per kind")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (the workflow's threads_per_job)")
    p.add_argument("--cores", type=int, default=2, help="cores for building the upstream assets")
    p.add_argument("--every-steps", type=int, default=None)
    p.add_argument("--every-minutes", type=float, default=None)
    p.add_argument("--workdir", default=str(REPO), help="where the workflow's resources/ are (built if missing)")
    p.add_argument("--smallest", action="store_true", help="the smoke test: the tiny tier's fine-tuning run, saved at "
                   "the tier's interval (2 steps: one save), in a scratch folder (seconds; its figures mean nothing)")
    args = p.parse_args()
    if not args.data_root:
        p.error("--data-root: the folder holding senteval/, glue/ and ud/ (or set PLMCLAIMS_DATA_ROOT)")
    if args.smallest:
        args.tier, args.kinds = "tiny", ["finetune"]
        args.workdir = tempfile.mkdtemp(prefix="bench-checkpoint-")
        atexit.register(shutil.rmtree, args.workdir, ignore_errors=True)
    args.data_root = str(Path(args.data_root).resolve())
    args.workdir = str(Path(args.workdir).resolve())
    tier = load_tier(args.tier)
    given = {k: v for k, v in (("every_steps", args.every_steps), ("every_minutes", args.every_minutes)) if v}
    interval = given or {k: v for k, v in tier.get("checkpoint", {}).items() if k != "keep"}
    runs = longest(tier, args.kinds)
    build_upstream(list(runs.values()), args)
    print(f"tier {args.tier}, checkpoint interval {interval or 'none (a stop signal only)'}, {args.threads} thread(s)")
    print("wall and CPU seconds of each run (mean over repeats), off = no resume state, on = saved at the interval;\n"
          "saves per run, seconds per save (in the on runs), the size of one state; same = identical outputs")
    print(f"{'kind':<12} {'run':<46} {'wall off':>8} {'on':>7} {'ratio':>6} {'CPU off':>8} {'on':>7} {'ratio':>6} "
          f"{'saves':>5} {'s/save':>6} {'MB':>6}  same")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        for kind, run in runs.items():
            walls, cpus = {"off": [], "on": []}, {"off": [], "on": []}
            saves, same = [], True
            for rep in range(args.repeats):
                order = ("off", "on") if rep % 2 == 0 else ("on", "off")
                results = {}
                for name in order:
                    wall, cpu, rows, results[name] = timed_run(run, tier, scratch, interval if name == "on" else None,
                                                               args)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
                    saves += rows if name == "on" else []
                same = same and results["on"] == results["off"]
            w = {k: sum(v) / args.repeats for k, v in walls.items()}
            c = {k: sum(v) / args.repeats for k, v in cpus.items()}
            per = sum(r["seconds"] for r in saves) / len(saves) if saves else float("nan")
            mb = max((r["bytes"] for r in saves), default=0) / 2**20
            label = "/".join(str(v) for v in run.spec["fields"].values())[:46]
            print(f"{kind:<12} {label:<46} {w['off']:8.1f} {w['on']:7.1f} {w['on'] / w['off']:6.3f} {c['off']:8.1f} "
                  f"{c['on']:7.1f} {c['on'] / c['off']:6.3f} {len(saves) / args.repeats:5.1f} {per:6.2f} {mb:6.0f}  "
                  f"{'yes' if same else 'NO'}", flush=True)
            if not same:
                sys.exit(f"{kind}: the run with resume state wrote different outputs from the run without")


if __name__ == "__main__":
    main()
