"""What `plmclaims plan` prints: the cost table (costs.py prices each run), the three counts of a tier's work, the
wall time to expect beside its lower bound, and for a GPU tier its GPU-hours.

- Lower bound: each run's arithmetic at the throughput table's measured rates plus one job start-up, packed perfectly
  onto --cores. Loading, tokenising and evaluation set-up are not in it.
- Expected: each rule's lower bound times its measured plan-to-run factor (the job-seconds a finished run of the tier
  spent on the rule over what the plan priced it at then: benchmarks/measured/<tier>.json, written by
  benchmarks/plan_vs_measured.py --write), or, for the rules the plan does not price (scoring, probes, verdicts), the
  measured seconds per run; divided by --cores and multiplied by the packing that run measured, and never below the
  longest chain of runs (pre-training and what waits for it).
- A GPU tier without a measured GPU table (benchmarks/throughput.py on the GPU) is priced in GPU-hours from FLOPs at a
  named GPU's dense bf16 peak (its float32 peak for the rules that compute in float32) and a stated utilisation
  (MFU), and says it is an estimate.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from . import batching

if TYPE_CHECKING:  # the CLI reads this module's constants for its help: planning is imported when a plan is made
    from .plan import ClaimPlan

MEASURED_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "measured"
# dense bf16 tensor-core peak (no sparsity), TFLOP/s, from each vendor's data sheet
GPU_BF16_TFLOPS = {"A100": 312.0, "H100-SXM": 989.0, "H100-PCIe": 756.0, "H200": 989.0, "L40S": 362.0, "A10": 125.0,
                   "RTX-4090": 165.2}
# dense float32 peak without tensor cores, TFLOP/s, from the same data sheets: torch computes float32 matrix products
# in full float32 by default (TF32 off), so the rules that run in float32 (costs.FLOAT32_KINDS) run at this peak
GPU_FP32_TFLOPS = {"A100": 19.5, "H100-SXM": 67.0, "H100-PCIe": 51.0, "H200": 67.0, "L40S": 91.6, "A10": 31.2,
                   "RTX-4090": 82.6}
DEFAULT_GPU, DEFAULT_MFU = "A100", 0.35
# what a rule's runs are called in the plan, where Snakemake's rule differs (a causal-LM run is lm_train + lm_eval)
RULES = {"lm": "lm_train + lm_eval", "probe-encode": "probe_encode"}


def gpu_tier(tier: dict) -> bool:
    """Whether the tier asks its rules for GPUs (resources.<rule>.gpu): its costs are GPU-hours."""
    return any(spec.get("gpu") for spec in tier.get("resources", {}).values())


def gpu_estimate(base: dict, gpu: str = DEFAULT_GPU, mfu: float = DEFAULT_MFU) -> dict:
    """A throughput table for `gpu` from FLOPs: every architecture row of `base` (a measured table: its parameter
    counts and shapes) at mfu x the GPU's dense bf16 peak, i.e. 2 x parameters FLOPs a token forward and 6 x forward
    and backward, and float32 rates at mfu x its float32 peak for the rules that compute in float32. Marked
    `estimate`, with what it assumed."""
    if gpu not in GPU_BF16_TFLOPS:
        from .errors import UserError

        raise UserError(f"--gpu: got {gpu!r}; allowed values: {', '.join(GPU_BF16_TFLOPS)}")
    flops, f32 = GPU_BF16_TFLOPS[gpu] * 1e12 * mfu, GPU_FP32_TFLOPS[gpu] * 1e12 * mfu
    rows = {}
    for name, row in base["architectures"].items():
        rate = {"forward_tokens_per_s": flops / (2 * row["params"]), "train_tokens_per_s": flops / (6 * row["params"]),
                "float32_forward_tokens_per_s": f32 / (2 * row["params"]),
                "float32_train_tokens_per_s": f32 / (6 * row["params"])}
        if "pretrain_tokens_per_s" in row:  # the MLM head's arithmetic is left out here (a small share at paper size)
            rate["pretrain_tokens_per_s"] = rate["train_tokens_per_s"]
        rows[name] = {k: v for k, v in row.items() if not k.endswith("_tokens_per_s")} | rate
    return {"device": f"NVIDIA {gpu} (estimate)", "device_type": "cuda", "dtype": "bfloat16", "date": "-",
            "torch": "-", "estimate": {"gpu": gpu, "tflops": GPU_BF16_TFLOPS[gpu], "fp32_tflops": GPU_FP32_TFLOPS[gpu],
                                       "mfu": mfu},
            "job_startup_s": base.get("job_startup_s", 0.0), "architectures": rows}


def load_measured(tier: dict, table_path: Path | None) -> dict | None:
    """The tier's measured run (benchmarks/measured/<tier>.json) when it was priced with the same throughput table."""
    path = MEASURED_DIR / f"{tier['name']}.json"
    if not path.is_file() or table_path is None:
        return None
    measured = json.loads(path.read_text())
    return measured if measured.get("table") == table_path.name else None


def expected_seconds(res: dict, measured: dict | None, jobs: dict[str, int]) -> dict[str, float | None]:
    """Run kind (and 'verdict') -> the job-seconds to expect (None: nothing measured to correct the plan with).
    `jobs`: the Snakemake jobs of each kind (job_counts): a batched rule saves, for each run folded into another's
    job, what the measurement says a job of its own costs (batch_saves_s)."""
    if measured is None:
        return {}
    by_rule, rules = res["by_rule"], measured["rules"]
    other = measured.get("other", {})
    per_other_job = other.get("job_seconds", 0) / max(other.get("jobs", 0), 1)
    saves = measured.get("batch_saves_s", {})
    out = {}
    for kind, row in by_rule.items():
        m = rules.get(kind)
        if m and m["planned_s"] > 0:  # a rule the plan prices: its lower bound times the measured factor
            out[kind] = row["seconds"] * m["job_seconds"] / m["planned_s"]
        elif m:  # a CPU rule: the measured seconds a run
            out[kind] = row["runs"] * m["job_seconds"] / m["runs"]
        elif kind in other.get("rules", []):
            out[kind] = row["runs"] * per_other_job
        else:
            out[kind] = None
        batched_then = m is not None and m["jobs"] < m["runs"]  # the measured run batched it already
        if out[kind] is not None and kind in saves and not batched_then:
            out[kind] = max(0.0, out[kind] - (row["runs"] - jobs.get(kind, row["runs"])) * float(saves[kind]))
    if "verdict" in rules:
        out["verdict"] = res["claims_n"] * rules["verdict"]["job_seconds"] / rules["verdict"]["jobs"]
    return out


def critical_path(res: dict, per_run: dict[str, float]) -> float:
    """The longest chain of runs (each after the runs it reads) at each run's expected seconds."""
    done: dict[str, float] = {}

    def finish(run) -> float:
        if run.key not in done:
            done[run.key] = per_run.get(run.key, 0.0) + max((finish(u) for u in run.upstream), default=0.0)
        return done[run.key]

    return max((finish(r) for r in res["runs"].values()), default=0.0)


def job_counts(plans: list[ClaimPlan], res: dict) -> dict:
    """The three counts of a tier's work: the runs the verdicts read, every run (with those they read from), and the
    Snakemake jobs (the batched short rules' batches; a causal-LM run that trains is two jobs, lm_train and lm_eval;
    plus the corpus the workflow pre-trains on, one verdict a claim, the report and `all`)."""
    read = {r.key for p in plans for r in p.score_runs()}
    runs = res["runs"]
    jobs = Counter()
    for kind, n in Counter(r.kind for r in runs.values()).items():
        jobs[kind] = len(batching.batches(runs.values(), kind)) if kind in batching.BATCHED_KINDS else n
    jobs["lm"] += sum(1 for r in runs.values() if r.kind == "lm" and r.method != "zero-shot")
    corpus = any(r.kind in ("tokenizer", "pretrain") for r in runs.values())
    extra = {"corpus": int(corpus), "verdict": len(plans), "report": 1, "all": 1}
    return {"read": len(read), "runs": len(runs), "jobs_by_rule": dict(jobs), "extra": extra,
            "jobs": sum(jobs.values()) + sum(extra.values())}


def _families(plans: list[ClaimPlan], res: dict) -> dict[str, dict]:
    """Family -> runs, seconds and peak memory of the runs its claims plan, each run under the first claim (by id)."""
    from . import costs

    out: dict[str, dict] = {}
    seen: set[str] = set()
    for p in sorted(plans, key=lambda p: p.claim.id):
        fam = out.setdefault(p.claim.protocol.get("family", p.claim.id.split("/")[0]),
                             {"runs": 0, "seconds": 0.0, "peak_mb": 0.0})
        for key in costs.all_runs(p.score_runs()):
            if key in seen:
                continue
            seen.add(key)
            c = res["costs"][key]
            fam["runs"] += 1
            fam["seconds"] += c.seconds
            fam["peak_mb"] = max(fam["peak_mb"], c.peak_mb)
    return out


def render(plans: list[ClaimPlan], tier: dict, table_path: Path | None, table: dict, cores: int = 2) -> str:
    """The cost table `plmclaims plan` prints."""
    from . import costs

    res = costs.plan_costs(plans, table)
    res["claims_n"] = len(plans)
    hours = costs._hours
    gpu = table.get("device_type") == "cuda"
    unit = "GPU-h" if gpu else "CPU-h"
    est = table.get("estimate")
    if est:
        lines = [f"tier {tier['name']}: {len(plans)} claims; GPU-hours ESTIMATED from FLOPs (2 x parameters a token "
                 f"forward, 6 x forward and backward) at an NVIDIA {est['gpu']}'s dense bf16 peak, {est['tflops']:g} "
                 f"TFLOP/s, at {100 * est['mfu']:.0f}% utilisation (MFU), an assumption: no GPU throughput table is "
                 "measured (run python benchmarks/throughput.py on the GPU; the plan then reads it)",
                 f"  the rules that compute in float32 ({', '.join(sorted(costs.FLOAT32_KINDS))}: no autocast, and "
                 f"torch leaves TF32 off) at its float32 peak, {est['fp32_tflops']:g} TFLOP/s, at the same utilisation"]
    else:
        lines = [f"tier {tier['name']}: {len(plans)} claims; device-hours from {table_path.name} ({table['device']}, "
                 f"{table.get('dtype')}, measured {table.get('date')}, torch {table.get('torch')})"]
    lines.append(f"  each job that runs a model adds its start-up, {table['job_startup_s']:.1f} s (a fresh interpreter's "
                 "imports, measured); loading weights and data is not priced" if "job_startup_s" in table else
                 "  job start-up is not priced: the table has no job_startup_s (benchmarks/throughput.py --startup-only)")
    if not gpu:
        lines.append(f"  CPU figures: measured on {table.get('threads', '?')} CPU thread(s) at the micro tier's shapes, "
                     "so CPU-h are core-hours (benchmarks/plan_vs_measured.py checks them against a finished tier's run "
                     "times); they scale poorly to a GPU (expect a GPU to be 100-1000x faster): run "
                     "benchmarks/throughput.py on the GPU for its own table")
    w = max([len(c) for c in res["claims"]] + [5])
    head = f"{'claim':<{w}}  {'runs (by kind)':<44} {'steps':>10} {'examples':>12} {unit:>9}"
    lines += ["", head, "-" * len(head)]

    def row(name, s, kinds=None):
        kinds = kinds or ", ".join(f"{n} {k}" for k, n in sorted(s["runs"].items())) or "none (not run at this tier)"
        h = hours(s["seconds"]) + ("+?" if s["unknown"] else "")
        return f"{name:<{w}}  {kinds:<44} {s['steps']:>10,} {s['examples']:>12,} {h:>9}"

    lines += [row(c, s) for c, s in res["claims"].items()]
    total = res["total"]
    lines += ["-" * len(head), row("total", total, f"{sum(total['runs'].values())} runs (by rule below)")]
    if total["unknown"]:
        lines.append(f"  +?: {total['unknown']} model runs on an architecture the table lacks; their hours are left out")
    lines.append(f"  the total counts each run once: {res['shared']} runs are shared between claims "
                 f"({res['shared_extra']} fewer than the per-claim rows add up to)")
    if res["copied"]:
        lines.append(f"  {len(res['copied'])} finetune runs copy their finetuned twin (the same training, model kept): "
                     "priced at a job's start-up")
    n = job_counts(plans, res)
    extra = ", ".join(f"{v} {k}" for k, v in n["extra"].items() if v)
    lines.append(f"  counts: {n['read']} runs the verdicts read (what `plmclaims validate` counts); {n['runs']} runs "
                 f"with those they read from (the plan's rows); {n['jobs']} Snakemake jobs (the short rules in batches, "
                 f"lm_train and lm_eval for each causal-LM run that trains, and {extra})")
    measured = None if gpu else load_measured(tier, table_path)
    jobs = n["jobs_by_rule"]
    expected = expected_seconds(res, measured, jobs)
    exp_head = f" {'expected':>9}" if expected else ""
    lines += ["", f"{'rule':<20} {'runs':>5} {'jobs':>5} {unit:>9}{exp_head} {'peak memory':>12}"]
    for kind, r in sorted(res["by_rule"].items()):
        exp = expected.get(kind)
        exp_s = (f" {'-':>9}" if exp is None else f" {hours(exp):>9}") if expected else ""
        if kind in costs.GPU_KINDS:
            mem = f"{r['peak_mb'] / 1024:>9.1f} GiB"
            lines.append(f"{RULES.get(kind, kind):<20} {r['runs']:>5} {jobs.get(kind, r['runs']):>5} "
                         f"{hours(r['seconds']):>9}{exp_s} {mem:>12}")
        else:  # numpy / scikit-learn on stored outputs: not scaled from the table, so not a 0 either
            lines.append(f"{RULES.get(kind, kind):<20} {r['runs']:>5} {jobs.get(kind, r['runs']):>5} {'-':>9}"
                         f"{exp_s} (CPU work, not counted)")
    if "verdict" in expected:
        lines.append(f"{'verdict':<20} {len(plans):>5} {len(plans):>5} {'-':>9} {hours(expected['verdict']):>9}")
    if expected:
        lines.append(f"  expected: {unit} to expect per rule, the lower bound times the rule's measured plan-to-run "
                     "factor (below); a rule the plan does not price: its measured seconds a run")
    lines.append("  peak memory: analytic (float32 weights, gradients and Adam states when every weight trains, 16-bit "
                 "activations at the budget's batch and length, 32-bit where the rule computes in float32 on the "
                 "estimate's GPU), the largest run of the rule")
    lines += [""] + _wall_lines(res, tier, table, measured, expected, cores, unit)
    if gpu:
        fams = _families(plans, res)
        lines += ["", f"{'family':<14} {'runs':>5} {unit:>9} {'peak memory':>12}"]
        lines += [f"{f:<14} {v['runs']:>5} {hours(v['seconds']):>9} {v['peak_mb'] / 1024:>9.1f} GiB"
                  for f, v in sorted(fams.items())]
    disk = costs.prefetch_disk(plans, tier, table)
    if disk:
        known = sum(b for _, b, _ in disk if not math.isnan(b))
        lines += ["", f"prefetch disk: {known / 1e9:.1f} GB for {len(disk)} hub models (estimates; datasets not counted)"]
        lines += [f"  {rid:<60} {b / 1e9:6.2f} GB  ({how})" for rid, b, how in disk]
    return "\n".join(lines)


def _wall_lines(res: dict, tier: dict, table: dict, measured: dict | None, expected: dict, cores: int,
                unit: str) -> list[str]:
    from . import costs
    hours = costs._hours
    total = res["total"]["seconds"]
    if unit == "GPU-h":
        return [f"on one GPU, one job at a time: {hours(total)} h of GPU time, the lower bound of the wall time "
                "(the CPU rules and verdicts run beside it)"]
    sbs = table.get("side_by_side") or {}
    slowdown = sbs.get("slowdown", 1.0) if sbs.get("jobs") == cores else 1.0
    lines = [f"wall time at --cores {cores}: at least {hours(total * slowdown / cores)} h (the lower bound: the priced "
             f"arithmetic and start-ups packed perfectly"
             + (f", each job {slowdown:.2f}x slower beside the others, measured {sbs.get('date')})" if slowdown != 1.0
                or sbs.get("jobs") == cores else ")")]
    if measured is None or not expected:
        lines.append(f"  no measured run of tier {tier['name']} to correct it with (benchmarks/measured/"
                     f"{tier['name']}.json: benchmarks/plan_vs_measured.py --write)")
        return lines
    known = sum(v for v in expected.values() if v is not None)
    missing = sorted(k for k, v in expected.items() if v is None)
    per_run = {}
    for kind, r in res["by_rule"].items():
        share = (expected.get(kind) or 0.0) / max(r["seconds"], 1e-9) if r["seconds"] else None
        for key, run in res["runs"].items():
            if run.kind == kind:
                c = res["costs"][key].seconds
                per_run[key] = c * share if share is not None else (expected.get(kind) or 0.0) / r["runs"]
    packing = measured["wall_s"] / (measured["job_seconds"] / measured["cores"])
    chain = critical_path(res, per_run)
    wall = max(known / cores * packing, chain)
    lines.append(f"  expected: {hours(wall)} h ({hours(known)} {unit} of jobs, each rule's lower bound times the "
                 f"plan-to-run factor measured on a cold run of the tier at {measured['commit'][:7]} "
                 f"({measured['date']}; benchmarks/measured/{tier['name']}.json), / {cores} cores x {packing:.2f} packing "
                 f"as measured there; the longest chain of runs is {hours(chain)} h)"
                 + (f"; nothing measured for {', '.join(missing)}" if missing else ""))
    if cores != measured["cores"]:
        lines.append(f"  the factors were measured at --cores {measured['cores']} on {measured['machine']}: at "
                     f"{cores} cores, or on another machine, they are a guide, not a measurement")
    return lines
