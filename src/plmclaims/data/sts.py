"""STS12-16, STS Benchmark and SICK-R through one interface, from a local data root or the hub.

Local layout is SentEval's (``<root>/STS/STS12-en-test/...``, ``<root>/SICK/...``), which holds two
text forms: ``tokenised`` (SentEval's Moses-tokenised, lower-cased ``STS.input.*`` files) and ``raw``
(the original release files kept beside them). The hub source reads the datasets MTEB uses; its
text is raw, and its tokenised form is produced with sacremoses plus lower-casing (an approximation
of SentEval's script, recorded in the dataset's ``form_note``).

Unscored pairs (blank gold) are skipped, the known pair counts are asserted, and the sha256 of every
file read is recorded so that a run's provenance names the exact bytes it scored. A malformed row is one
error line naming the file, the line number and what was expected. ``local_files`` is the one place that
says which files a benchmark reads; ``data.verify`` checks exactly those against the release checksums.

STS12-16 keep their subsets (SemEval's genres), over which 'wmean' and 'mean' average; STS-B and SICK-R are
one set each, as SentEval scores them, so their subsets are the benchmark's name.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..provenance import sha256_file
from . import resolve_root

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
# which of a tier's data sources each evaluator reads (tier['data'][...])
SOURCE_OF_EVALUATOR = {"senteval": "sts", "mteb": "sts_mteb"}


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


def split_for(evaluator: str, name: str) -> str:
    """MTEB's SICK-R is all 9927 pairs; SentEval's is the 4927-pair test split."""
    return "all" if (evaluator == "mteb" and name == "SICK-R") else "test"


def local_root(source: dict, data_root: Path | str | None) -> Path:
    """The SentEval-layout folder of a tier's local STS source ({'source': 'local', 'path': '{data_root}/senteval'})."""
    return resolve_root(source["path"], data_root)


def _year_files(root: Path, name: str, form: str) -> list[tuple[str, Path, Path]]:
    folder, raw_dir, subsets = STS_YEARS[name]
    base = root / "STS" / folder
    if form == "tokenised":
        return [(s, base / f"STS.input.{s}.txt", base / f"STS.gs.{s}.txt") for s in subsets]
    prefix = "STS2016" if name == "STS16" else "STS"
    return [(s, base / raw_dir / f"{prefix}.input.{s}.txt", base / raw_dir / f"{prefix}.gs.{s}.txt") for s in subsets]


def _stsb_file(root: Path, form: str, split: str) -> Path:
    base = root / "STS" / "STSBenchmark"
    return base / f"sts-{split}.csv" if form == "tokenised" else base / "stsbenchmark" / f"sts-{split}.csv"


def _sick_files(root: Path, split: str) -> list[Path]:
    names = {"train": ["SICK_train.txt"], "trial": ["SICK_trial.txt"], "test": ["SICK_test_annotated.txt"],
             "all": ["SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"]}[split]
    return [root / "SICK" / n for n in names]


def local_files(root: Path | str, name: str, form: str, split: str = "test") -> list[Path]:
    """Every file load_local reads for one benchmark, in reading order (the one path logic loading and checksum
    verification share, so the verified files are exactly the files scored)."""
    root = Path(root)
    _check_args(name, form, split)
    if name in STS_YEARS:
        return [p for _, inp, gs in _year_files(root, name, form) for p in (inp, gs)]
    if name == "STSBenchmark":
        return [_stsb_file(root, form, split)]
    return _sick_files(root, split)


def _read_lines(path: Path, files: dict[str, str]) -> list[str]:
    """The file's lines, numbered like an editor numbers them (line i is element i-1); sha256 recorded."""
    if not path.exists():
        raise UserError(f"{path}: STS file not found; check data_root (it must hold SentEval's layout: STS/, SICK/)")
    raw = path.read_bytes()
    files[str(path)] = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:  # a few SemEval originals are latin-1
        text = raw.decode("latin-1")
    # split on newlines only: str.splitlines also breaks at form feeds and U+2028, which would shift line numbers
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def _gold(value: str, path: Path, lineno: int) -> float:
    """A gold score on SemEval's 0-5 scale (SICK's 1-5 lies within it); anything else is a malformed row."""
    try:
        score = float(value)
    except ValueError:
        score = float("nan")
    if not 0.0 <= score <= 5.0:  # also refuses nan and inf
        raise UserError(f"{path}:{lineno}: gold score {value.strip()[:20]!r} is not a number from 0 to 5; "
                        "fix the row or restore the release file")
    return score


def _columns(line: str, need: int, what: str, path: Path, lineno: int) -> list[str]:
    cols = line.split("\t")
    if len(cols) < need or not all(c.strip() for c in cols[:need]):
        raise UserError(f"{path}:{lineno}: expected {what}, found {len(cols)} tab-separated column(s)"
                        f"{' with an empty one' if len(cols) >= need else ''}; fix the row or restore the release file")
    return cols


def _senteval_year(root: Path, name: str, form: str, files: dict) -> tuple[list, list, list, list]:
    s1, s2, gold, subs = [], [], [], []
    for subset, inp, gs in _year_files(root, name, form):
        lines, golds = _read_lines(inp, files), _read_lines(gs, files)
        if len(lines) != len(golds):
            raise UserError(f"{inp}: {len(lines)} sentence pairs but {len(golds)} gold lines in {gs.name}; the files do not belong together")
        for lineno, (line, g) in enumerate(zip(lines, golds), start=1):
            cols = _columns(line, 2, "two tab-separated sentences", inp, lineno)
            if not g.strip():
                continue  # unscored pair
            s1.append(cols[0].strip())
            s2.append(cols[1].strip())
            gold.append(_gold(g, gs, lineno))
            subs.append(subset)
    return s1, s2, gold, subs


def _senteval_stsb(root: Path, form: str, split: str, files: dict):
    path = _stsb_file(root, form, split)
    s1, s2, gold = [], [], []
    for lineno, line in enumerate(_read_lines(path, files), start=1):
        cols = _columns(line, 7, "7 columns (genre, file, year, id, score, sentence 1, sentence 2)", path, lineno)
        gold.append(_gold(cols[4], path, lineno))
        s1.append(cols[5].strip())
        s2.append(cols[6].strip())
    # SentEval scores STS-B as one set (its genres are not subsets), so 'all', 'wmean' and 'mean' coincide
    return s1, s2, gold, ["STSBenchmark"] * len(gold)


def _senteval_sick(root: Path, split: str, files: dict):
    s1, s2, gold = [], [], []
    for path in _sick_files(root, split):
        lines = _read_lines(path, files)
        header = lines[0].split("\t") if lines else []
        try:
            ia, ib, isc = header.index("sentence_A"), header.index("sentence_B"), header.index("relatedness_score")
        except ValueError:
            raise UserError(f"{path}:1: header must name sentence_A, sentence_B, relatedness_score; got {header}"[:300]) from None
        for lineno, line in enumerate(lines[1:], start=2):
            cols = _columns(line, len(header), f"{len(header)} columns ({', '.join(header)})", path, lineno)
            s1.append(cols[ia].strip())
            s2.append(cols[ib].strip())
            gold.append(_gold(cols[isc], path, lineno))
    # one set, as SentEval and MTEB score SICK-R (train/trial/test are files, not subsets to average over)
    return s1, s2, gold, ["SICK-R"] * len(gold)


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
    if name == "SICK-R" and split == "test":  # refused before the hub is asked: no download can make it right
        raise UserError(f"SICK-R split 'test': the hub copy ({default_id}) holds all {SICK_ALL_COUNT} pairs without split labels; "
                        "use split 'all' (MTEB's definition) or a local SentEval data root for the 4927 test pairs")
    local = hub.resolve(hub_id, "dataset", revision=revision)
    if local != hub_id:  # prefetched: read the snapshot folder, whose revision the manifest records
        hub_id, revision = local, None
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
        return load_local(local_root(source, data_root), name, form, split)
    return load_hub(name, form, split, hub_id=source.get("ids", {}).get(name))
