"""lm-evaluation-harness tasks written from the local GLUE files, so nothing is fetched at run time.

Each GLUE task becomes a zero-shot multiple-choice task: a prompt ending in "Answer:" and one
verbalised choice per label, scored by the log-likelihood of " <choice>" (lm-eval's default target
delimiter is one space). The prompt is rendered here, stored in the JSONL doc as ``prompt``, and the
YAML's ``doc_to_text`` is just ``{{prompt}}``: training (`training_examples`) and lm-eval scoring
then see exactly the same text. Each doc keeps its dev-split index as ``idx``. The `datasets` cache of
the JSON files is kept in ``<out_dir>/.datasets_cache``, not in the user's hub cache.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np

from ..data import glue, seeded_subset
from ..errors import UserError
from ..provenance import atomic_write_text

TARGET_DELIMITER = " "  # lm-eval's default: context + " " + choice

# task -> (prompt template over a=text_a, b=text_b, choices indexed by the GLUE label)
TEMPLATES: dict[str, dict] = {
    "SST-2": {"template": "{a}\nQuestion: Is this sentence positive or negative?\nAnswer:",
              "choices": ["negative", "positive"]},
    "CoLA": {"template": "{a}\nQuestion: Is this sentence grammatically acceptable? Yes or no?\nAnswer:",
             "choices": ["no", "yes"]},
    "MRPC": {"template": "Sentence 1: {a}\nSentence 2: {b}\nQuestion: Do both sentences mean the same thing? "
                         "Yes or no?\nAnswer:",
             "choices": ["no", "yes"]},
    "RTE": {"template": "{a}\nQuestion: Does this imply that \"{b}\"? Yes or no?\nAnswer:",
            "choices": ["yes", "no"]},  # label 0 = entailment
    "QNLI": {"template": "Question: {a}\nSentence: {b}\nQuestion: Does the sentence answer the question? "
                         "Yes or no?\nAnswer:",
             "choices": ["yes", "no"]},  # label 0 = entailment
    "WNLI": {"template": "{a}\nQuestion: Does this imply that \"{b}\"? Yes or no?\nAnswer:",
             "choices": ["no", "yes"]},  # label 1 = entailment
}


def task_name(task: str) -> str:
    """The lm-eval task name for a GLUE task, e.g. SST-2 -> plmclaims_sst2."""
    _check(task)
    return "plmclaims_" + re.sub(r"[^a-z0-9]", "", task.lower())


def _check(task: str) -> None:
    if task not in TEMPLATES:
        raise UserError(f"lm task {task!r} has no prompt template; allowed values: {', '.join(TEMPLATES)}")


def _glue_root(data_root: str | Path) -> Path:
    """Accept the data root (holding glue/) or the glue folder itself."""
    root = Path(data_root)
    return root / "glue" if (root / "glue").is_dir() else root


def render(task: str, text_a: str, text_b: str | None) -> str:
    """The prompt for one example (no trailing space; the choice follows after TARGET_DELIMITER)."""
    _check(task)
    return TEMPLATES[task]["template"].format(a=text_a.strip(), b=(text_b or "").strip())


def training_examples(data: glue.GlueData, task: str) -> list[tuple[str, str]]:
    """(prompt, target continuation) pairs: the gold choice with lm-eval's delimiter, e.g. " positive"."""
    _check(task)
    choices = TEMPLATES[task]["choices"]
    out = []
    for i, y in enumerate(data.labels):
        b = data.text_b[i] if data.text_b is not None else None
        out.append((render(task, data.text_a[i], b), TARGET_DELIMITER + choices[int(y)]))
    return out


def _yaml(name: str, jsonl: Path, cache: Path, choices: list[str]) -> str:
    q = json.dumps  # JSON strings are valid YAML scalars
    return "\n".join([
        f"task: {name}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    validation: {q(str(jsonl.resolve()))}",
        f"  cache_dir: {q(str(cache.resolve()))}",
        "validation_split: validation",
        "output_type: multiple_choice",
        f"doc_to_text: {q('{{prompt}}')}",
        f"doc_to_choice: {q(choices)}",
        "doc_to_target: label",
        f"target_delimiter: {q(TARGET_DELIMITER)}",
        "num_fewshot: 0",
        "metric_list:",
        "  - metric: acc",
        "    aggregation: mean",
        "    higher_is_better: true",
        "metadata:",
        "  version: 1.0",
        "",
    ])


def write_tasks(data_root: str, tasks: list[str], out_dir: Path, limit: int | None = None, seed: int = 0) -> dict:
    """Write <out_dir>/<task_name>.jsonl (dev split, or a seeded sample of `limit` docs in dev order) and .yaml."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    root = _glue_root(data_root)
    result = {"tasks": {}, "files": {}, "sources": {}, "docs": {}, "limit": limit, "seed": seed}
    for task in tasks:
        _check(task)
        dev = glue.load_local(root, task, "dev")
        keep = seeded_subset(len(dev), limit, seed)  # the same draw as every other budget subsample
        keep = np.arange(len(dev)) if keep is None else keep
        choices = TEMPLATES[task]["choices"]
        lines = []
        for i in keep.tolist():
            b = dev.text_b[i] if dev.text_b is not None else None
            doc = {"idx": i, "text_a": dev.text_a[i], "text_b": b, "label": int(dev.labels[i]),
                   "prompt": render(task, dev.text_a[i], b)}
            lines.append(json.dumps(doc, ensure_ascii=False))
        name = task_name(task)
        jsonl, yaml = out_dir / f"{name}.jsonl", out_dir / f"{name}.yaml"
        atomic_write_text(jsonl, "\n".join(lines) + "\n")
        atomic_write_text(yaml, _yaml(name, jsonl, out_dir / ".datasets_cache", choices))
        result["tasks"][task] = name
        for path in (jsonl, yaml):
            result["files"][str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        result["sources"].update(dev.files)
        result["docs"][task] = len(lines)
    return result


def read_docs(task_dir: Path, task: str) -> list[dict]:
    """The docs written for `task`, in file order."""
    path = Path(task_dir) / f"{task_name(task)}.jsonl"
    if not path.exists():
        raise UserError(f"{path}: lm task file not found; write the tasks first (write_tasks)")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
