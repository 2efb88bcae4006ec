"""The family registry: every claim family, built or not, is registered here and nowhere else.

A built family is a package, plmclaims/families/<package>/:
- `__init__.py` declares it (a `Family`: the benchmarks, methods, parameters, metrics and protocol values its runs
  honour, and the layouts of the run kinds its rules write); the claim schema's enums, claim validation, run
  identity and the CLI read these declarations;
- `plan.py` turns a claim's measurement into runs: `plan_measurement(claim, m, tier, pm, role)`, `data_files(run,
  tier, data_root)` for its run kinds, and optionally `controls(claim, tier)` (control runs beside the claim's own);
- `runs.py` holds the bodies of its rules; `commands.py` their CLI subcommands (`add_commands(run_cmd)`);
- `rules.smk` its Snakemake rules, which the Snakefile includes.
Adding a family adds a folder and its package name to PACKAGES; the core (claims, tiers, plan, verdicts, report)
stays as it is. Declarations import nothing above the methods layer; implementations are imported only when the
plan, the CLI or the workflow asks for them (`implementation`), so loading claims never imports torch.
"""
from __future__ import annotations

from importlib import import_module
from pathlib import Path

from .family import Family, Layout
from .unbuilt import FAMILIES as UNBUILT

PACKAGES = ("sts", "glue", "lm_tasks", "compression", "probing", "intrinsic", "transfer", "contrastive")  # built families, in the order their rules are included


def _registry() -> dict[str, Family]:
    out = {}
    for package in PACKAGES:
        fam = import_module(f"{__name__}.{package}").FAMILY
        assert fam.package == package, f"{package}: its FAMILY names package {fam.package!r}"
        out[fam.name] = fam
    for fam in UNBUILT:
        out.setdefault(fam.name, fam)
    return out


FAMILIES: dict[str, Family] = _registry()
BUILT = {name: fam for name, fam in FAMILIES.items() if fam.built}


def family(name: str) -> Family:
    return FAMILIES[name]


def implementation(name: str, module: str):
    """A built family's implementation module ('plan', 'runs' or 'commands')."""
    return import_module(f"{__name__}.{FAMILIES[name].package}.{module}")


def layouts() -> dict[str, Layout]:
    """Run kind -> layout, for every kind a built family's rules write."""
    out: dict[str, Layout] = {}
    for fam in BUILT.values():
        clash = set(out) & set(fam.layouts)
        assert not clash, f"run kinds {sorted(clash)} declared by two families"
        out.update(fam.layouts)
    return out


def family_of_kind(kind: str) -> Family | None:
    return next((f for f in BUILT.values() if kind in f.layouts), None)


def rules_files() -> list[str]:
    """The Snakemake rule files of the built families, for the Snakefile to include."""
    return [str(Path(__file__).parent / fam.package / "rules.smk") for fam in BUILT.values()]


def rule_names(files: list[str | Path] | None = None) -> list[str]:
    """The Snakemake rules defined in `files` (default: the built families' rules.smk), from their `rule <name>:` lines
    and, for a rule made once per batch of runs (`name: f"<name>_batch_{...}"`, common.smk's batches), its <name>."""
    import re

    return [m for f in (rules_files() if files is None else files)
            for m in re.findall(r'^rule (\w+):|^\s+f"(\w+)_batch_', Path(f).read_text(), re.M) for m in m if m]


def union(attr: str) -> list[str]:
    """Every value of a declaration field over all families, in registration order (the claim schema's enums)."""
    out: list[str] = []
    for fam in FAMILIES.values():
        values = fam.all_methods if attr == "methods" else getattr(fam, attr)
        out += [v for v in values if v not in out]
    return out


def schema_enums() -> dict[tuple[str, ...], list[str]]:
    """The claim schema's enums that the families own, by their path in claim.schema.json."""
    return {
        ("properties", "protocol", "properties", "family", "enum"): list(FAMILIES),
        ("properties", "protocol", "properties", "evaluator", "enum"): union("evaluators"),
        ("properties", "protocol", "properties", "metric", "enum"): union("metrics"),
        ("$defs", "measurement", "properties", "method", "enum"): union("methods"),
    }
