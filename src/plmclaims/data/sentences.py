"""Offline training text for the sentence-embedding objectives: sentences and whole documents.

The micro tier has no wiki1m, so every contrastive objective trains on the text the micro-BERT was pre-trained on:
Penn Treebank (``treebank``) plus the English Wikipedia extract in gensim's test data. DeCLUTR samples spans from
documents, so the Wikipedia articles are also kept whole (a Treebank line has no document around it).

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
from ..provenance import sha256_file

SOURCES = ("ptb-train", "gensim-enwiki")
SPEC_KEYS = {"sources", "max_sentences", "seed", "min_document_words"}
WIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


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


def sha_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def load_corpus(spec: dict | None = None) -> Corpus:
    """The training corpus of a spec {sources, max_sentences, seed, min_document_words} (all optional).

    max_sentences caps the sentences with a fixed seeded sample (kept in corpus order, so the sample does not depend on
    the training order); documents are the Wikipedia articles with at least min_document_words words (DeCLUTR needs
    room for an anchor and its positives), never sampled: spans are drawn inside them.
    """
    spec = dict(spec or {})
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise KeyError(f"corpus spec keys {sorted(unknown)} unknown; allowed: {sorted(SPEC_KEYS)}")
    sources = list(spec.get("sources", SOURCES))
    bad = [s for s in sources if s not in SOURCES]
    if bad:
        raise KeyError(f"corpus sources {bad} unknown; allowed: {list(SOURCES)}")
    sentences, counts, shas, documents = [], {}, {}, []
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
        min_words = int(spec.get("min_document_words", 128))
        documents = [list(a) for a in articles if sum(len(s.split()) for s in a) >= min_words]
    seed = int(spec.get("seed", 0))
    keep = seeded_subset(len(sentences), spec.get("max_sentences"), seed)
    if keep is not None:
        sentences = [sentences[i] for i in keep]
    provenance = {"spec": spec, "sources": shas, "sentences_per_source": counts, "sentences": len(sentences),
                  "documents": len(documents), "document_sentences": sum(len(d) for d in documents),
                  "sha256": sha_text("\n".join(sentences)),
                  "documents_sha256": sha_text("\n\n".join("\n".join(d) for d in documents))}
    return Corpus(sentences, documents, provenance)
