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


def _rows(path: Path, files: dict, header: bool) -> list[list[str]]:
    if not path.exists():
        raise UserError(f"{path}: GLUE file not found; check data_root (it must hold glue/<task>/{{train,dev}}.tsv)")
    raw = path.read_bytes()
    files[str(path)] = hashlib.sha256(raw).hexdigest()
    lines = raw.decode("utf-8-sig").splitlines()  # MRPC starts with a byte-order mark
    rows = [line.split("\t") for line in lines if line.strip()]
    return rows[1:] if header else rows


def _column(header: list[str], name: str, path: Path) -> int:
    try:
        return header.index(name)
    except ValueError:
        raise UserError(f"{path}: header must name {name!r}; got {header}") from None


def load_local(root: Path | str, task: str, split: str) -> GlueData:
    root = Path(root)
    _check(task, split)
    base, files = root / task, {}
    a, b, y = [], None, []
    if task == "CoLA":
        for r in _rows(base / f"{split}.tsv", files, header=False):
            a.append(r[3])
            y.append(float(r[1]))
    elif task == "MRPC" and split == "train":
        dev_ids = {tuple(r[:2]) for r in _rows(base / "dev_ids.tsv", files, header=False)}
        b = []
        for r in _rows(base / "msr_paraphrase_train.txt", files, header=True):
            if (r[1], r[2]) not in dev_ids:
                y.append(float(r[0]))
                a.append(r[3])
                b.append(r[4])
    else:
        path = base / f"{split}.tsv"
        rows = _rows(path, files, header=False)
        header, rows = rows[0], rows[1:]
        if task == "SST-2":
            ia, il = _column(header, "sentence", path), _column(header, "label", path)
            for r in rows:
                a.append(r[ia].strip())
                y.append(float(r[il]))
        else:
            names = {"MRPC": ("#1 String", "#2 String", "Quality"), "RTE": ("sentence1", "sentence2", "label"),
                     "STS-B": ("sentence1", "sentence2", "score"), "WNLI": ("sentence1", "sentence2", "label"),
                     "QNLI": ("question", "sentence", "label")}[task]
            ia, ib, il = (_column(header, n, path) for n in names)
            b = []
            for r in rows:
                if len(r) <= max(ia, ib, il):
                    raise UserError(f"{path}: a row has {len(r)} columns, expected at least {max(ia, ib, il) + 1}")
                a.append(r[ia])
                b.append(r[ib])
                label = r[il]
                y.append(float(RTE_LABELS[label]) if task in ("RTE", "QNLI") else float(label))
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
