"""How well `plmclaims plan` predicts a finished tier: its estimate of every run against the wall time the run recorded.

Every run writes its wall time into its provenance: `wall_time_s`, the run's own work, and `startup_s`, what its
process spent before (interpreter, imports, model loading and data reading where the rule does them first; runs
recorded before stop 22 lack it, and count their own work only). This script plans the tier exactly as `plmclaims
plan` does, with the throughput table given (default: the committed one the plan reads), finds each planned run's
result under --results (pre-training's under --resources, beside the models it writes), and prints per
rule: runs found, planned and measured device-hours, their ratio (measured / planned; 1 is a perfect plan, 30 means
the plan is 30 times too optimistic) and the median of the per-run ratios. The plan prices the model's own
arithmetic plus the table's measured start-up of a job (imports); a rule whose runs are short shows the rest of its
fixed cost (model loading, data reading) as a ratio above 1.

The measured times are only as clean as the run was: a tier run with --cores 2 runs two jobs side by side on this
machine, each with the threads its provenance names (printed), while the table is measured one model at a time.

    python benchmarks/plan_vs_measured.py [--tier micro] [--results results/micro] [--resources resources/micro]
        [--throughput TABLE] [--runs]
    python benchmarks/plan_vs_measured.py --smallest      # the tiny tier: the code path in seconds

From a finished run's Snakemake logs instead (every job's start and finish: job-seconds per rule, the batched short
rules and a causal LM's two jobs included, which provenance alone does not see), the same table with the plan's
expected seconds beside (`plmclaims plan`'s correction by the last measured run) and their ratio, and with --write the
measured table the plan corrects itself with from then on (benchmarks/measured/<tier>.json):

    python benchmarks/plan_vs_measured.py --snakemake-log .snakemake/log/*.snakemake.log [--cores 2] \
        [--write benchmarks/measured/micro.json --commit $(git rev-parse HEAD) --machine "2-core VM"]
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def recorded(run, roots: dict[str, Path]) -> tuple[float, int | None] | None:
    """(wall seconds, torch threads) of the run from the provenance of its result files, or None when it has none.
    `roots` maps a layout's base ('results', 'resources': pre-training lives with the models) to the tier's folder.
    A run that is several jobs (a causal LM's lm_train writes train.json, its lm_eval metrics.json) sums them: each
    job's file carries its own provenance."""
    folder = Path(run.dir(str(roots[run.layout().base])))
    total, threads, found = 0.0, None, False
    for f in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        prov = doc.get("provenance", doc) if isinstance(doc, dict) else {}
        if isinstance(prov, dict) and "wall_time_s" in prov:  # with the job's start-up where it was recorded
            total += float(prov["wall_time_s"]) + float(prov.get("startup_s") or 0.0)
            threads = threads or (prov.get("device") or {}).get("torch_threads")
            found = True
    return (total, threads) if found else None


_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_START = re.compile(r"^(?:local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_DONE = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")


def log_jobs(paths: list[str | Path]) -> tuple[dict[str, list[float]], float]:
    """(Snakemake rule -> each finished job's seconds, the logs' wall seconds summed) from Snakemake logs: a job
    starts at the time stamp above its `rule <name>:` block and ends at the one above `Finished jobid: N`. Several
    logs (a run resumed in pieces) add up; a job that never finished is left out."""
    rules: dict[str, list[float]] = defaultdict(list)
    wall = 0.0
    for path in paths:
        stamp = first = None
        started, pending = {}, None
        for line in Path(path).read_text(errors="replace").splitlines():
            if m := _STAMP.match(line):
                stamp = datetime.datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
                first = first if first is not None else stamp
            elif (m := _START.match(line)) and stamp is not None:
                pending = (m.group(1), stamp)
            elif (m := _JOBID.match(line)) and pending is not None:
                started[m.group(1)], pending = pending, None
            elif (m := _DONE.match(line)) and m.group(1) in started and stamp is not None:
                rule, t0 = started.pop(m.group(1))
                rules[rule].append(stamp - t0)
        wall += (stamp - first) if stamp is not None and first is not None else 0.0
    return dict(rules), wall


def kind_of_rule(rule: str) -> str:
    """The plan's run kind a Snakemake rule runs ('verdict', 'report', 'corpus' and 'all' run none)."""
    from plmclaims.plan import LAYOUTS

    rule = re.sub(r"_batch_\w+$", "", rule)
    if rule in ("lm_train", "lm_eval"):  # a causal-LM run is both jobs
        return "lm"
    if rule == "fit_encode":
        return "fitencode"
    return rule if rule in LAYOUTS else rule.replace("_", "-") if rule.replace("_", "-") in LAYOUTS else rule


def from_logs(args, tier, table, path) -> None:
    """The per-rule table from Snakemake logs, beside the plan's lower bound and expected seconds; --write saves it."""
    from plmclaims import costs, plan_report
    from plmclaims.claims import load_claims
    from plmclaims.plan import plan_all

    jobs, wall = log_jobs(args.snakemake_log)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for rule, secs in jobs.items():
        by_kind[kind_of_rule(rule)] += secs
    plans = plan_all(load_claims(args.claims_dir), tier)
    res = costs.plan_costs(plans, table)
    res["claims_n"] = len(plans)
    counts = plan_report.job_counts(plans, res)
    expected = plan_report.expected_seconds(res, plan_report.load_measured(tier, path), counts["jobs_by_rule"])
    total = sum(map(sum, by_kind.values()))
    print(f"tier {tier['name']}: {sum(map(len, by_kind.values()))} jobs, {total:.0f} job-seconds, {wall:.0f} s of "
          f"Snakemake wall time in {len(args.snakemake_log)} log(s); table {path.name}")
    head = f"{'rule':<16} {'jobs':>5} {'measured s':>11} {'planned s':>10} {'expected s':>11} {'measured/expected':>18}"
    print(head + "\n" + "-" * len(head))
    rows = {}
    for kind, secs in sorted(by_kind.items(), key=lambda kv: -sum(kv[1])):
        planned = res["by_rule"].get(kind, {}).get("seconds", 0.0)
        exp = expected.get(kind)
        ratio = f"{sum(secs) / exp:.2f}" if exp else "-"
        print(f"{kind:<16} {len(secs):>5} {sum(secs):>11.0f} {planned:>10.0f} {exp or 0:>11.0f} {ratio:>18}")
        rows[kind] = {"runs": res["by_rule"].get(kind, {}).get("runs", len(secs)), "jobs": len(secs),
                      "job_seconds": round(sum(secs), 1), "planned_s": round(planned, 1)}
    if args.write:
        out = {"tier": tier["name"], "commit": args.commit, "date": datetime.date.today().isoformat(),
               "machine": args.machine, "how": f"Snakemake logs of a run of the whole tier: {len(args.snakemake_log)} "
               "piece(s), job-seconds per rule from each job's start and finish; planned_s is what the plan priced "
               "each rule at with the table below", "table": path.name, "cores": args.cores, "wall_s": round(wall),
               "job_seconds": round(total), "rules": rows}
        Path(args.write).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.write}")


def main() -> None:
    from plmclaims import costs
    from plmclaims.claims import load_claims
    from plmclaims.plan import all_runs, plan_all
    from plmclaims.tiers import load_tier

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tier", default="micro")
    ap.add_argument("--results", default=None, help="the tier's results folder (default: results/<tier>)")
    ap.add_argument("--resources", default=None,
                    help="the tier's resources folder, where pre-training writes (default: resources/<tier>)")
    ap.add_argument("--claims-dir", default=str(REPO / "replications"))
    ap.add_argument("--throughput", default=None, help="a table from benchmarks/throughput.py (default: the committed one)")
    ap.add_argument("--runs", action="store_true", help="also print every run's planned and measured seconds")
    ap.add_argument("--smallest", action="store_true", help="the code path in seconds: the tiny tier")
    ap.add_argument("--snakemake-log", nargs="+", default=None, help="measure from these Snakemake logs instead")
    ap.add_argument("--cores", type=int, default=2, help="the --cores the logged run had")
    ap.add_argument("--write", default=None, help="with --snakemake-log: write the measured table the plan reads")
    ap.add_argument("--commit", default="", help="with --write: the commit the logged run ran")
    ap.add_argument("--machine", default="", help="with --write: the machine the logged run ran on")
    args = ap.parse_args()
    if args.smallest:
        args.tier = "tiny"
    tier = load_tier(args.tier)
    results = Path(args.results or REPO / "results" / tier["name"])
    roots = {"results": results, "resources": Path(args.resources or REPO / "resources" / tier["name"])}
    path, table = costs.load_table(args.throughput)
    if args.snakemake_log:
        return from_logs(args, tier, table, path)
    runs = {}
    for p in plan_all(load_claims(args.claims_dir), tier):
        runs.update(all_runs(p.score_runs()))
    by_rule: dict[str, list] = defaultdict(list)
    missing, threads, unpriced = Counter(), Counter(), Counter()
    for run in runs.values():
        if run.kind not in costs.GPU_KINDS:
            continue
        got = recorded(run, roots)
        if got is None:
            missing[run.kind] += 1
            continue
        planned = costs.run_cost(run, table).seconds
        if planned <= 0:  # no transformer to price (static vectors, lexical) or an architecture the table lacks
            unpriced[run.kind] += 1
            continue
        by_rule[run.kind].append((run, planned, got[0]))
        threads[got[1]] += 1
    print(f"tier {tier['name']}: {len(runs)} planned runs; results {results}; table {path.name} ({table['device']}, "
          f"measured {table.get('date')})")
    print(f"runs found per torch thread count: {dict(threads)}; not found (not run, or no provenance): "
          f"{sum(missing.values())} {dict(missing) if missing else ''}; left out, priced at zero (no transformer, or a "
          f"model the table lacks): {sum(unpriced.values())} {dict(unpriced) if unpriced else ''}")
    head = f"{'rule':<16} {'runs':>5} {'planned h':>10} {'measured h':>11} {'measured/planned':>17} {'median run ratio':>17}"
    print("\n" + head + "\n" + "-" * len(head))
    all_planned = all_measured = 0.0
    for kind, rows in sorted(by_rule.items()):
        planned = sum(p for _, p, _ in rows)
        measured = sum(m for _, _, m in rows)
        all_planned, all_measured = all_planned + planned, all_measured + measured
        ratios = [m / p for _, p, m in rows if p > 0]
        ratio = f"{measured / planned:.2f}" if planned > 0 else "no estimate"
        med = f"{statistics.median(ratios):.2f}" if ratios else "-"
        print(f"{kind:<16} {len(rows):>5} {planned / 3600:>10.3f} {measured / 3600:>11.3f} {ratio:>17} {med:>17}")
    print("-" * len(head))
    total = f"{all_measured / all_planned:.2f}" if all_planned else "-"
    print(f"{'all':<16} {sum(map(len, by_rule.values())):>5} {all_planned / 3600:>10.3f} {all_measured / 3600:>11.3f} {total:>17}")
    if args.runs:
        print()
        for kind, rows in sorted(by_rule.items()):
            for run, planned, measured in sorted(rows, key=lambda x: repr(x[0])):
                print(f"{run!r:<90} planned {planned:9.1f} s  measured {measured:9.1f} s")


if __name__ == "__main__":
    main()
