"""The verdict engine: a claim's checks decided on run metrics with a paired bootstrap, above the measurements' floors.

Modules, each one concern: records (the typed records and the check vocabulary), evidence (loading runs, pairing
them, the bootstrap over items and seeds), floors (chance, twins, lexical and zero-shot controls), relations (two or
more measurements compared, or a magnitude against its published value), curves (shapes along an axis), summary (what
a verdict shows of its measurements), claim (the claim's word from its checks).
"""
from .claim import decide_claim, error_verdict
from .curves import curve_shape, expected_position, ordered_peaks
from .evidence import load_run
from .records import VERDICTS, EvidenceError
from .summary import mark_unverified_data, runs_provenance

__all__ = ["VERDICTS", "EvidenceError", "curve_shape", "decide_claim", "error_verdict", "expected_position", "load_run",
           "mark_unverified_data", "ordered_peaks", "runs_provenance"]
