"""Import layering: a module imports only from its own layer or below (README, 'Layers'). Function-level imports count
too: a lazy import is still a dependency."""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# lowest first; a module belongs to the entry that names it or, failing that, its package. A family's declaration
# (plmclaims.families.<f>, its __init__) sits in the registry below the core; its implementation (the package's
# modules: plan, runs, commands) sits above the core and the shared runs.
FAMILY_PACKAGES = sorted(p.name for p in (SRC / "plmclaims" / "families").iterdir() if (p / "__init__.py").exists())
LAYERS = [
    ("base", ["plmclaims.errors", "plmclaims.provenance", "plmclaims.optim", "plmclaims.stats", "plmclaims.schema",
              "plmclaims.failures", "plmclaims.hub", "plmclaims.fakehub", "plmclaims.evaluation.glue_metrics",
              "plmclaims.batching", "plmclaims.hub_family",
              "plmclaims.published", "plmclaims.recipes"]),
    ("data", ["plmclaims.data"]),
    ("methods", ["plmclaims.methods", "plmclaims.models", "plmclaims.encoders", "plmclaims.evaluation",
                 "plmclaims.training", "plmclaims.checkpoint", "plmclaims.lm", "plmclaims.decoders"]),
    ("registry", ["plmclaims.families", "plmclaims.families.family", "plmclaims.families.unbuilt",
                  *(f"plmclaims.families.{f}" for f in FAMILY_PACKAGES)]),
    ("core", ["plmclaims.claims", "plmclaims.tiers", "plmclaims.plan", "plmclaims.assets", "plmclaims.verdicts",
              "plmclaims.report", "plmclaims.costs", "plmclaims.plan_report", "plmclaims.standins",
              "plmclaims.magnitudes", "plmclaims.recipes_doc"]),
    ("runs", ["plmclaims.runs"]),
    ("families", [f"plmclaims.families.{f}.*" for f in FAMILY_PACKAGES]),
    ("top", ["plmclaims.cli"]),
]


def layer_of(module: str) -> int:
    for i, (_, members) in enumerate(LAYERS):  # exact names first: a family's declaration is not its implementation
        if module in members:
            return i
    for i, (_, members) in enumerate(LAYERS):
        if any(m.endswith(".*") and module.startswith(m[:-1]) for m in members):
            return i
    for i, (_, members) in enumerate(LAYERS):
        if any(module.startswith(m + ".") for m in members if not m.startswith("plmclaims.families")):
            return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_layers.py and to the README")


def modules() -> dict[str, Path]:
    out = {}
    for f in sorted((SRC / "plmclaims").rglob("*.py")):
        parts = f.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every plmclaims module `name` imports, at any depth of its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "plmclaims"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "plmclaims":
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & known  # `from . import plan` names a module
            found |= subs or {target}
    return {m for m in found if m != name and m != "plmclaims"}


def test_every_module_has_a_layer():
    for name in modules():
        if name != "plmclaims":
            layer_of(name)


def test_no_module_imports_one_above_it():
    mods = modules()
    wrong = []
    for name, path in mods.items():
        if name == "plmclaims":
            continue
        for dep in sorted(imports(name, path, set(mods))):
            if layer_of(dep) > layer_of(name):
                wrong.append(f"{name} ({LAYERS[layer_of(name)][0]}) imports {dep} ({LAYERS[layer_of(dep)][0]})")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_violation(tmp_path):
    """The scan must catch a lazy import of an upper layer (else the test above could pass vacuously)."""
    fake = tmp_path / "plmclaims" / "stats.py"
    fake.parent.mkdir()
    fake.write_text("def f():\n    from .plan import Run\n    from plmclaims import cli\n")
    known = set(modules())
    assert imports("plmclaims.stats", fake, known) == {"plmclaims.plan", "plmclaims.cli"}
    assert layer_of("plmclaims.plan") > layer_of("plmclaims.stats")


def test_a_family_declaration_sits_below_the_core_and_its_implementation_above():
    assert "sts" in FAMILY_PACKAGES
    assert layer_of("plmclaims.families.sts") < layer_of("plmclaims.claims") < layer_of("plmclaims.families.sts.plan")
    assert layer_of("plmclaims.runs") < layer_of("plmclaims.families.glue.runs") < layer_of("plmclaims.cli")
