"""Training text for the sentence-embedding objectives: sentences and whole documents.

The paper tier trains on SimCSE's wiki1m (10^6 English Wikipedia sentences, one a line, in the hub dataset
princeton-nlp/datasets-for-simcse), read through plmclaims.hub: the prefetched folder, checked against its manifest, or
online the file at the pinned commit. The micro tier has no network, so every contrastive objective trains on the text
the micro-BERT was pre-trained on: Penn Treebank (``treebank``) plus the English Wikipedia extract in gensim's test
data. DeCLUTR samples spans from documents, so the Wikipedia articles are also kept whole (a Treebank line has no
document around it; wiki1m's documents are runs of consecutive lines, see wiki1m_documents).

The readers here are the ones ``plmclaims.models.microbert.build_corpus`` reads the same text with: the data layer
sits below the models, so the readers live here and the pre-training corpus imports them (tests/test_microbert.py
checks that the pre-training corpus keeps the hash its published runs recorded).
"""
from __future__ import annotations

import bz2
import functools
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import seeded_subset
from ..errors import UserError
from ..provenance import sha256_file

SOURCES = ("ptb-train", "gensim-enwiki", "wiki1m", "wikitext-103")
DEFAULT_SOURCES = ("ptb-train", "gensim-enwiki")  # a spec without sources: the offline text, never a download
HUB_SOURCES = ("wiki1m", "wikitext-103")  # read from the hub; a spec names at most one (its `hub` and `revision`)
SPEC_KEYS = {"sources", "max_sentences", "seed", "min_document_words", "hub", "revision", "document_lines"}
WIKI1M_ID = "princeton-nlp/datasets-for-simcse"
WIKI1M_FILE = "wiki1m_for_simcse.txt"
# wiki1m's one line a sentence has no article boundaries: DeCLUTR's documents are runs of this many consecutive lines
# (~800 words, room for an anchor of DeCLUTR's own 512-token spans and its positives; the paper tier's 32 tokens need far
# less). Consecutive lines of the file are not one article, so a span may cross into an unrelated sentence.
WIKI1M_DOCUMENT_LINES = 32
WIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
# WikiText-103 (Merity et al. 2017), whole Wikipedia articles: the documents DeCLUTR's own README preprocesses for
# training (scripts/preprocess_wikitext_103.py: articles without their section titles, at least 2048 words), standing in
# for the paper's OpenWebText, which no pinned hub release carries
WIKITEXT_ID = "Salesforce/wikitext"
WIKITEXT_CONFIG = "wikitext-103-raw-v1"
ARTICLE_TITLE = re.compile(r"^ = [^=].* = $")  # ' = Title = ' opens an article; ' = = Section = = ' is inside one
SECTION_TITLE = re.compile(r"^ (= ){2,}.*( =){2,} $")


@dataclass
class Corpus:
    sentences: list[str]
    documents: list[list[str]]  # each a document's sentences in order (DeCLUTR's span sampling)
    provenance: dict = field(default_factory=dict)


def wiki_path() -> Path:
    from gensim.test.utils import datapath

    return Path(datapath(WIKI_FILE))


@functools.lru_cache(maxsize=2)  # parsing the extract takes seconds; every objective of a run reads it
def wiki_articles(path: Path) -> tuple[tuple[str, ...], ...]:
    """The sentences of each article of a gensim Wikipedia extract, articles in file order (empty ones kept, so that
    flattening gives exactly microbert's pre-training sentences)."""
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    articles = []
    with bz2.open(path) as f:
        for _title, text, _pid in extract_pages(f):
            out = []
            for para in filter_wiki(text).split("\n"):
                para = re.sub(r"'{2,}|\[\[|\]\]|=+", " ", para).strip()
                for sent in re.split(r"(?<=[.!?])\s+", para):
                    if len(sent.split()) >= 5 and not sent.startswith(("|", "{", "*", "!")):
                        out.append(" ".join(sent.split()))
            articles.append(tuple(out))
    return tuple(articles)


def ptb_sentences(text: str) -> list[str]:
    """Penn Treebank lines as sentences; '<unk>' becomes the tokenizer's '[UNK]' as in the micro-BERT's corpus."""
    return [" ".join(line.replace("<unk>", "[UNK]").split()) for line in text.split("\n") if line.strip()]


def wiki1m_asset(spec: dict) -> tuple[str, str | None]:
    """(hub dataset id, revision) of a spec's wiki1m: `hub` (default the SimCSE release) at `revision` (None: main)."""
    return spec.get("hub", WIKI1M_ID), spec.get("revision")


def hub_asset(spec: dict) -> tuple[str, str, str | None] | None:
    """(source, hub dataset id, revision) of the one hub source a corpus spec reads, or None."""
    hub = [s for s in spec.get("sources", DEFAULT_SOURCES) if s in HUB_SOURCES]
    if not hub:
        return None
    default = WIKI1M_ID if hub[0] == "wiki1m" else WIKITEXT_ID
    return hub[0], spec.get("hub", default), spec.get("revision")


def wikitext_articles(spec: dict) -> tuple[list[list[str]], str]:
    """WikiText-103's train articles, each a list of its paragraphs with the section titles left out (DeCLUTR's
    preprocessing), read through datasets from the prefetched folder or the hub at the pinned revision; with the
    commit read."""
    import datasets

    from .. import hub

    _, repo, revision = hub_asset(spec)
    local = hub.resolve(repo, "dataset", revision=revision)
    where, rev = (local, None) if local != repo else (repo, revision)
    try:
        ds = datasets.load_dataset(where, WIKITEXT_CONFIG, split="train", revision=rev)
    except Exception as err:  # noqa: BLE001 - any loader failure is one line naming the corpus
        raise UserError(f"corpus wikitext-103: could not load {repo!r} ({WIKITEXT_CONFIG}, revision {revision}) "
                        f"through datasets: {type(err).__name__}: {str(err)[:200]}; prefetch it: "
                        f"{hub.prefetch_command()}") from None
    articles: list[list[str]] = []
    for line in ds["text"]:
        if ARTICLE_TITLE.match(line.rstrip("\n")):
            articles.append([])
        elif articles and line.strip() and not SECTION_TITLE.match(line.rstrip("\n")):
            articles[-1].append(" ".join(line.split()))
    return articles, hub.commit(repo, "dataset", revision) or ""


def wiki1m_path(spec: dict) -> Path:
    """The wiki1m file: the prefetched folder's copy (verified against the manifest; with HF_HUB_OFFLINE=1 nothing
    else), a local folder named by `hub`, or online the one file at the pinned revision (the repository also holds
    SimCSE's NLI triples and SentEval's tarball, which a training run never reads)."""
    from .. import hub

    repo, revision = wiki1m_asset(spec)
    local = hub.resolve(repo, "dataset", revision=revision)
    if Path(local).is_dir():
        path = Path(local) / WIKI1M_FILE
        if not path.is_file():
            raise UserError(f"{path}: not found; the dataset {repo!r} must hold {WIKI1M_FILE} (SimCSE's wiki1m); "
                            f"prefetch it again: {hub.prefetch_command()}")
        return path
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo, WIKI1M_FILE, repo_type="dataset", revision=revision))
    except Exception as err:  # noqa: BLE001 - network, auth, a revision or file the repository lacks: name the corpus
        why = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:200]
        raise UserError(f"corpus wiki1m: could not download {WIKI1M_FILE} of dataset {repo!r} at revision {revision}: "
                        f"{why}; or prefetch it: {hub.prefetch_command()}") from None


def wiki1m_lines(path: Path) -> list[str]:
    """One sentence a line, as SimCSE reads the file; empty lines dropped."""
    with open(path, encoding="utf-8") as f:
        return [s for s in (line.strip() for line in f) if s]


def wiki1m_documents(lines: list[str], size: int, min_words: int) -> list[list[str]]:
    """Runs of `size` consecutive lines as documents (wiki1m has no article boundaries), each with min_words words."""
    chunks = (lines[i:i + size] for i in range(0, len(lines), size))
    return [c for c in chunks if sum(len(s.split()) for s in c) >= min_words]


def sha_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def load_corpus(spec: dict | None = None) -> Corpus:
    """The training corpus of a spec {sources, max_sentences, seed, min_document_words} (all optional; a wiki1m source
    also reads `hub`, `revision` and `document_lines`).

    max_sentences caps the sentences with a fixed seeded sample (kept in corpus order, so the sample does not depend on
    the training order); documents are the Wikipedia articles (wiki1m: runs of document_lines consecutive lines) with at
    least min_document_words words (DeCLUTR needs room for an anchor and its positives), never sampled: spans are drawn
    inside them.
    """
    spec = dict(spec or {})
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise KeyError(f"corpus spec keys {sorted(unknown)} unknown; allowed: {sorted(SPEC_KEYS)}")
    sources = list(spec.get("sources", DEFAULT_SOURCES))
    bad = [s for s in sources if s not in SOURCES]
    if bad:
        raise KeyError(f"corpus sources {bad} unknown; allowed: {list(SOURCES)}")
    if sum(s in HUB_SOURCES for s in sources) > 1:  # one `hub` and `revision` per spec
        raise KeyError(f"corpus sources {sources}: at most one of {list(HUB_SOURCES)} (each reads the spec's revision)")
    sentences, counts, shas, documents = [], {}, {}, []
    min_words = int(spec.get("min_document_words", 128))
    if "ptb-train" in sources:
        import treebank

        ptb = ptb_sentences(treebank.penn["train"])
        sentences += ptb
        counts["ptb-train"] = len(ptb)
        shas["treebank:penn/train"] = sha_text(treebank.penn["train"])
    if "gensim-enwiki" in sources:
        path = wiki_path()
        articles = wiki_articles(path)
        wiki = [s for a in articles for s in a]
        sentences += wiki
        counts["gensim-enwiki"] = len(wiki)
        shas[str(path)] = sha256_file(path)
        documents += [list(a) for a in articles if sum(len(s.split()) for s in a) >= min_words]
    if "wiki1m" in sources:
        repo, revision = wiki1m_asset(spec)
        path = wiki1m_path(spec)
        wiki = wiki1m_lines(path)
        sentences += wiki
        counts["wiki1m"] = len(wiki)
        # the commit read: the prefetch manifest's (an unpinned prefetch records what main pointed to), else the pin
        from .. import hub

        shas[f"{repo}@{hub.commit(repo, 'dataset', revision)}:{WIKI1M_FILE}"] = sha256_file(path)
        documents += wiki1m_documents(wiki, int(spec.get("document_lines", WIKI1M_DOCUMENT_LINES)), min_words)
    if "wikitext-103" in sources:
        articles, commit = wikitext_articles(spec)
        kept = [a for a in articles if sum(len(p.split()) for p in a) >= min_words]
        sentences += [p for a in kept for p in a]
        counts["wikitext-103"] = sum(len(a) for a in kept)
        shas[f"{WIKITEXT_ID}@{commit}:{WIKITEXT_CONFIG}/train"] = sha_text("\n\n".join("\n".join(a) for a in articles))
        documents += kept
    seed = int(spec.get("seed", 0))
    keep = seeded_subset(len(sentences), spec.get("max_sentences"), seed)
    if keep is not None:
        sentences = [sentences[i] for i in keep]
    provenance = {"spec": spec, "sources": shas, "sentences_per_source": counts, "sentences": len(sentences),
                  "documents": len(documents), "document_sentences": sum(len(d) for d in documents),
                  "sha256": sha_text("\n".join(sentences)),
                  "documents_sha256": sha_text("\n\n".join("\n".join(d) for d in documents))}
    return Corpus(sentences, documents, provenance)
