"""Where a tier with cut budgets judges magnitudes.

A published value can be reached only at the budget it was measured at. A tier that cuts the paper tier's budgets
(the workstation tier) names that tier in `magnitudes.same_runs_as`: a measurement's magnitudes are judged only where
its runs are exactly those the named tier plans for it (the same run keys: a key covers the model, data, recipe,
budget, seed and sample of a run and the keys of the runs it reads, so equal keys are an equal budget). Every other
measurement trains under a cut budget (fewer seeds, epochs, steps or examples) and is judged on relations only; its
planned measurement carries the reason (PlannedMeasurement.magnitudes), which the verdict states.
"""
from __future__ import annotations

import functools
from typing import Callable

from .tiers import load_tier


def mark_cut_budgets(cplan, tier: dict, plan_measurement: Callable) -> None:
    """Set `magnitudes` (why they are not judged) on every planned measurement of `cplan` (a plan.ClaimPlan) with a
    published value whose runs are not the reference tier's own; nothing where the tier names no reference.
    `plan_measurement` is plan.plan_measurement (handed in: plan calls this module)."""
    ref_name = tier.get("magnitudes", {}).get("same_runs_as")
    if not ref_name:
        return
    ref = reference(ref_name)
    for pm in cplan.measurements.values():
        m = pm.measurement
        if pm.status == "ok" and (m.reported or m.reported_curve):
            pm.magnitudes = cut_reason(plan_measurement(cplan.claim, m, ref), pm, tier, ref)


@functools.lru_cache(maxsize=4)
def reference(name: str) -> dict:
    """The reference tier, read once per process (every claim's plan compares with it; planning does not change it)."""
    return load_tier(name)


def cut_reason(other, pm, tier: dict, ref: dict) -> str:
    """'' where the measurement's runs at `tier` (`pm`) are those `ref` plans for it (`other`), else why its magnitudes
    are not judged."""
    if other.status != "ok":
        return f"tier {ref['name']} does not run it ({other.reason})"
    mine, theirs = {r.key for r in pm.runs}, {r.key for r in other.runs}
    if mine == theirs:
        return ""
    if mine < theirs:
        return (f"tier {tier['name']} runs {len(mine)} of the {len(theirs)} runs tier {ref['name']} runs for it "
                "(fewer seeds or points: a cut budget)")
    return (f"tier {tier['name']} runs it under a budget cut from tier {ref['name']}'s (other steps, epochs, examples "
            "or samples)")
