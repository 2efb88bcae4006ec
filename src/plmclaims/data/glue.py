"""GLUE tasks from a local data root (the original download_glue_data.py layout) or the hub (nyu-mll/glue).

Each task yields text pairs (or single sentences) with labels; the known example counts are asserted,
and the sha256 of every file read is recorded. MRPC's train.tsv in the offline copy is one row short,
so its train split is rebuilt from msr_paraphrase_train.txt minus dev_ids.tsv (3668 pairs).
Test splits are unlabelled and not loaded; claims score on dev.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from . import resolve_root

# task -> (kind, number of labels; 1 = regression)
TASKS = {"CoLA": ("single", 2), "SST-2": ("single", 2), "MRPC": ("pair", 2), "RTE": ("pair", 2),
         "STS-B": ("pair", 1), "WNLI": ("pair", 2), "QNLI": ("pair", 2), "MNLI": ("pair", 3), "QQP": ("pair", 2)}
KNOWN_COUNTS = {("CoLA", "train"): 8551, ("CoLA", "dev"): 1043, ("SST-2", "train"): 67349, ("SST-2", "dev"): 872,
                ("MRPC", "train"): 3668, ("MRPC", "dev"): 408, ("RTE", "train"): 2490, ("RTE", "dev"): 277,
                ("STS-B", "train"): 5749, ("STS-B", "dev"): 1500, ("WNLI", "train"): 635, ("WNLI", "dev"): 71,
                ("QNLI", "dev"): 5463}
HUB_ID = "nyu-mll/glue"
HUB_REVISION = "bcdcba79d07bc864c1c254ccfcedcce55bcc9a8c"  # the parquet release; pinned in many public projects
HUB_CONFIG = {"CoLA": "cola", "SST-2": "sst2", "MRPC": "mrpc", "RTE": "rte", "STS-B": "stsb", "WNLI": "wnli", "QNLI": "qnli",
              "MNLI": "mnli", "QQP": "qqp"}
RTE_LABELS = {"entailment": 0, "not_entailment": 1}


@dataclass
class GlueData:
    task: str
    split: str
    text_a: list[str]
    text_b: list[str] | None
    labels: list[float]
    files: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_labels(self) -> int:
        return TASKS[self.task][1]


def local_root(source: dict, data_root: Path | str | None) -> Path:
    """The download_glue_data.py folder of a tier's local GLUE source ({'source': 'local', 'path': '{data_root}/glue'})."""
    return resolve_root(source.get("path", "{data_root}/glue"), data_root)


def local_files(root: Path | str, task: str, split: str) -> list[Path]:
    """Every file load_local reads for one task and split (the one path logic loading and checksum verification share)."""
    root = Path(root)
    _check(task, split)
    if task == "MRPC" and split == "train":  # rebuilt from the original release (this train.tsv is one row short)
        return [root / task / "dev_ids.tsv", root / task / "msr_paraphrase_train.txt"]
    return [root / task / f"{split}.tsv"]


def _rows(path: Path, files: dict) -> list[tuple[int, list[str]]]:
    """(line number, tab-separated columns) of every non-blank line; sha256 recorded."""
    if not path.exists():
        raise UserError(f"{path}: GLUE file not found; check data_root (it must hold glue/<task>/{{train,dev}}.tsv)")
    raw = path.read_bytes()
    files[str(path)] = hashlib.sha256(raw).hexdigest()
    lines = raw.decode("utf-8-sig").split("\n")  # MRPC starts with a byte-order mark
    return [(i, line.removesuffix("\r").split("\t")) for i, line in enumerate(lines, start=1) if line.strip()]


def _fields(row: tuple[int, list[str]], need: int, what: str, path: Path) -> list[str]:
    lineno, cols = row
    if len(cols) < need:
        raise UserError(f"{path}:{lineno}: expected {need} tab-separated columns ({what}), found {len(cols)}; "
                        "fix the row or restore the release file")
    return cols


def _label(task: str, value: str, path: Path, lineno: int) -> float:
    """A gold label as a number, or a one-line error naming the allowed values."""
    if task in ("RTE", "QNLI"):
        if value in RTE_LABELS:
            return float(RTE_LABELS[value])
        allowed = ", ".join(RTE_LABELS)
    elif task == "STS-B":
        try:
            score = float(value)
        except ValueError:
            score = float("nan")
        if 0.0 <= score <= 5.0:  # refuses nan and inf too
            return score
        allowed = "a number from 0 to 5"
    else:
        if value in ("0", "1"):
            return float(value)
        allowed = "0, 1"
    raise UserError(f"{path}:{lineno}: label {value[:20]!r} not allowed; allowed values: {allowed}; fix the row or restore the release file")


def _column(header: list[str], name: str, path: Path) -> int:
    try:
        return header.index(name)
    except ValueError:
        raise UserError(f"{path}:1: header must name {name!r}; got {header}"[:300]) from None


PAIR_COLUMNS = {"MRPC": ("#1 String", "#2 String", "Quality"), "RTE": ("sentence1", "sentence2", "label"),
                "STS-B": ("sentence1", "sentence2", "score"), "WNLI": ("sentence1", "sentence2", "label"),
                "QNLI": ("question", "sentence", "label")}


def load_local(root: Path | str, task: str, split: str) -> GlueData:
    root = Path(root)
    paths, files = local_files(root, task, split), {}
    a, b, y = [], None, []
    if task == "CoLA":
        path = paths[0]
        for row in _rows(path, files):
            cols = _fields(row, 4, "source, label, author's label, sentence", path)
            y.append(_label(task, cols[1], path, row[0]))
            a.append(cols[3])
    elif task == "MRPC" and split == "train":
        ids_path, path = paths
        dev_ids = {tuple(_fields(r, 2, "#1 ID, #2 ID", ids_path)[:2]) for r in _rows(ids_path, files)}
        b = []
        for row in _rows(path, files)[1:]:
            cols = _fields(row, 5, "Quality, #1 ID, #2 ID, #1 String, #2 String", path)
            if (cols[1], cols[2]) not in dev_ids:
                y.append(_label(task, cols[0], path, row[0]))
                a.append(cols[3])
                b.append(cols[4])
    else:
        path = paths[0]
        rows = _rows(path, files)
        header, rows = (rows[0][1], rows[1:]) if rows else ([], [])
        names = ("sentence", "label") if task == "SST-2" else PAIR_COLUMNS[task]
        index = [_column(header, n, path) for n in names]
        b = None if task == "SST-2" else []
        for row in rows:
            cols = _fields(row, max(index) + 1, ", ".join(header), path)
            a.append(cols[index[0]].strip() if task == "SST-2" else cols[index[0]])
            if b is not None:
                b.append(cols[index[1]])
            y.append(_label(task, cols[index[-1]], path, row[0]))
    data = GlueData(task, split, a, b, y, files)
    _assert_count(data, str(root))
    return data


def load_hub(task: str, split: str, hub_id: str = HUB_ID) -> GlueData:
    """The same task through `datasets` (the paper tier reads MNLI, QNLI and QQP this way too)."""
    import datasets

    from .. import hub

    _check(task, split, hub=True)
    revision = HUB_REVISION if hub_id == HUB_ID else None
    source = hub.resolve(hub_id, "dataset", revision=revision)
    hub_split = {"dev": "validation_matched" if task == "MNLI" else "validation"}.get(split, split)
    try:
        ds = datasets.load_dataset(source, HUB_CONFIG[task], split=hub_split, revision=revision if source == hub_id else None)
    except Exception as err:
        raise UserError(f"GLUE {task}: could not load {hub_id!r}: {type(err).__name__}; run 'plmclaims prefetch' online, "
                        "or use a local data root") from None
    cols = [c for c in ds.column_names if c not in ("label", "idx")]
    a = ds[cols[0]]
    b = ds[cols[1]] if len(cols) > 1 else None
    data = GlueData(task, split, a, b, [float(v) for v in ds["label"]], {f"{hub_id}:{HUB_CONFIG[task]}/{hub_split}": ""})
    _assert_count(data, hub_id)
    return data


def _check(task: str, split: str, hub: bool = False) -> None:
    if task not in TASKS:
        raise UserError(f"GLUE task {task!r} unknown; allowed values: {', '.join(TASKS)}")
    if split not in ("train", "dev"):
        raise UserError(f"GLUE split {split!r}: allowed values: train, dev (test sets are unlabelled)")
    if not hub and (task, split) not in KNOWN_COUNTS:
        raise UserError(f"GLUE {task} {split} is not in the offline data (QNLI has dev only; MNLI and QQP are hub-only)")


def _assert_count(data: GlueData, source: str) -> None:
    expected = KNOWN_COUNTS.get((data.task, data.split))
    if expected is not None and len(data) != expected:
        raise UserError(f"{source}: GLUE {data.task} {data.split} has {len(data)} examples, expected {expected}; "
                        "the data root is incomplete or a different release")
