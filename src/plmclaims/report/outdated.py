"""Which verdicts of a published report the current claims and tier would compute from other inputs.

A published report (docs/results/<tier>/) is a finished main job's, committed. When a claim, its planned runs or
the tier's judging settings change afterwards, its verdict is outdated until the main job runs again: the report
keeps the old verdict, marks it (the `outdated` field of claims.json, shown beside the verdict in claims.md, the
README and `plmclaims list`) and says what changed, so no reader takes it for the current code's. A claim added since
the run gets a not-run row that says so. `plmclaims publish --render-only` sets the marks;
tests/test_published_report.py recomputes them independently and compares.

What counts as a change: the claim's version; the set of score runs it plans (a run's path holds its key, and the
key covers everything that can change the run's result); the part of the tier the verdict reads besides its runs
(plan.verdict_tier_view: bootstrap, judges, controls, floors, roles)."""
from __future__ import annotations

import json

ADDED = "the claim was added after this report's run"


def reasons(verdicts: list[dict], claims: list, tier: dict, results: str) -> dict[str, str]:
    """Claim id -> what changed since its verdict was computed, for every outdated verdict and every claim without
    one. `results`: where the report's run wrote its runs (<results>/<tier>, as config.yaml names it)."""
    from ..plan import plan_all, verdict_tier_view

    plans = {p.claim.id: p for p in plan_all(claims, tier)}
    shown = {v["id"]: v for v in verdicts}
    out = {cid: ADDED for cid in plans if cid not in shown}
    for cid, v in shown.items():
        if cid not in plans:
            continue
        if not v.get("provenance"):  # a row mark() added for a claim the run did not have: still not computed
            out[cid] = ADDED
            continue
        why = []
        now = plans[cid].claim.data["version"]
        if v.get("version") != now:
            why.append(f"claim version {v.get('version')} here, {now} now")
        planned = {r.path(results) for r in plans[cid].score_runs()}
        ran = set(v.get("runs") or [])
        if planned != ran:
            why.append(f"{len(planned - ran)} planned runs not in this report, {len(ran - planned)} of its runs no "
                       "longer planned")
        recorded = verdict_tier_view(plans[cid], ((v.get("provenance") or {}).get("config") or {}).get("tier") or {})
        if recorded != json.loads(json.dumps(verdict_tier_view(plans[cid], tier), default=str)):
            why.append("judged with other bootstrap, judges, controls, floors or roles than the tier's now")
        if why:
            out[cid] = "; ".join(why)
    return out


def mark(verdicts: list[dict], claims: list, tier: dict, results: str) -> list[dict]:
    """The report's verdicts with `outdated` set where reasons() names them (and cleared elsewhere), claims that are
    gone left out, and a not-run row for each claim added since; in the report's order (by id)."""
    why = reasons(verdicts, claims, tier, results)
    by_id = {v["id"]: v for v in verdicts}
    out = []
    for c in sorted(claims, key=lambda c: c.id):  # the report's order
        v = dict(by_id.get(c.id) or _added(c, tier))
        v.pop("outdated", None)
        if c.id in why:
            v["outdated"] = why[c.id]
        out.append(v)
    return out


def _added(claim, tier: dict) -> dict:
    return {"id": claim.id, "version": claim.data["version"], "seed_point": claim.data.get("seed_point"),
            "tier": tier["name"], "statement": " ".join(claim.data["statement"].split()),
            "source": claim.data["source"], "protocol": claim.data["protocol"], "verdict": "not-run",
            "note": f"Not in this report: {ADDED}; the main job computes it.", "measurements": {}, "checks": [],
            "runs": []}


def label(v: dict) -> str:
    """' (outdated)' for an outdated verdict, else ''."""
    return " (outdated)" if v.get("outdated") else ""
