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
    """The claim's verdict. A claim measured on several models (`models:`) is judged on each, with the scopes the tier
    lets that model judge; its verdict is the headline model's (the tier's `headline` order: the most faithful real
    model the tier runs the claim on), and `models` holds every model's."""
    first = _decide_one(cplan, tier, results)
    if not cplan.models:
        return first
    per = {cplan.role: first}
    for role, mplan in cplan.models.items():
        per[role] = _decide_one(mplan, judging(tier, role), results)
    runnable = [p.role for p in cplan.every_model() if any(pm.status == "ok" for pm in p.measurements.values())]
    order = [r for r in tier.get("headline", []) if r in runnable] + [r for r in runnable if r not in tier.get("headline", [])]
    headline = order[0] if order else cplan.role
    out = {**per[headline], "headline_model": headline, "headline_note": stands_for(tier, headline),
           "models": {role: {k: v[k] for k in ("verdict", "note", "checks", "measurements", "controls")}
                      | {"stands_for": stands_for(tier, role), "asset": tier["roles"].get(role, {}).get("asset")}
                      for role, v in per.items()},
           "runs": sorted({r.path(results) for r in cplan.score_runs()})}
    expected = out["expected"]
    out["matches_expected"] = all(e["verdict"] == out["verdict"] for e in expected) if expected else None
    return out


def judging(tier: dict, role: str) -> dict:
    """The tier as it judges a claim on `role`'s model: the scopes that role may judge (a real pre-trained model may
    judge what the tier judges only on the paper's assets; the tier file says which and why)."""
    spec = tier["roles"].get(role, {})
    return {**tier, "judges": spec["judges"]} if "judges" in spec else tier


def stands_for(tier: dict, role: str) -> str:
    """What the model a verdict rests on stands for, in the tier's words."""
    spec = tier["roles"].get(role, {})
    return spec.get("stands_for") or spec.get("note") or spec.get("asset", role)


def _decide_one(cplan: ClaimPlan, tier: dict, results: str) -> dict:
    claim = cplan.claim
    ev = Evidence(cplan, tier, results)
    try:
        series, random = ev.load(cplan)
        lexical = {k: ev.series([run], k) for k, run in cplan.lexical.items()}
    except EvidenceError as e:
        return error_row(cplan, tier, str(e), results)
    floors = Floors(cplan, ev, series, random, lexical)
    checks: list[CheckResult] = [None] * len(claim.checks)  # type: ignore[list-item]
    # checks that lean on another come after it: a contradiction at a cut budget after its control check, parameter
    # ratios last (each counts only together with the quality check it qualifies)
    order = sorted(range(len(claim.checks)), key=lambda i: (is_params_ratio(claim.checks[i]),
                                                            "budget_limited" in claim.checks[i]))
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
    return {"id": claim.id, "version": claim.data["version"], "seed_point": claim.data.get("seed_point", ""),
            "seed_relation": claim.data.get("seed_relation", "own"), "tier": tier["name"],
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
    elif elsewhere:
        shown = "; ".join(f"rule {rule} failed (log: {path})" for rule, path in elsewhere)
        note = (f"not computed: the workflow stopped at a failure this claim does not depend on ({shown}); rerun, "
                "or run with --keep-going to compute every claim that does not depend on it")
    else:  # no job failed: the run was stopped (a signal, Ctrl-C, a cluster's limit) before this claim was done
        note = ("not computed: the workflow stopped before this claim's runs were done, and no job failed; rerun "
                "with --rerun-incomplete to resume")
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
    if row.outcome in ("not-run", "error"):
        return row
    if check.get("construction"):  # true whatever the paper says: shown, never credited
        row.measured_outcome, row.outcome = row.outcome, "shown"
        row.reason = f"holds by construction, so shown and not credited: {check['construction']}"
    elif check.get("shown"):  # a control, not the paper's statement
        row.measured_outcome, row.outcome = row.outcome, "shown"
        row.reason = f"shown, not credited: {check['shown']}"
    elif not row.judged:
        row.measured_outcome, row.outcome = row.outcome, "shown"
        row.reason = row.reason or f"a {scope} check; tier {tier['name']} judges {', '.join(tier['judges'])}"
    elif row.outcome == "contradicted" and {tier["name"], "all"} & set(check.get("budget_limited", {}).get("tiers", [])):
        budget_limited(row, check, done)
    return row


def budget_limited(row: CheckResult, check: dict, done: list[CheckResult | None]) -> None:
    """A shortfall at a budget far below the paper's contradicts the paper only when a control shows the method itself
    falls short (its control check contradicted: e.g. the distilled student below the same student undistilled);
    otherwise the check is inconclusive, with its numbers."""
    spec = check["budget_limited"]
    control = done[spec["control_check"]] if "control_check" in spec else None
    control_outcome = None if control is None else (control.measured_outcome or control.outcome)
    if control_outcome == "contradicted":
        row.reason = (f"the method itself falls short at this budget: its control check ({control.description}) is "
                      "contradicted too")
        return
    row.measured_outcome, row.outcome = row.outcome, "inconclusive"
    against = (f"; its control check ({control.description}) is {control_outcome}, so the shortfall is not shown to be "
               "the method's" if control is not None else "; no control check isolates the method")
    # the claim's note puts the check's description before its reason, so the reason gives the numbers alone
    row.reason = f"{_failure(row.as_dict(), described=False)} at a budget far below the paper's ({spec['why']}){against}"


def _failure(check: dict, described: bool = True) -> str:
    """The contradicted part of a check, in numbers, after the check's description unless `described` is false."""
    bad = [d for d in check.get("details", []) if d["outcome"] == "contradicted"]
    if check["type"] == "reproduces":
        parts = [f"{d['on']} {d['estimate']:.2f} vs {d['reported']:.2f}" for d in bad]
        head = f"{check['description'].split(' within')[0]} " if described else ""
        return f"{head}off by more than {bad[0]['tolerance']} on {', '.join(parts)}"
    if check["type"] == "ratio" and bad and bad[0]["on"] == "parameters":
        measured = f"measured {bad[0]['estimate']:.4g}"
        return f"{check['description']} ({measured})" if described else measured
    parts = ", ".join(f"{d['on']} {d['estimate']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}]" for d in bad)
    return f"{check['description']} ({parts})" if described else f"measured {parts}"


def _shown(checks: list[dict]) -> str:
    """The checks measured but not credited here, each with what the numbers say."""
    return "; ".join(f"{c['description']}: measured {c.get('measured_outcome', 'not-run')}" for c in checks)


def claim_verdict(results: list[CheckResult], cplan: ClaimPlan, series: dict, tolerance: float) -> tuple[str, str]:
    checks = [c.as_dict() for c in results]
    judged = [c for c in checks if c["outcome"] in ("holds", "contradicted", "inconclusive", "error")]
    shown = [c for c in checks if c["outcome"] == "shown"]
    if any(c["outcome"] == "error" for c in checks):
        return "error", "a check failed to evaluate"
    if not judged and shown:
        return "shown", f"measured, not judged here: {_shown(shown)}."
    if not judged:
        reasons = sorted({c.get("reason", "") for c in checks if c.get("reason")})
        return "not-run", "; ".join(reasons) or "no check can be judged at this tier"
    outcomes = [c["outcome"] for c in judged]
    unrun = len(checks) - len(judged) - len(shown)
    tail = (f" Shown, not judged here: {_shown(shown)}." if shown else "") + \
        (f" {unrun} check(s) not run at this tier." if unrun else "")
    if "contradicted" in outcomes:
        failed = "; ".join(_failure(c) for c in judged if c["outcome"] == "contradicted")
        return "not-reproduced", f"contradicted: {failed}." + tail
    if "inconclusive" in outcomes:
        reasons = "; ".join(f"{c['description']}: {c.get('reason') or 'the interval straddles the margin'}"
                            for c in judged if c["outcome"] == "inconclusive")
        return "inconclusive", reasons + "." + tail
    alone = [i for i, c in enumerate(checks) if c["outcome"] == "holds" and not cplan.claim.checks[i].get("supporting")]
    if not alone:
        why = "; ".join(f"{c['description']}: {cplan.claim.checks[c['index']]['supporting']}" for c in judged)
        return "inconclusive", f"only checks that cannot carry the claim alone hold: {why}." + tail
    dropped = [f"{c['description']}: {c['reason']}" for c in judged if c.get("uninformative")]
    tail = (" " + "; ".join(dropped) + "." if dropped else "") + tail
    off = []
    for name, s in series.items():
        pm = cplan.measurements.get(name)  # a curve's points carry no reported value
        if pm is None:
            continue
        reported = pm.measurement.reported.get("avg")
        if pm.unjudged_magnitude or reported is None:
            continue
        avg = s.on("avg", list(s.point))[0]
        if abs(avg - reported) > tolerance:
            off.append(f"{name} {avg:.2f} vs {reported:.2f}")
    if off:
        return "direction-holds", f"the relations hold, but magnitudes are off by more than {tolerance}: {', '.join(off)}." + tail
    with_values = [cplan.measurements[n] for n in series if n in cplan.measurements]
    with_values = [pm for pm in with_values if pm.measurement.reported]
    if not any(not pm.unjudged_magnitude for pm in with_values):
        cut = sorted({pm.magnitudes for pm in with_values if pm.magnitudes and not pm.substitute})
        if cut:  # a tier with cut budgets (plmclaims.magnitudes)
            return "reproduced", f"relations only: magnitudes are not judged here ({'; '.join(cut)})." + tail
        return "reproduced", "relations only: magnitudes are not judged on this tier's substitute assets." + tail
    return "reproduced", "relations hold and magnitudes are within tolerance." + tail
