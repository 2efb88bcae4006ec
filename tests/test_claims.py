"""Claims are validated data: every malformed file gives one line naming file, field and allowed values."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from plmclaims.claims import load_claim, load_claims
from plmclaims.errors import UserError

GOOD = "replications/sts/glove-avg-beats-bert-avg.yaml"


def test_all_shipped_claims_validate(repo):
    claims = load_claims(repo / "replications")
    assert {c.id for c in claims} >= {"sts/glove-avg-beats-bert-avg", "sts/whitening-improves-bert", "sts/released-checkpoint-reproduces"}
    for c in claims:
        assert c.data.get("seed_relation") == "harness" or c.data["seed_point"][0] in "TP"
        assert c.checks and c.measurements


def _write(tmp_path: Path, repo: Path, mutate) -> Path:
    data = yaml.safe_load((repo / GOOD).read_text())
    mutate(data)
    path = tmp_path / "sts" / "glove-avg-beats-bert-avg.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("mutate, field, fragment", [
    (lambda d: d["protocol"].update(aggregation="median"), "protocol.aggregation", "allowed values: all, wmean, mean"),
    (lambda d: d["protocol"].update(text_form="lowercase"), "protocol.text_form", "allowed values: raw, tokenised"),
    (lambda d: d.update(seed_point="T99"), "seed_point", "does not match"),
    (lambda d: d["measurements"]["bert_avg"].update(method="max-pool"), "measurements.bert_avg.method", "allowed values: mean"),
    (lambda d: d["measurements"]["bert_avg"]["reported"].update(STS12="high"), "measurements.bert_avg.reported.STS12", "expected type number"),
    (lambda d: d.pop("checks"), "<top level>", "'checks' is required"),
    (lambda d: d["checks"][1].update(type="beats"), "checks.1.type", "allowed values: reproduces, greater"),
    (lambda d: d["checks"][1].update(margin="big"), "checks.1.margin", "expected type number"),
    (lambda d: d["checks"][1].update(a="bert_max"), "checks.1", "allowed values: bert_avg, bert_cls, glove_avg"),
    (lambda d: d["checks"][1].update(target="STS99"), "checks.1.target", "allowed values:"),
    (lambda d: d["protocol"].update(benchmarks=["STS12", "MSRP"]), "protocol.benchmarks.1", "allowed values:"),
    (lambda d: d.update(id="sts/other-name"), "id", "the file's path"),
    (lambda d: d.update(colour="blue"), "<top level>", "allowed fields:"),
])
def test_malformed_claim_names_file_field_and_allowed(tmp_path, repo, mutate, field, fragment):
    path = _write(tmp_path, repo, mutate)
    with pytest.raises(UserError) as err:
        load_claim(path, tmp_path)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(str(path))
    assert f"field '{field}'" in msg
    assert fragment in msg


def test_yaml_syntax_error_is_one_line(tmp_path):
    path = tmp_path / "sts" / "broken.yaml"
    path.parent.mkdir()
    path.write_text("id: sts/broken\nstatement: [unclosed\n")
    with pytest.raises(UserError, match=r"broken.yaml: line \d+ is not valid YAML"):
        load_claim(path)


def test_cli_validate_exits_2_with_one_line_and_no_traceback(tmp_path, repo):
    _write(tmp_path, repo, lambda d: d["protocol"].update(similarity="jaccard"))
    res = subprocess.run([sys.executable, "-m", "plmclaims.cli", "validate", "--claims-dir", str(tmp_path), "--tier", "micro"],
                         capture_output=True, text=True, cwd=repo)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "field 'protocol.similarity'" in lines[0] and "allowed values: cosine, dot, euclidean" in lines[0]


def test_unknown_selected_claim_is_reported(repo):
    with pytest.raises(UserError, match="matches no claim"):
        load_claims(repo / "replications", ["sts/nope"])


def test_schema_expresses_catalog_families(tmp_path, repo):
    """A PEFT ratio check and a generation trend validate: the schema covers families not built yet."""
    base = yaml.safe_load((repo / GOOD).read_text())
    base.pop("models", None)  # the models name the base claim's own measurements
    peft = dict(base, id="peft/lora-matches-finetuning", seed_point="T11",
                protocol={"family": "glue", "evaluator": "glue-dev", "benchmarks": ["RTE", "SST-2"], "split": "dev", "metric": "accuracy"},
                measurements={"ft": {"role": "raw-encoder", "method": "full-finetuning", "reported": {"avg": 86.4}},
                              "lora": {"role": "raw-encoder", "method": "lora", "params": {"r": 8}, "reported": {"avg": 87.2}, "reported_params": 0.3e6}},
                checks=[{"type": "ratio", "a": "lora", "b": "ft", "ratio": 0.97, "scope": "semantic"},
                        {"type": "ratio", "a": "lora", "b": "ft", "ratio": 0.01, "quantity": "trained-params", "direction": "at-most"}],
                controls=[])
    probe = dict(base, id="generation/prefix-rises", seed_point="T12",
                 protocol={"family": "generation", "evaluator": "lm-eval", "benchmarks": ["e2e"], "split": "test", "metric": "bleu"},
                 measurements={"prefix": {"role": "causal-lm", "method": "prefix-tuning", "params": {"layers": "all"}}},
                 checks=[{"type": "trend", "measurement": "prefix", "axis": "layer", "shape": "rises"}], controls=["random-weights"])
    for d in (peft, probe):
        fam, name = d["id"].split("/")
        path = tmp_path / fam / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(d))
        assert load_claim(path, tmp_path).id == d["id"]
