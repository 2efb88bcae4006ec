"""Universal Dependencies English EWT (CoNLL-U) and the probing tasks built from it (issue 11, T2/P1/T3).

``load`` reads one split under ``<data_root>/ud`` (``en_ewt-ud-{train,dev,test}.conllu``), keeps the basic tree
(ID, FORM, UPOS, XPOS, FEATS, HEAD, DEPREL) of every syntactic word, skips multiword-token lines (``3-4``, whose
words follow on their own lines) and empty nodes (``3.1``, enhanced graphs only), asserts the release's sentence and
word counts, and records the sha256 of the file it read. A malformed line is one ``UserError`` naming the file, the
line number and what was expected.

The task builders return plain lists and arrays so that any encoder can feed them:
``words`` (the sentences to encode, as word lists), ``index`` (which sentence and which words each example refers
to) and ``labels`` (strings). The same inputs and seed always give the same output.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UserError
from . import resolve_root

SPLITS = ("train", "dev", "test")
FILE_NAME = "en_ewt-ud-{split}.conllu"
# (sentences, syntactic words) of the UD English EWT release in the data root; asserted on every full load
KNOWN_COUNTS = {"train": (12544, 204577), "dev": (2001, 25147), "test": (2077, 25094)}
# Hewitt & Manning (2019) leave these PTB tags out of UUAS (their reporter.py); EWT carries PTB tags in XPOS
HM_PUNCT_XPOS = frozenset({"''", ",", ".", ":", "``", "-LRB-", "-RRB-"})
# Default class edges for the binned sentence tasks: np.digitize(value, edges) gives the class (0..len(edges)).
# Chosen on EWT train so that no class is tiny; the edges are part of the task and are recorded with it.
LENGTH_EDGES = (6, 11, 16, 21, 31)  # words: <6, 6-10, 11-15, 16-20, 21-30, >30
DEPTH_EDGES = (3, 4, 5, 6, 8)  # max depth (root = 1): <3, 3, 4, 5, 6-7, >7


@dataclass
class Sentence:
    sent_id: str
    words: list[str]
    upos: list[str]
    xpos: list[str]
    feats: list[dict[str, str]]
    heads: np.ndarray  # 1-based head of each word, 0 for the root (CoNLL-U HEAD)
    deprels: list[str]

    def __len__(self) -> int:
        return len(self.words)


@dataclass
class UdData:
    split: str
    sentences: list[Sentence]
    files: dict[str, str] = field(default_factory=dict)  # path -> sha256 of the bytes read

    @property
    def n_words(self) -> int:
        return sum(len(s) for s in self.sentences)


@dataclass
class ProbeTask:
    """Examples of one probing task.

    ``words[s]`` is sentence s to encode; ``index`` is (n, 1) sentence ids for sentence tasks, (n, 2)
    (sentence, word) for word tasks and (n, 3) (sentence, head word, dependent word) for pair tasks, word positions
    0-based; ``labels`` (n,) strings. ``edges`` are the class edges of a binned task; ``swaps`` are bigram shift's
    swapped positions."""

    name: str
    words: list[list[str]]
    index: np.ndarray
    labels: np.ndarray
    edges: tuple[int, ...] | None = None
    swaps: np.ndarray | None = None  # bigram shift: per sentence of ``words``, the swapped position or -1


def local_root(source: dict | None, data_root: str | Path | None) -> Path:
    """The UD folder of a tier's local source ({'source': 'local', 'path': '{data_root}/ud'} or None for that)."""
    return resolve_root((source or {}).get("path", "{data_root}/ud"), data_root)


def local_files(root: str | Path, split: str) -> list[Path]:
    """The file load reads for a split (the one path logic loading and checksum verification share)."""
    if split not in SPLITS:
        raise UserError(f"UD split {split!r} unknown; allowed values: {', '.join(SPLITS)}")
    return [Path(root) / FILE_NAME.format(split=split)]


def _fail(path: Path, line_no: int, what: str, line: str) -> UserError:
    return UserError(f"{path}:{line_no}: {what}; got {line[:80]!r}. Restore the UD English EWT release file")


def read_conllu(path: str | Path) -> list[Sentence]:
    """Every sentence of a CoNLL-U file, basic trees only (multiword tokens and empty nodes skipped)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: UD file not found; check data_root (it must hold ud/en_ewt-ud-<split>.conllu)")
    sentences, rows, sent_id, start = [], [], "", 1

    def close() -> None:
        nonlocal rows, sent_id
        if rows:
            n = len(rows)
            heads = np.array([r[5] for r in rows], dtype=np.int64)
            if (heads == 0).sum() != 1 or heads.max() > n:
                raise _fail(path, start, f"sentence {sent_id or '?'} needs one root and heads in 0..{n}",
                            " ".join(map(str, heads.tolist())))
            try:
                depths(heads)  # a cycle would hang or mislead every tree measure downstream
            except UserError:
                raise _fail(path, start, f"sentence {sent_id or '?'} has a cycle in its heads",
                            " ".join(map(str, heads.tolist()))) from None
            sentences.append(Sentence(sent_id, [r[1] for r in rows], [r[3] for r in rows], [r[4] for r in rows],
                                      [r[6] for r in rows], heads, [r[7] for r in rows]))
        rows, sent_id = [], ""

    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            line = line.rstrip("\n").removesuffix("\r")
            if not line.strip():
                close()
                continue
            if line.startswith("#"):
                if line.startswith("# sent_id = "):
                    sent_id = line[len("# sent_id = "):].strip()
                continue
            cols = line.split("\t")
            if len(cols) != 10:
                raise _fail(path, line_no, f"expected 10 tab-separated CoNLL-U fields, found {len(cols)}", line)
            if "-" in cols[0] or "." in cols[0]:  # multiword token range or empty node: not a basic-tree word
                continue
            if not rows:
                start = line_no
            if not cols[0].isdigit() or int(cols[0]) != len(rows) + 1:
                raise _fail(path, line_no, f"word ID must be {len(rows) + 1} (IDs count 1, 2, ... in a sentence)", line)
            if not cols[6].isdigit():
                raise _fail(path, line_no, "HEAD must be a word ID or 0", line)
            try:
                feats = {} if cols[5] == "_" else dict(kv.split("=", 1) for kv in cols[5].split("|"))
            except ValueError:
                raise _fail(path, line_no, "FEATS must be _ or Name=Value pairs joined by |", line) from None
            rows.append((int(cols[0]), cols[1], cols[2], cols[3], cols[4], int(cols[6]), feats, cols[7]))
        close()  # a last sentence without a blank line after it
    return sentences


def load(data_root: str | Path | None, split: str, source: dict | None = None, check_counts: bool = True) -> UdData:
    """One EWT split from the data root; the release counts are asserted unless check_counts is False."""
    (path,) = local_files(local_root(source, data_root), split)
    sentences = read_conllu(path)
    data = UdData(split, sentences, {str(path): hashlib.sha256(path.read_bytes()).hexdigest()})
    if check_counts and (len(sentences), data.n_words) != KNOWN_COUNTS[split]:
        raise UserError(f"{path}: {len(sentences)} sentences and {data.n_words} words, expected "
                        f"{KNOWN_COUNTS[split][0]} and {KNOWN_COUNTS[split][1]} (UD English EWT {split}); "
                        "restore the release file")
    return data


# ---------------------------------------------------------------- tree helpers (pure numpy, no scipy in this layer)

def depths(heads: np.ndarray) -> np.ndarray:
    """Depth of each word in its tree: the root is 1, its dependents 2, and so on."""
    heads = np.asarray(heads)
    out = np.zeros(len(heads), dtype=np.int64)
    for i in range(len(heads)):
        d, j = 1, i
        while heads[j] != 0:
            j, d = heads[j] - 1, d + 1
            if d > len(heads):
                raise UserError(f"heads {heads.tolist()} contain a cycle; a dependency tree has none")
        out[i] = d
    return out


# ---------------------------------------------------------------- probing tasks

def _task(name, sentences, index, labels, edges=None) -> ProbeTask:
    width = 1 if not index else len(index[0])
    return ProbeTask(name, [list(s.words) for s in sentences], np.array(index, dtype=np.int64).reshape(-1, width),
                     np.array(labels, dtype=object).astype(str), edges)


def upos_task(sentences: list[Sentence]) -> ProbeTask:
    """Universal POS tag of every word."""
    index = [(s, i) for s, sent in enumerate(sentences) for i in range(len(sent))]
    return _task("upos", sentences, index, [sentences[s].upos[i] for s, i in index])


def dependency_task(sentences: list[Sentence], subtypes: bool = True) -> ProbeTask:
    """Relation label of every (head, dependent) arc, root arcs excluded (the root has no head word).

    With subtypes=False a label keeps only its universal part (``nmod:poss`` -> ``nmod``)."""
    index, labels = [], []
    for s, sent in enumerate(sentences):
        for i, (h, rel) in enumerate(zip(sent.heads, sent.deprels)):
            if h:
                index.append((s, int(h) - 1, i))
                labels.append(rel if subtypes else rel.split(":")[0])
    return _task("dependency", sentences, index, labels)


def length_task(sentences: list[Sentence], edges: tuple[int, ...] = LENGTH_EDGES) -> ProbeTask:
    """Sentence length in words, binned: class = np.digitize(length, edges)."""
    lengths = [len(s) for s in sentences]
    return _task("length", sentences, [(s,) for s in range(len(sentences))],
                 np.digitize(lengths, edges).astype(str), tuple(edges))


def depth_task(sentences: list[Sentence], edges: tuple[int, ...] = DEPTH_EDGES) -> ProbeTask:
    """Maximum depth of the dependency tree (root = 1), binned: class = np.digitize(depth, edges)."""
    values = [int(depths(s.heads).max()) for s in sentences]
    return _task("depth", sentences, [(s,) for s in range(len(sentences))],
                 np.digitize(values, edges).astype(str), tuple(edges))


def _main_feature(sent: Sentence, feature: str, via: tuple[str, ...]) -> tuple[int, str] | None:
    """(word, value) of `feature` on the root, else on its first dependent whose relation is in `via`."""
    root = int(np.flatnonzero(sent.heads == 0)[0])
    if feature in sent.feats[root]:
        return root, sent.feats[root][feature]
    for i, (h, rel) in enumerate(zip(sent.heads, sent.deprels)):
        if h == root + 1 and rel.split(":")[0] in via and feature in sent.feats[i]:
            return i, sent.feats[i][feature]
    return None


def tense_task(sentences: list[Sentence]) -> ProbeTask:
    """Tense of the main clause (SentEval's Tense on UD features): the root's Tense feature, else that of its
    auxiliary or copula (``is`` in "it is fine"); sentences with neither are left out. index = (sentence, word
    that carries the tense)."""
    index, labels = [], []
    for s, sent in enumerate(sentences):
        found = _main_feature(sent, "Tense", ("aux", "cop"))
        if found:
            index.append((s, found[0]))
            labels.append(found[1])
    return _task("tense", sentences, index, labels)


def subject_number_task(sentences: list[Sentence]) -> ProbeTask:
    """Number of the main clause's subject (SentEval's SubjNum on UD features): the Number feature of the root's
    first nsubj/nsubj:pass dependent; sentences without one, or whose subject's Number is not Sing or Plur
    (EWT has a few plurale tantum 'Ptan'), are left out.
    index = (sentence, subject word)."""
    index, labels = [], []
    for s, sent in enumerate(sentences):
        root = int(np.flatnonzero(sent.heads == 0)[0]) + 1
        for i, (h, rel) in enumerate(zip(sent.heads, sent.deprels)):
            if h == root and rel in ("nsubj", "nsubj:pass"):
                if sent.feats[i].get("Number") in ("Sing", "Plur"):
                    index.append((s, i))
                    labels.append(sent.feats[i]["Number"])
                break
    return _task("subject_number", sentences, index, labels)


def bigram_shift_pairs(sent: Sentence) -> list[int]:
    """Positions i where words i and i+1 may be swapped for bigram shift: neither is punctuation (UPOS PUNCT) and the
    two forms differ. Punctuation is left out so that a shift reorders words, not a word and a comma or the final
    full stop (a surface cue any reader of the sentence's end would see); equal forms would swap to the same text."""
    return [i for i in range(len(sent) - 1)
            if "PUNCT" not in (sent.upos[i], sent.upos[i + 1]) and sent.words[i] != sent.words[i + 1]]


def bigram_shift_task(sentences: list[Sentence], seed: int = 0, swaps: np.ndarray | None = None) -> ProbeTask:
    """SentEval's BShift (Conneau et al. 2018): in a seeded half (rounded down) of the usable sentences two adjacent
    words are swapped (label 'I', inverted), the others stay as they are ('O'); chance is 0.5. A sentence is usable
    when it has a pair bigram_shift_pairs allows; the position is drawn uniformly among those pairs; sentences with
    none are left out of ``index`` (their ``words`` stay as they are).

    ``words[s]`` is sentence s as it is to be encoded (swapped where shifted); ``index`` (n, 1) the usable
    sentences; ``swaps[s]`` the position i whose words i, i+1 were swapped, -1 where none was. Given ``swaps`` (the
    encode's record of what it encoded), the task is rebuilt from them instead of drawn."""
    usable = [s for s, sent in enumerate(sentences) if bigram_shift_pairs(sent)]
    if swaps is None:
        rng = np.random.default_rng(seed)
        swaps = np.full(len(sentences), -1, dtype=np.int64)
        for s in sorted(rng.permutation(usable)[: len(usable) // 2].tolist()):
            pairs = bigram_shift_pairs(sentences[s])
            swaps[s] = pairs[rng.integers(len(pairs))]
    swaps = np.asarray(swaps, dtype=np.int64)
    if len(swaps) != len(sentences):
        raise ValueError(f"{len(swaps)} swap positions for {len(sentences)} sentences")
    words = []
    for sent, i in zip(sentences, swaps):
        w = list(sent.words)
        if i >= 0:
            w[i], w[i + 1] = w[i + 1], w[i]
        words.append(w)
    labels = np.array(["I" if swaps[s] >= 0 else "O" for s in usable], dtype=str)
    return ProbeTask("bigram_shift", words, np.array(usable, dtype=np.int64).reshape(-1, 1), labels, swaps=swaps)


TASKS = {"upos": upos_task, "dependency": dependency_task, "length": length_task, "depth": depth_task,
         "tense": tense_task, "subject_number": subject_number_task, "bigram_shift": bigram_shift_task}
