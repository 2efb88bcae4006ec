"""STS12-16, STS Benchmark and SICK-R through one interface, from a local data root or the hub.

Local layout is SentEval's (``<root>/STS/STS12-en-test/...``, ``<root>/SICK/...``), which holds two
text forms: ``tokenised`` (SentEval's Moses-tokenised, lower-cased ``STS.input.*`` files) and ``raw``
(the original release files kept beside them). The hub source reads the datasets MTEB uses; its
text is raw, and its tokenised form is produced with sacremoses plus lower-casing (an approximation
of SentEval's script, recorded in the dataset's ``form_note``).

Unscored pairs (blank gold) are skipped, the known pair counts are asserted, and the sha256 of every
file read is recorded so that a run's provenance names the exact bytes it scored.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..provenance import sha256_file

STS_YEARS = {
    "STS12": ("STS12-en-test", "test-gold", ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]),
    "STS13": ("STS13-en-test", "test-gs", ["FNWN", "headlines", "OnWN"]),
    "STS14": ("STS14-en-test", "sts-en-test-gs-2014", ["deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"]),
    "STS15": ("STS15-en-test", "test_evaluation_task2a", ["answers-forums", "answers-students", "belief", "headlines", "images"]),
    "STS16": ("STS16-en-test", "sts2016-english-with-gs-v1.0", ["answer-answer", "headlines", "plagiarism", "postediting", "question-question"]),
}
# Known scored-pair counts (SentEval layout, test split); asserted on every load.
KNOWN_COUNTS = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186,
                "STSBenchmark": 1379, "SICK-R": 4927}
SICK_ALL_COUNT = 9927  # MTEB's SICK-R scores train + trial + test
HUB_IDS = {
    "STS12": ("mteb/sts12-sts", "a0d554a64d88156834ff5ae9920b964011b16384"),
    "STS13": ("mteb/sts13-sts", "7e90230a92c190f1bf69ae9002b8cea547a64cca"),
    "STS14": ("mteb/sts14-sts", "6031580fec1f6af667f0bd2da0a551cf4f0b2375"),
    "STS15": ("mteb/sts15-sts", "ae752c7c21bf194d8b67fd573edf7ae58183cbe3"),
    "STS16": ("mteb/sts16-sts", "4d8694f8f0e0100860b497b999b3dbed754a0513"),
    "STSBenchmark": ("mteb/stsbenchmark-sts", "b0fddb56ed78048fa8b90373c8a3cfc37b684831"),
    "SICK-R": ("mteb/sickr-sts", "20a6d6f312dd54037fe07a32d58e5e168867909d"),
}
BENCHMARKS = tuple(KNOWN_COUNTS)
FORMS = ("raw", "tokenised")


@dataclass
class StsData:
    """Scored sentence pairs of one benchmark in one text form."""

    name: str
    form: str
    split: str
    sentence1: list[str]
    sentence2: list[str]
    scores: np.ndarray
    subsets: list[str]
    files: dict[str, str] = field(default_factory=dict)  # path -> sha256
    form_note: str = ""

    def __len__(self) -> int:
        return len(self.scores)

    def sentences(self) -> list[str]:
        """Unique sentences in first-seen order (what an encoder needs to embed)."""
        return list(dict.fromkeys(self.sentence1 + self.sentence2))


def _read_lines(path: Path, files: dict[str, str]) -> list[str]:
    if not path.exists():
        raise UserError(f"{path}: STS file not found; check data_root (it must hold SentEval's layout: STS/, SICK/)")
    raw = path.read_bytes()
    files[str(path)] = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:  # a few SemEval originals are latin-1
        text = raw.decode("latin-1")
    return text.splitlines()


def _senteval_year(root: Path, name: str, form: str, files: dict) -> tuple[list, list, list, list]:
    folder, raw_dir, subsets = STS_YEARS[name]
    base = root / "STS" / folder
    s1, s2, gold, subs = [], [], [], []
    for subset in subsets:
        if form == "tokenised":
            inp, gs = base / f"STS.input.{subset}.txt", base / f"STS.gs.{subset}.txt"
        elif name == "STS16":
            inp, gs = base / raw_dir / f"STS2016.input.{subset}.txt", base / raw_dir / f"STS2016.gs.{subset}.txt"
        else:
            inp, gs = base / raw_dir / f"STS.input.{subset}.txt", base / raw_dir / f"STS.gs.{subset}.txt"
        lines, golds = _read_lines(inp, files), _read_lines(gs, files)
        if len(lines) != len(golds):
            raise UserError(f"{inp}: {len(lines)} sentence pairs but {len(golds)} gold lines in {gs.name}; the files do not belong together")
        for line, g in zip(lines, golds):
            if not g.strip():
                continue  # unscored pair
            cols = line.split("\t")
            s1.append(cols[0].strip())
            s2.append(cols[1].strip())
            gold.append(float(g))
            subs.append(subset)
    return s1, s2, gold, subs


def _senteval_stsb(root: Path, form: str, split: str, files: dict):
    base = root / "STS" / "STSBenchmark"
    path = base / f"sts-{split}.csv" if form == "tokenised" else base / "stsbenchmark" / f"sts-{split}.csv"
    s1, s2, gold, subs = [], [], [], []
    for line in _read_lines(path, files):
        cols = line.split("\t")
        if len(cols) < 7:
            raise UserError(f"{path}: expected at least 7 tab-separated columns, got {len(cols)}")
        gold.append(float(cols[4]))
        s1.append(cols[5].strip())
        s2.append(cols[6].strip())
        subs.append(cols[0])
    return s1, s2, gold, subs


def _senteval_sick(root: Path, split: str, files: dict):
    names = {"train": ["SICK_train.txt"], "trial": ["SICK_trial.txt"], "test": ["SICK_test_annotated.txt"],
             "all": ["SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"]}[split]
    s1, s2, gold, subs = [], [], [], []
    for name in names:
        lines = _read_lines(root / "SICK" / name, files)
        header = lines[0].split("\t")
        try:
            ia, ib, isc = header.index("sentence_A"), header.index("sentence_B"), header.index("relatedness_score")
        except ValueError:
            raise UserError(f"{root / 'SICK' / name}: header must name sentence_A, sentence_B, relatedness_score; got {header}") from None
        for line in lines[1:]:
            cols = line.split("\t")
            if len(cols) <= isc:
                continue
            s1.append(cols[ia].strip())
            s2.append(cols[ib].strip())
            gold.append(float(cols[isc]))
            subs.append(name.split(".")[0])
    return s1, s2, gold, subs


def _tokenise_like_senteval(sentences: list[str]) -> list[str]:
    from sacremoses import MosesTokenizer

    tok = MosesTokenizer(lang="en")
    return [tok.tokenize(s, escape=False, return_str=True).lower() for s in sentences]


def load_local(root: Path | str, name: str, form: str = "tokenised", split: str = "test") -> StsData:
    """Read one benchmark from a SentEval-layout data root."""
    root = Path(root)
    _check_args(name, form, split)
    files: dict[str, str] = {}
    note = "SentEval's Moses-tokenised, lower-cased files" if form == "tokenised" else "original release text"
    if name in STS_YEARS:
        s1, s2, gold, subs = _senteval_year(root, name, form, files)
    elif name == "STSBenchmark":
        s1, s2, gold, subs = _senteval_stsb(root, form, split, files)
    else:
        s1, s2, gold, subs = _senteval_sick(root, split, files)
        note = "SentEval ships SICK untokenised; both forms read the same files"
    data = StsData(name, form, split, s1, s2, np.asarray(gold, dtype=np.float64), subs, files, note)
    _assert_count(data, source=str(root))
    return data


def load_hub(name: str, form: str = "raw", split: str = "test", hub_id: str | None = None, revision: str | None = None) -> StsData:
    """Read one benchmark through `datasets` from the hub ids MTEB uses (or a local copy of them).

    `hub_id` may be a local folder laid out like the hub repository, which is how this path is
    tested offline; the call is the same one that downloads from the hub.
    """
    import datasets

    from .. import hub

    _check_args(name, form, split)
    default_id, default_rev = HUB_IDS[name]
    hub_id = hub_id or default_id
    revision = revision if revision is not None else (default_rev if hub_id == default_id else None)
    local = hub.resolve(hub_id, "dataset", revision=revision)
    if local != hub_id:  # prefetched: read the snapshot folder, whose revision the manifest records
        hub_id, revision = local, None
    if name == "SICK-R" and split == "test":
        raise UserError(f"SICK-R split 'test': the hub copy ({default_id}) holds all {SICK_ALL_COUNT} pairs without split labels; "
                        "use split 'all' (MTEB's definition) or a local SentEval data root for the 4927 test pairs")
    hub_split = "test" if name != "STSBenchmark" else split
    try:
        ds = datasets.load_dataset(hub_id, revision=revision, split=hub_split)
    except Exception as err:  # network, missing files: name the asset and the way out
        raise UserError(f"STS {name}: could not load {hub_id!r} (revision {revision}) from the hub: {type(err).__name__}: "
                        f"{str(err).splitlines()[0] if str(err) else ''}; run 'plmclaims prefetch' online, or use a local data root") from None
    s1, s2 = [s.strip() for s in ds["sentence1"]], [s.strip() for s in ds["sentence2"]]
    files = {f"{hub_id}@{revision}:{f['filename']}": f.get("checksum") or "" for f in _cache_files(ds)}
    note = "hub text (raw)"
    if form == "tokenised":
        s1, s2 = _tokenise_like_senteval(s1), _tokenise_like_senteval(s2)
        note = "hub text tokenised with sacremoses and lower-cased (approximates SentEval's script)"
    data = StsData(name, form, split, s1, s2, np.asarray(ds["score"], dtype=np.float64), [name] * len(s1), files, note)
    _assert_count(data, source=hub_id)
    return data


def _cache_files(ds) -> list[dict]:
    out = []
    for f in getattr(ds, "cache_files", []) or []:
        path = Path(f["filename"])
        out.append({"filename": path.name, "checksum": sha256_file(path) if path.exists() else ""})
    return out


def _check_args(name: str, form: str, split: str) -> None:
    if name not in KNOWN_COUNTS:
        raise UserError(f"STS benchmark {name!r} unknown; allowed values: {', '.join(BENCHMARKS)}")
    if form not in FORMS:
        raise UserError(f"text form {form!r} unknown; allowed values: {', '.join(FORMS)}")
    allowed = {"STSBenchmark": ("train", "dev", "test"), "SICK-R": ("train", "trial", "test", "all")}.get(name, ("test",))
    if split not in allowed:
        raise UserError(f"{name}: split {split!r} not available; allowed values: {', '.join(allowed)}")


def _assert_count(data: StsData, source: str) -> None:
    expected = None
    if data.split == "test":
        expected = KNOWN_COUNTS[data.name]
    elif data.name == "SICK-R" and data.split == "all":
        expected = SICK_ALL_COUNT
    elif data.name == "STSBenchmark":
        expected = {"train": 5749, "dev": 1500}[data.split]
    if expected is not None and len(data) != expected:
        raise UserError(f"{source}: {data.name} ({data.split}, {data.form}) has {len(data)} scored pairs, expected {expected}; "
                        "the data root is incomplete or a different release")


def load(source: dict, name: str, form: str, split: str = "test", data_root: Path | str | None = None) -> StsData:
    """Dispatch on a tier's data source: {'source': 'local', 'path': ...} or {'source': 'hub'}."""
    if source["source"] == "local":
        path = Path(str(source["path"]).format(data_root=data_root)) if data_root is not None else Path(source["path"])
        return load_local(path, name, form, split)
    return load_hub(name, form, split, hub_id=source.get("ids", {}).get(name))
