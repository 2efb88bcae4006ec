"""The random-weights twin under a relation: what pre-training did, not what the architecture does anyway.

A relation about a pre-trained model is credited only when it is not also the untrained network's: where every side
has its random-weights twin and the same relation holds on the twins (a random network is anisotropic too, whitening
lifts its vectors too), the trained model's effect must be significantly larger than the twin's, on the same paired
resamples. Each side being above its twin is the floors' business (floors.Floors); this is the relation's.
"""
from __future__ import annotations

import math

from .evidence import Evidence, decide
from .records import Detail, Series


def contrast(d: Detail, twin_d: Detail, ev: Evidence, on: str) -> Detail:
    """`d` (the trained model's relation, holding) against the same statistic on the twins (`twin_d`): unchanged when
    the twin's relation does not hold; otherwise holds only if trained minus twin is above 0."""
    record = {"outcome": twin_d.outcome, "estimate": twin_d.estimate, "ci_low": twin_d.ci_low, "ci_high": twin_d.ci_high}
    d.extra = {**d.extra, "twin": record}
    if twin_d.outcome != "holds" or d.outcome != "holds":
        return d
    stronger = decide(d.samples - twin_d.samples, d.estimate - twin_d.estimate, ev, 0.0, on)
    record["stronger"] = {"estimate": stronger.estimate, "ci_low": stronger.ci_low, "ci_high": stronger.ci_high}
    if stronger.outcome != "holds":
        d.outcome = "inconclusive"
        d.reason = (f"the random-weights twin shows the same relation ({_interval(twin_d)}), and the trained model's is "
                    f"not significantly stronger (trained minus twin {_interval(stronger)})")
    return d


def twin_series(names: list[str], random: dict[str, Series]) -> dict[str, Series] | None:
    """The twins of every side, or None when a side has none (a static-vector or lexical side, a trained method)."""
    if not names or any(n not in random for n in names):
        return None
    return {n: random[n] for n in names}


def _interval(d: Detail) -> str:
    if d.ci_low is None or math.isnan(d.ci_low):
        return f"{d.estimate:+.2f}"
    return f"{d.estimate:+.2f} [{d.ci_low:+.2f}, {d.ci_high:+.2f}]"
