"""Floors: no verdict rests on a side that carries no signal.

Every measurement on every benchmark has the metric's chance floor (the best score of a predictor that ignores its
input, computed on the resampled gold) and the family controls the claim declares (`floors:`; by default the
random-weights twin of a raw encoder, the claim's lexical controls, and the claim's zero-shot measurement for the
others). A relation is judged only when the sides it credits are above every floor on the paired bootstrap.
"""
from __future__ import annotations

from ..errors import UserError
from ..plan import ClaimPlan
from .evidence import Evidence
from .records import FloorTest, Series


class Floors:
    """Each measurement's floors: chance, its random-weights twin wherever one is planned (a claim cannot drop it: a
    side that stands for a pre-trained model must beat the same network untrained), plus the controls the claim
    declares (or the family defaults)."""

    def __init__(self, cplan: ClaimPlan, ev: Evidence, series: dict[str, Series], random: dict[str, Series],
                 lexical: dict[str, Series]):
        self.ev, self.series, self.random = ev, series, random
        claim = cplan.claim
        declared = claim.data.get("floors")
        zero_shot = [n for n, pm in cplan.measurements.items() if pm.measurement.method == "zero-shot"]
        self.of: dict[str, list[Series]] = {}
        for name in series:
            base = name.split("@")[0]
            twin = ["random-weights"] if name in random else []
            if declared is not None:
                wanted = twin + [w for w in declared.get(base, []) if w != "random-weights"]
            else:
                wanted = twin + list(lexical) + [z for z in zero_shot if z != base]
            floors = [ev.chance()]
            for w in wanted:
                if w == "random-weights" and name in random:
                    floors.append(ev.as_floor(random[name]))
                elif w in lexical:
                    floors.append(ev.as_floor(lexical[w]))
                elif w in series and w != name:
                    floors.append(ev.as_floor(Series(w, series[w].point, samples=series[w].samples,
                                                     unusable=series[w].unusable)))
                elif w in cplan.measurements and w != name:
                    continue  # a floor measurement this tier cannot run: the other floors still apply
                else:
                    allowed = ["random-weights"] * (name in random) + list(lexical) + [m for m in cplan.measurements if m != name]
                    raise UserError(f"{claim.path}: field 'floors.{name}': {w!r} is no floor this claim measures for "
                                    f"{name}; allowed values: {', '.join(allowed) or 'none (chance is always a floor)'}")
            self.of[name] = floors

    def test(self, side: str, target: str, tasks: list[str], skip: set[str] = frozenset()) -> FloorTest:
        """The side above every floor on the target? Reports the failing floor with the lowest interval, else the
        highest floor it beats. Floors that are themselves sides of the check (`skip`) are what the relation decides."""
        value, s = self.series[side].on(target, tasks)
        tests = []
        for f in self.of[side]:
            if f.name in skip:
                continue
            fv, fs = f.on(target, tasks)
            lo, hi = self.ev.ci(s - fs)
            tests.append(FloorTest(side, target, lo > 0, value, f.name, fv, lo, hi))
        failing = [t for t in tests if not t.above]
        return min(failing, key=lambda t: t.ci_low) if failing else max(tests, key=lambda t: t.floor_value)
