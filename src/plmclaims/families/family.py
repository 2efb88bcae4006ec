"""What a family declares: the vocabulary its claims may use and the run kinds its rules write.

Declarations are plain data (and, where a family needs one, a small check against the tier), so the core can read
every family, built or not, without importing torch or any family's implementation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


# The parameters each training method reads (methods/*.py for encoders, lm/train.py for causal LMs); a claim's
# measurement may set these and no others (claims.PARAM_TYPES says what each must be).
LORA_PARAMS = ("r", "alpha", "dropout", "target_modules", "lr")
PREFIX_PARAMS = ("virtual_tokens", "projection", "projection_hidden", "lr")


@dataclass(frozen=True)
class Layout:
    """One run kind's place on disk. `folder` and `main` hold fields in braces: as they stand they are the Snakemake
    wildcards of the rule's output; formatted with a run's values they are its concrete path. `base` names the
    config folder (per tier) the kind lives under: 'results' or 'resources'."""

    base: str
    folder: str
    main: str  # the file whose presence means the run is done

    def pattern(self, root: str, file: str | None = None) -> str:
        return f"{root}/{self.folder}/{file or self.main}"

    def log(self, root: str, step: str = "") -> str:
        return f"{root}/logs/{self.folder}{'-' + step if step else ''}.log"


@dataclass(frozen=True)
class Family:
    """One claim family (a value of a claim's `protocol.family`).

    A built family has an implementation package (plmclaims.families.<package>: plan.py, runs.py, commands.py,
    rules.smk); a declared one only its vocabulary, so the catalog's claims validate and plan as not-run."""

    name: str
    package: str | None  # None: declared in the catalog, no rule chain yet
    evaluators: tuple[str, ...]
    metrics: tuple[str, ...]  # values of protocol.metric
    methods: tuple[str, ...]  # methods its runs implement
    planned_methods: tuple[str, ...] = ()  # catalog methods of the family not built yet: planned not-run
    benchmarks: tuple[str, ...] | None = None  # None: not checked (a family not built yet)
    benchmark_metrics: dict[str, tuple[str, ...]] = field(default_factory=dict)  # per-benchmark metrics, where narrower
    method_params: dict[str, tuple[str, ...]] = field(default_factory=dict)  # method -> parameters its runs read
    param_types: dict[str, tuple] = field(default_factory=dict)  # its own parameters: name -> (what it must be, test)
    protocol: dict[str, tuple[str, ...] | None] = field(default_factory=dict)  # field -> allowed; None: not read
    controls: bool = True  # whether claims may ask for the random-weights and lexical controls
    postprocess_methods: tuple[str, ...] = ()  # methods whose vectors take post-processing (whitening)
    layouts: dict[str, Layout] = field(default_factory=dict)  # run kind -> its place on disk
    tier_section: str | None = None  # the tier section with its budget, seeds, method defaults and skip_tasks
    trains: bool = False  # its runs train parameters (so trained-parameter ratios mean something)
    check_tier: Callable | None = None  # (claim, measurement, asset, spec, arch, tier): raise UserError if it cannot run
    # trend axis -> the method parameter a measurement sweeps along it ('all' or a list of values): such a measurement
    # is a curve, one point per value, and a trend check with `measurement:` judges its shape
    axes: dict[str, str] = field(default_factory=dict)

    @property
    def built(self) -> bool:
        return self.package is not None

    @property
    def all_methods(self) -> tuple[str, ...]:
        return self.methods + self.planned_methods

    def metrics_for(self, benchmark: str) -> tuple[str, ...]:
        return self.benchmark_metrics.get(benchmark, self.metrics)
