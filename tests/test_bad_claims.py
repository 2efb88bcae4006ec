"""The bad-claim corpus: every malformed claim file is refused by `plmclaims validate` in one line.

Each case of tests/bad_claims/EXPECTED.yaml is placed alone in a scratch claims folder and run through the real
entry point (`plmclaims.cli.main`; a few also as a subprocess, to see the interpreter's own output): exit status 2,
stderr exactly one line `plmclaims: error: <file>: ...` of at most 300 characters that names the file and holds the
expected text, no traceback, under 5 seconds. The claims folder is passed relative to the working directory, as
users pass `replications`, so the lines read as a user sees them.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from plmclaims import cli
from plmclaims.errors import UserError

CORPUS = Path(__file__).parent / "bad_claims"
EXPECTED = yaml.safe_load((CORPUS / "EXPECTED.yaml").read_text())
GOOD_STS = (CORPUS / "good" / "good-sts.yaml").read_text()
LONG_NAME = "a" * 200


def _sts(case: str, text: str = GOOD_STS) -> str:
    return text.replace("sts/good-sts", f"sts/{case}")


# cases whose bytes cannot live in a text file of the corpus: (place under the claims folder, contents)
GENERATED = {
    "latin1": ("sts/latin1.yaml", _sts("latin1").replace("on STS.", "on STS, café.").encode("latin-1")),
    "utf16": ("sts/utf16.yaml", _sts("utf16").encode("utf-16")),
    "binary": ("sts/binary.yaml", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4),
    "nul-byte": ("sts/nul-byte.yaml", _sts("nul-byte").replace("version: 1", "version: 1\x00").encode()),
    "too-large": ("sts/too-large.yaml", (_sts("too-large") + "# padding\n" * 120_000).encode()),
    "deep-nesting": ("sts/deep-nesting.yaml", ("statement: " + "[" * 5000 + "]" * 5000 + "\n" + _sts("deep-nesting")).encode()),
    "long-string-value": ("sts/long-string-value.yaml",
                          _sts("long-string-value").replace("method: mean", f"method: {'x' * 500_000}").encode()),
    "long-name": (f"sts/{LONG_NAME}.yaml", _sts(LONG_NAME).encode()),
}
SUBPROCESS_CASES = ["latin1", "utf16", "deep-nesting", "alias-bomb", "long-string-value", "long-name", "lora-on-sts"]


def _place(case: str, claims: Path) -> Path:
    """Write the case into `claims`; return the path the error line must name."""
    spec = EXPECTED[case]
    if case in GENERATED:
        rel, data = GENERATED[case]
    elif isinstance(spec, dict):
        rel, data = spec["place"], (CORPUS / spec["file"]).read_bytes()
    else:
        data = (CORPUS / f"{case}.yaml").read_bytes()
        family = next((line[4:].split("/")[0] for line in data.decode().splitlines() if line.startswith("id: ")), "sts")
        rel = f"{family}/{case}.yaml"
    path = claims / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _expect(case: str) -> str:
    spec = EXPECTED[case]
    return spec["expect"] if isinstance(spec, dict) else spec


def _named(case: str, path: Path) -> str:
    # a 200-character name is shown by its start, so that the line stays short
    return str(path.parent / LONG_NAME[:40]) if case == "long-name" else str(path)


def _check_line(case: str, rc: int, stderr: str, named: str, seconds: float) -> None:
    lines = stderr.splitlines()
    assert rc == 2, (case, rc, stderr[:500])
    assert len(lines) == 1, (case, stderr[:2000])
    line = lines[0]
    assert line.startswith(f"plmclaims: error: {named}"), (case, line)
    assert len(line) <= 300, (case, len(line), line)
    assert _expect(case) in line, (case, line)
    assert "Traceback" not in stderr
    # a guard against inputs that make loading blow up (an alias bomb expanded, a quadratic scan), not a speed test:
    # the bound leaves room for a loaded CI machine (the background workflow runs), where a CLI start alone took 4 s
    assert seconds < 20, (case, seconds)


def test_corpus_covers_every_file_and_enough_cases():
    files = {p.stem for p in CORPUS.glob("*.yaml")} - {"EXPECTED"}
    assert files <= set(EXPECTED), f"corpus files without an expected line: {sorted(files - set(EXPECTED))}"
    missing = {c for c in EXPECTED if c not in files and c not in GENERATED and not isinstance(EXPECTED[c], dict)}
    assert not missing, f"expected lines without a case: {sorted(missing)}"
    assert len(EXPECTED) >= 30


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_bad_claim_refused_in_one_line(case, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _place(case, Path("replications"))
    t0 = time.perf_counter()
    rc = cli.main(["validate", "--claims-dir", "replications", "--tier", "tiny"])
    seconds = time.perf_counter() - t0
    out = capsys.readouterr()
    _check_line(case, rc, out.err, _named(case, path), seconds)
    assert "claims valid" not in out.out


@pytest.mark.parametrize("case", SUBPROCESS_CASES)
def test_bad_claim_subprocess_has_no_traceback(case, tmp_path, repo):
    path = _place(case, tmp_path / "replications")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "plmclaims.cli", "validate", "--claims-dir", "replications", "--tier", "tiny"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=30)
    seconds = time.perf_counter() - t0
    _check_line(case, res.returncode, res.stderr, _named(case, path.relative_to(tmp_path)), seconds)


@pytest.mark.parametrize("tier", ["tiny", "micro", "paper"])
def test_shipped_and_corpus_good_claims_validate(tmp_path, repo, tier, capsys):
    """The shipped claims and the corpus's base claims (each case differs from one in one defect) pass."""
    assert cli.main(["validate", "--claims-dir", str(repo / "replications"), "--tier", tier]) == 0
    for good in (CORPUS / "good").glob("*.yaml"):
        family = yaml.safe_load(good.read_text())["id"].split("/")[0]
        (tmp_path / family).mkdir(exist_ok=True)
        (tmp_path / family / good.name).write_bytes(good.read_bytes())
    assert cli.main(["validate", "--claims-dir", str(tmp_path), "--tier", tier]) == 0
    assert capsys.readouterr().err == ""


def test_aliases_within_the_bound_still_load(tmp_path):
    """Anchors and aliases are refused only when they expand beyond the bound: a shared mapping is fine."""
    from plmclaims.schema import read_yaml

    path = tmp_path / "x.yaml"
    path.write_text("base: &b {r: 8, alpha: 16}\nlora: *b\nbigger: {<<: *b, r: 16}\n")
    assert read_yaml(path) == {"base": {"r": 8, "alpha": 16}, "lora": {"r": 8, "alpha": 16}, "bigger": {"r": 16, "alpha": 16}}


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml: only the pure-Python loader")
def test_the_libyaml_loader_reads_what_the_python_loader_reads_and_refuses_alike(repo, tmp_path):
    """Claims and tiers are read with libyaml (every job reads all the claims); the pure-Python loader stays the
    reference: the same data for every shipped file, the same refusals, and deep nesting never reaches libyaml's
    recursive composer."""
    from plmclaims import schema

    shipped = [*(repo / "replications").glob("*/*.yaml"), *(repo / "workflows" / "tiers").glob("*.yaml")]
    assert len(shipped) > 30
    for path in shipped:
        text = path.read_text()
        assert schema._nesting_within(text)  # so _load took the libyaml path
        assert schema._load(text) == yaml.load(text, Loader=schema._StrictLoader), path  # noqa: S506
    duplicate = "id: a/b\nmeta:\n  x: 1\n  x: 2\n"
    refusals = []
    for loader in (schema._FastStrictLoader, schema._StrictLoader):
        with pytest.raises(schema._Refused) as err:
            yaml.load(duplicate, Loader=loader)  # noqa: S506
        refusals.append(err.value.args)
    assert refusals[0] == refusals[1] == (4, "duplicate key 'x' (first at line 3); keep one")
    # the top-level mapping is level 1, so 23 lists inside it reach the bound and a value inside them passes it
    assert schema._nesting_within("a: " + "[" * 23 + "]" * 23 + "\n")
    for deep in ("a: " + "[" * 30 + "]" * 30 + "\n", "a: " + "[" * 23 + "1" + "]" * 23 + "\n"):
        assert not schema._nesting_within(deep)
        (tmp_path / "deep.yaml").write_text(deep)
        with pytest.raises(UserError, match="deep.yaml: line 1: nested more than 24 levels deep"):
            schema.read_yaml(tmp_path / "deep.yaml")
    (tmp_path / "bad.yaml").write_text("a: [1, 2\nb: 3\n")  # a syntax error is worded by the pure-Python loader
    with pytest.raises(UserError, match=r"bad.yaml: line \d+ is not valid YAML \(expected ',' or '\]', but got"):
        schema.read_yaml(tmp_path / "bad.yaml")


def test_the_registry_fills_the_schema_and_every_built_family_is_whole():
    """The schema file leaves the family-owned enums to the registry; every built family declares the parameters of each
    method it runs, has a planner and a subcommand per rule, and its rules write every run kind it declares."""
    from plmclaims import cli, families, stats
    from plmclaims.claims import BOOTSTRAP_METRICS
    from plmclaims.schema import load_schema

    raw = load_schema("claim")
    for path, values in families.schema_enums().items():
        node = raw
        for k in path[:-1]:
            node = node[k]
        assert "enum" not in node and values, path
    subcommands = cli.rule_commands()
    for fam in families.BUILT.values():
        assert set(fam.method_params) == set(fam.methods), fam.name
        impl = families.implementation(fam.name, "plan")
        assert callable(impl.plan_measurement) and callable(impl.data_files), fam.name
        rules = (Path(families.__file__).parent / fam.package / "rules.smk").read_text()
        for kind in fam.layouts:  # a rule per run, or one per batch of the short runs (plmclaims.batching)
            assert f'LAYOUT["{kind}"].pattern(' in rules or f'batches("{kind}")' in rules, (fam.name, kind)
        for line in rules.splitlines():
            if '"{CLI} ' in line:
                command = line.split('"{CLI} ')[1].split()
                assert command[0] in subcommands, line
                if command[0] == "batch":  # the rule command each run of the batch executes
                    assert command[3] in subcommands and command[1:3] == ["--runs", "{params.runs:q}"], line
    for name in BOOTSTRAP_METRICS:
        assert callable(stats.metric_function(name))
    with pytest.raises(ValueError):
        stats.metric_function("bleu")


def test_loading_claims_imports_no_heavy_library():
    """Every family's declaration is read when claims load, so declarations must not pull in torch, scipy or sklearn
    (validation and dry runs stay fast; one lazy import in lm/train.py keeps it so)."""
    code = "import sys, plmclaims.claims; print(sorted(m for m in ('torch', 'scipy', 'sklearn', 'peft') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_family_name_outside_the_registry_is_refused_with_the_registered_ones(tmp_path):
    from plmclaims import families
    from plmclaims.claims import load_claim

    path = tmp_path / "x.yaml"
    path.write_text(GOOD_STS.replace("family: sts", "family: stylometry"))
    with pytest.raises(UserError) as err:
        load_claim(path)
    assert "protocol.family" in str(err.value) and all(f in str(err.value) for f in list(families.FAMILIES)[:3])


@pytest.mark.slow
def test_lora_module_tables_name_real_layers():
    """Every LoRA target the tables allow is a Linear layer of that architecture (tiny random models)."""
    import torch
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model, LlamaConfig, LlamaModel

    from plmclaims.claims import LORA_MODULES

    models = {
        "bert": BertModel(BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, vocab_size=10)),
        "llama": LlamaModel(LlamaConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                        intermediate_size=8, vocab_size=10)),
        "gpt2": GPT2Model(GPT2Config(n_embd=8, n_layer=1, n_head=2, vocab_size=10, bos_token_id=0, eos_token_id=0)),
    }
    for arch, model in models.items():
        linear = {n.rpartition(".")[2] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) or type(m).__name__ == "Conv1D"}
        assert set(LORA_MODULES[arch]) <= linear, (arch, linear)
