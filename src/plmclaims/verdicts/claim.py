"""A claim's verdict: every check decided on the claim's evidence, then one word for the claim.

Claim verdicts (DESIGN.md): reproduced, direction-holds, not-reproduced, inconclusive, shown, not-run, error.
"""
from __future__ import annotations

from ..plan import ClaimPlan
from .curves import curve_trend
from .evidence import Evidence
from .floors import Floors
from .records import CheckResult, EvidenceError, Series, describe, is_params_ratio, sides
from .relations import measure, params_ratio
from .summary import measurement_summary, series_summary


def decide_claim(cplan: ClaimPlan, tier: dict, results: str) -> dict:
    claim = cplan.claim
    ev = Evidence(cplan, tier, results)
    try:
        series, random = ev.load(cplan)
        lexical = {k: ev.series([run], k) for k, run in cplan.lexical.items()}
    except EvidenceError as e:
        return error_row(cplan, tier, str(e), results)
    floors = Floors(cplan, ev, series, random, lexical)
    checks: list[CheckResult] = [None] * len(claim.checks)  # type: ignore[list-item]
    # parameter ratios last: each counts only together with the quality check it qualifies
    order = sorted(range(len(claim.checks)), key=lambda i: is_params_ratio(claim.checks[i]))
    for i in order:
        checks[i] = _evaluate_check(i, claim.checks[i], cplan, tier, ev, series, floors, checks)
    verdict, note = claim_verdict(checks, cplan, series, claim.tolerance)
    return {**header(cplan, tier, verdict, note),
            "measurements": {n: measurement_summary(pm, series.get(n), floors, ev, series) for n, pm in cplan.measurements.items()},
            "controls": {k: series_summary(s, ev) for k, s in lexical.items()},
            "checks": [c.as_dict() for c in checks],
            "runs": sorted({r.path(results) for r in cplan.score_runs()})}


def header(cplan: ClaimPlan, tier: dict, verdict: str, note: str) -> dict:
    claim = cplan.claim
    expected = [e for e in claim.data.get("expected", []) if e["tier"] == tier["name"]]
    return {"id": claim.id, "version": claim.data["version"], "seed_point": claim.data["seed_point"], "tier": tier["name"],
            "statement": claim.data["statement"], "source": claim.data["source"], "protocol": claim.protocol,
            "verdict": verdict, "note": note, "expected": expected,
            "matches_expected": all(e["verdict"] == verdict for e in expected) if expected else None,
            "tier_note": claim.data.get("tier_notes", {}).get(tier["name"], ""),
            # a rehearsal runs the paper DAG on stand-in weights: the verdict code runs, the verdict means nothing
            "rehearsal": bool(tier.get("rehearsal"))}


def error_row(cplan: ClaimPlan, tier: dict, note: str, results: str | None = None) -> dict:
    checks = [CheckResult(i, c["type"], describe(c), c.get("scope", "semantic"), c.get("note", ""), "error", reason=note)
              for i, c in enumerate(cplan.claim.checks)]
    return {**header(cplan, tier, "error", note),
            "measurements": {n: measurement_summary(pm, None, None, None) for n, pm in cplan.measurements.items()},
            "controls": {}, "checks": [c.as_dict() for c in checks],
            "runs": sorted({r.path(results) for r in cplan.score_runs()}) if results else []}


def error_verdict(cplan: ClaimPlan, tier: dict, failures: list[tuple[str, str]],
                  elsewhere: list[tuple[str, str]] = ()) -> dict:
    """The verdict row of a claim whose runs failed: (failed rule, log path) for each failure. With no failure of its
    own, the claim was left undone when the workflow stopped at another claim's failure (`elsewhere`)."""
    if failures:
        note = "; ".join(f"rule {rule} failed (log: {path})" for rule, path in failures)
    else:
        shown = "; ".join(f"rule {rule} failed (log: {path})" for rule, path in elsewhere) or "a job failed"
        note = (f"not computed: the workflow stopped at a failure this claim does not depend on ({shown}); rerun, "
                "or run with --keep-going to compute every claim that does not depend on it")
    return error_row(cplan, tier, note)


def _evaluate_check(i: int, check: dict, cplan: ClaimPlan, tier: dict, ev: Evidence, series: dict[str, Series],
                    floors: Floors, done: list[CheckResult | None]) -> CheckResult:
    t = check["type"]
    scope = check.get("scope", "semantic")
    row = CheckResult(i, t, describe(check), scope, check.get("note", ""))
    curve = t == "trend" and check.get("measurement")  # a trend along a layer/step axis reads one curve measurement
    missing = [n for n in ([check["measurement"]] if curve else sides(check)) if n not in (ev.curves if curve else series)]
    if missing:
        row.reason = "; ".join(f"{n}: {cplan.measurements[n].reason}" for n in missing)
        return row
    row.judged = scope in tier["judges"]
    if curve:
        curve_trend(row, check, ev, series, floors)
    elif is_params_ratio(check):
        params_ratio(row, check, cplan.claim.checks, series, done)
    else:
        measure(row, check, cplan, ev, series, floors)
    if not row.judged and row.outcome not in ("not-run", "error"):
        row.measured_outcome, row.outcome = row.outcome, "not-judged"
        row.reason = row.reason or f"a {scope} check; tier {tier['name']} judges {', '.join(tier['judges'])}"
    return row


def _failure(check: dict) -> str:
    """The contradicted part of a check, in numbers."""
    bad = [d for d in check.get("details", []) if d["outcome"] == "contradicted"]
    if check["type"] == "reproduces":
        parts = [f"{d['on']} {d['estimate']:.2f} vs {d['reported']:.2f}" for d in bad]
        return f"{check['description'].split(' within')[0]} off by more than {bad[0]['tolerance']} on {', '.join(parts)}"
    if check["type"] == "ratio" and bad and bad[0]["on"] == "parameters":
        return f"{check['description']} (measured {bad[0]['estimate']:.4g})"
    parts = [f"{d['on']} {d['estimate']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}]" for d in bad]
    return f"{check['description']} ({', '.join(parts)})"


def claim_verdict(results: list[CheckResult], cplan: ClaimPlan, series: dict, tolerance: float) -> tuple[str, str]:
    checks = [c.as_dict() for c in results]
    judged = [c for c in checks if c["outcome"] in ("holds", "contradicted", "inconclusive", "error")]
    if any(c["outcome"] == "error" for c in checks):
        return "error", "a check failed to evaluate"
    if not judged:
        reasons = sorted({c.get("reason", "") for c in checks if c.get("reason")})
        return "not-run", "; ".join(reasons) or "no check can be judged at this tier"
    outcomes = [c["outcome"] for c in judged]
    skipped = [c for c in checks if c not in judged]
    tail = f" {len(skipped)} check(s) shown but not judged at this tier." if skipped else ""
    if "contradicted" in outcomes:
        failed = "; ".join(_failure(c) for c in judged if c["outcome"] == "contradicted")
        return "not-reproduced", f"contradicted: {failed}." + tail
    if "inconclusive" in outcomes:
        reasons = "; ".join(f"{c['description']}: {c.get('reason') or 'the interval straddles the margin'}"
                            for c in judged if c["outcome"] == "inconclusive")
        return "inconclusive", reasons + "." + tail
    dropped = [f"{c['description']}: {c['reason']}" for c in judged if c.get("uninformative")]
    tail = (" " + "; ".join(dropped) + "." if dropped else "") + tail
    off = []
    for name, s in series.items():
        pm = cplan.measurements.get(name)  # a curve's points carry no reported value
        if pm is None:
            continue
        reported = pm.measurement.reported.get("avg")
        if pm.substitute or reported is None:
            continue
        avg = s.on("avg", list(s.point))[0]
        if abs(avg - reported) > tolerance:
            off.append(f"{name} {avg:.2f} vs {reported:.2f}")
    if off:
        return "direction-holds", f"the relations hold, but magnitudes are off by more than {tolerance}: {', '.join(off)}." + tail
    judged_mag = any(not cplan.measurements[n].substitute and cplan.measurements[n].measurement.reported
                     for n in series if n in cplan.measurements)
    if not judged_mag:
        return "reproduced", "relations only: magnitudes are not judged on this tier's substitute assets." + tail
    return "reproduced", "relations hold and magnitudes are within tolerance." + tail
