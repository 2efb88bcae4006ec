"""Relations between measurements (greater, less, ordering, approx-equal, non-inferior, ratio, a scale trend) and
magnitudes (reproduces), each decided on the paired bootstrap after the guards that make it meaningful."""
from __future__ import annotations

import math
from dataclasses import asdict

from ..plan import ClaimPlan
from .curves import scale_trend
from .evidence import Evidence, decide
from .floors import Floors
from .records import CheckResult, Detail, Series, combine, credited, few, is_params_ratio, sides, targets
from .twins import contrast, twin_series


def measure(row: CheckResult, check: dict, cplan: ClaimPlan, ev: Evidence, series: dict[str, Series],
             floors: Floors) -> None:
    """Decide a relation (or a magnitude) on each target, after the guards that make it meaningful."""
    names = list(dict.fromkeys(sides(check)))
    # 1. a degenerate run never enters the bootstrap: a side stands on its other runs where enough remain, and has
    # no number where too few do
    touched = list(dict.fromkeys(b for target in targets(check) for b in (ev.benchmarks if target == "avg" else [target])))
    lost = [f"{n} on {b}: {series[n].unusable[b]}" for n in names for b in touched if b in series[n].unusable]
    if lost:
        row.outcome, row.reason = "inconclusive", f"{len(lost)} side(s) without a number: " + few(lost)
        return
    dropped = [f"{n} on {b}: {r}" for n in names for b in touched for r in series[n].degenerate.get(b, [])]
    wanted = credited(check)
    if check.get("control") == "random-weights":
        lacking = [n for n in wanted if not any(f.name == "random-weights" for f in floors.of[n])]
        if lacking:
            row.reason = f"no random-weights control planned for {', '.join(lacking)}"
            return
    details = []
    for target in targets(check):
        tasks = ev.benchmarks
        if target in ev.skipped:
            details.append(Detail(target, "not-run", reason=f"{target} is not run at tier {ev.tier['name']}: {ev.skipped[target]}"))
            continue
        if target == "avg" and wanted:
            # 2. tasks on which no side carries signal are left out of the average (and those the tier skips)
            row.uninformative.update({b: f"not run at tier {ev.tier['name']}: {why}" for b, why in ev.skipped.items()})
            for b in ev.benchmarks:
                tests = [floors.test(n, b, [b], set(names)) for n in names]
                if not any(ft.above for ft in tests):
                    row.uninformative[b] = "no side above its floor: " + "; ".join(
                        f"{ft.side} {ft.value:.2f} vs {ft.floor} {ft.floor_value:.2f}" for ft in tests)
            tasks = [b for b in ev.benchmarks if b not in row.uninformative]
            need = math.ceil(float(cplan.claim.data.get("min_informative", 0.5)) * len(ev.all_benchmarks))
            if len(tasks) < need:
                details.append(Detail(target, "inconclusive", reason=(
                    f"only {len(tasks)} of {len(ev.all_benchmarks)} tasks are informative at this budget (at least {need} "
                    f"needed); uninformative: {', '.join(row.uninformative)}"), tasks=tasks))
                continue
        # 3. the sides the relation credits must be above their floors on the (recomputed) target
        tests = [floors.test(n, target, tasks, set(names)) for n in wanted]
        row.floors += tests
        below = [ft for ft in tests if not ft.above]
        if below:
            details.append(Detail(target, "inconclusive", reason="; ".join(ft.text() for ft in below), tasks=tasks))
            continue
        d = relation(check, cplan, ev, series, target, tasks, row)
        twins = twin_series(names, floors.random) if check["type"] in TWIN_CONTRASTED else None
        if twins is not None:  # 4. not also the untrained network's relation (twins.contrast)
            d = _against_twins(check, d, relation(check, cplan, ev, twins, target, tasks, row), ev, target)
        d.tasks = tasks if target == "avg" and row.uninformative else []
        details.append(d)
    row.details = details
    ran = [d.outcome for d in details if d.outcome != "not-run"]
    row.outcome = combine(ran) if ran else "not-run"
    reasons = [d.reason for d in details if d.reason and d.outcome == row.outcome]
    if row.uninformative and row.outcome != "inconclusive":
        # each task left out with its own reason: a task the tier does not run is not one without signal
        skipped = [b for b in row.uninformative if b in ev.skipped]
        weak = [b for b in row.uninformative if b not in ev.skipped]
        left = ([f"not run at tier {ev.tier['name']}: {', '.join(skipped)}"] if skipped else []) + \
               ([f"uninformative (no side above its floor): {', '.join(weak)}"] if weak else [])
        reasons.append(f"judged on {', '.join(details[0].tasks or ev.benchmarks)}; {'; '.join(left)}")
    if dropped:
        reasons.append(f"{len(dropped)} degenerate run(s) left out, each side judged on its other runs: {few(dropped)}")
    row.reason = row.reason or "; ".join(dict.fromkeys(reasons))


# the relations whose statistic says how strongly one side beats another; equality and non-inferiority between two
# sides are guarded by the floors instead (two untrained sides are equal too: both must clear their twins)
TWIN_CONTRASTED = ("greater", "less", "ordering", "ratio")


def _against_twins(check: dict, d: Detail, twin_d: Detail, ev: Evidence, target: str) -> Detail:
    """An ordering is contrasted link by link: each pair with the same pair of twins."""
    if check["type"] != "ordering":
        return contrast(d, twin_d, ev, target)
    pairs = [contrast(p, tp, ev, p.on) for p, tp in zip(d.pairs, twin_d.pairs)]
    d.extra["pairs"] = [asdict(p) for p in pairs]
    d.outcome = combine([p.outcome for p in pairs])
    d.reason = "; ".join(f"{p.on}: {p.reason}" for p in pairs if p.reason)
    return d


def relation(check: dict, cplan: ClaimPlan, ev: Evidence, series: dict[str, Series], target: str, tasks: list[str],
              row: CheckResult) -> Detail:
    t = check["type"]
    S = lambda n: series[n].on(target, tasks)[1]  # noqa: E731
    P = lambda n: series[n].on(target, tasks)[0]  # noqa: E731
    if t in ("greater", "less"):
        a, b = (check["a"], check["b"]) if t == "greater" else (check["b"], check["a"])
        return decide(S(a) - S(b), P(a) - P(b), ev, check.get("margin", 0.0), target)
    if t == "ordering":
        pairs = [decide(S(a) - S(b), P(a) - P(b), ev, check.get("margin", 0.0), f"{a} > {b}")
                 for a, b in zip(check["order"], check["order"][1:])]
        weakest = min(pairs, key=lambda p: p.ci_low)  # the link the ordering stands or falls with
        d = Detail(target, combine([p.outcome for p in pairs]), weakest.estimate, weakest.ci_low, weakest.ci_high,
                   extra={"weakest": weakest.on, "pairs": [asdict(p) for p in pairs]})
        d.pairs = pairs
        return d
    if t == "approx-equal":
        lo, hi = ev.ci(S(check["a"]) - S(check["b"]))
        delta = check["delta"]
        outcome = "holds" if (-delta <= lo and hi <= delta) else "contradicted" if (lo > delta or hi < -delta) else "inconclusive"
        return Detail(target, outcome, P(check["a"]) - P(check["b"]), lo, hi)
    if t == "non-inferior":
        # a may trail b by at most delta: holds when the whole interval of a - b lies above -delta
        return decide(S(check["a"]) - S(check["b"]), P(check["a"]) - P(check["b"]), ev, -float(check["delta"]), target)
    if t == "trend":
        return scale_trend(check, S, P, ev, target)
    if t == "ratio":
        r = check["ratio"]
        return decide(S(check["a"]) - r * S(check["b"]), P(check["a"]) - r * P(check["b"]), ev, 0.0, target)
    # reproduces: a magnitude against the published value
    name = check["measurement"]
    reported = cplan.measurements[name].measurement.reported.get(target)
    if reported is None:
        return Detail(target, "not-run", reason=f"no reported value for {target}")
    tol = float(check.get("tolerance", cplan.claim.tolerance))
    lo, hi = ev.ci(S(name))
    diff = P(name) - reported
    if cplan.measurements[name].unjudged_magnitude:
        row.judged = False
        row.reason = f"magnitudes are not judged {cplan.measurements[name].unjudged_magnitude}"
    return Detail(target, "holds" if abs(diff) <= tol else "contradicted", P(name), lo, hi,
                  extra={"reported": reported, "difference": diff, "tolerance": tol})


def params_ratio(row: CheckResult, check: dict, checks: list[dict], series: dict[str, Series],
                  done: list[CheckResult | None]) -> None:
    """Trained parameters of a over those of b, against the claimed ratio: counts are exact, so no interval. It counts
    only together with the quality check it qualifies: a method that trains few parameters and learns nothing
    reproduces nothing."""
    a, b = series[check["a"]].trained_params(), series[check["b"]].trained_params()
    if a is None or b is None or b == 0:
        row.reason = "the runs record no parameter counts"
        row.details = [Detail("parameters", "not-run")]
        return
    ratio = a / b
    ok = ratio >= check["ratio"] if check.get("direction") == "at-least" else ratio <= check["ratio"]
    row.details = [Detail("parameters", "holds" if ok else "contradicted", ratio, ratio, ratio,
                          extra={"trained_a": a, "trained_b": b})]
    if not ok:
        row.outcome = "contradicted"
        return
    qi = check.get("qualifies", _quality_index(check, checks))
    row.qualifies = qi
    quality = done[qi] if qi is not None else None
    if quality is None:
        row.outcome, row.reason = "inconclusive", (f"the ratio holds ({ratio:.4g}), but no quality check compares "
                                                   f"{check['a']} with {check['b']}: a parameter ratio alone reproduces nothing")
    elif quality.outcome != "holds":
        row.outcome, row.reason = "inconclusive", (
            f"the ratio holds ({ratio:.4g}), but it counts only with check {qi} ({quality.description}), which is "
            f"{quality.outcome}: a parameter ratio alone reproduces nothing")
    else:
        row.outcome = "holds"


def _quality_index(check: dict, checks: list[dict]) -> int | None:
    """The first quality check (not a parameter ratio) that compares the ratio's two measurements."""
    want = {check["a"], check["b"]}
    return next((j for j, c in enumerate(checks) if not is_params_ratio(c) and want <= set(sides(c))), None)
