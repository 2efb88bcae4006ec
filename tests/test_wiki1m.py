"""wiki1m, the paper tier's contrastive corpus: read through plmclaims.hub from the prefetched folder (offline) or at
the pinned revision (online), against the local stand-in hub serving the rehearsal's stand-in file."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakehub import FakeHub
from plmclaims import hub, standins
from plmclaims.assets import needed_assets
from plmclaims.claims import load_claims
from plmclaims.data import seeded_subset, sentences
from plmclaims.data.sentences import WIKI1M_FILE, WIKI1M_ID, load_corpus
from plmclaims.errors import UserError
from plmclaims.hub import HubAsset
from plmclaims.plan import plan_all
from plmclaims.tiers import load_tier

REPO = Path(__file__).resolve().parents[1]
REV = load_tier("paper")["contrastive"]["corpus"]["revision"]  # the paper tier's pin, so the tests read that commit


def _env(tmp_path: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "PLMCLAIMS_HUB_DIR")}
    return {**env, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_DISABLE_XET": "1", **extra}


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> Path:
    """The rehearsal's stand-in for the SimCSE dataset repository (the offline Wikipedia extract and PTB lines)."""
    folder = tmp_path_factory.mktemp("wiki1m") / WIKI1M_ID
    info = standins.build_wiki1m(folder)
    assert info["lines"] > 40000 and not standins.unsupported([HubAsset(WIKI1M_ID, "dataset", REV)])
    return folder


@pytest.fixture(scope="module")
def prefetched(standin, tmp_path_factory) -> Path:
    """The stand-in prefetched through huggingface_hub's real download code from the local hub, at the paper pin."""
    root = tmp_path_factory.mktemp("hub")
    code = ("import sys; from pathlib import Path; from plmclaims import hub; "
            f"hub.prefetch([hub.HubAsset({WIKI1M_ID!r}, 'dataset', {REV!r}, 'wiki1m')], Path(sys.argv[1]), 'paper')")
    with FakeHub({("dataset", WIKI1M_ID): standin}) as fake:
        res = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=300,
                             env=_env(root, HF_ENDPOINT=fake.url))
    assert res.returncode == 0, res.stderr[-2000:]
    return root


def test_wiki1m_is_read_from_the_prefetched_folder_offline_with_its_commit_and_sha256(prefetched, standin, monkeypatch):
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(prefetched))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    entry = json.loads((prefetched / hub.MANIFEST).read_text())["assets"][f"dataset:{WIKI1M_ID}"]
    assert entry["revision"] == REV and WIKI1M_FILE in entry["files"]
    corpus = load_corpus({"sources": ["wiki1m"], "revision": REV})
    lines = (standin / WIKI1M_FILE).read_text().splitlines()
    assert corpus.sentences == lines  # one sentence a line, in file order
    want = hashlib.sha256((standin / WIKI1M_FILE).read_bytes()).hexdigest()
    assert corpus.provenance["sources"] == {f"{WIKI1M_ID}@{REV}:{WIKI1M_FILE}": want}
    assert corpus.provenance["sentences_per_source"] == {"wiki1m": len(lines)}
    # DeCLUTR's documents: runs of consecutive lines (wiki1m has no article boundaries), short runs dropped
    size = sentences.WIKI1M_DOCUMENT_LINES
    assert corpus.documents and all(len(d) <= size for d in corpus.documents)
    assert corpus.documents[0] == lines[:size]
    assert all(sum(len(s.split()) for s in d) >= 128 for d in corpus.documents)


def test_wiki1m_sample_is_seeded_and_in_file_order(prefetched, monkeypatch):
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(prefetched))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = {"sources": ["wiki1m"], "revision": REV, "max_sentences": 300}
    full = load_corpus({"sources": ["wiki1m"], "revision": REV}).sentences
    a, b, c = load_corpus({**spec, "seed": 1}), load_corpus({**spec, "seed": 1}), load_corpus({**spec, "seed": 2})
    assert len(a.sentences) == 300 and a.sentences == b.sentences and a.sentences != c.sentences
    assert a.provenance["sha256"] == b.provenance["sha256"] != c.provenance["sha256"]
    assert a.sentences == [full[i] for i in seeded_subset(len(full), 300, 1)]  # the shared seeded sample, in file order
    assert a.documents == c.documents  # documents are never sampled: spans are drawn inside them


def test_wiki1m_offline_without_prefetch_names_the_prefetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match=f"dataset '{WIKI1M_ID}' is not prefetched .* plmclaims prefetch"):
        load_corpus({"sources": ["wiki1m"], "revision": REV})


def test_wiki1m_prefetched_at_another_commit_is_refused(prefetched, monkeypatch):
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(prefetched))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match=f"prefetched .* at revision {REV}, but the tier pins {'f' * 40}"):
        load_corpus({"sources": ["wiki1m"], "revision": "f" * 40})


def test_wiki1m_online_downloads_the_one_file_at_the_pinned_revision(standin, tmp_path):
    code = ("import json, sys; from plmclaims.data.sentences import load_corpus; "
            f"c = load_corpus({{'sources': ['wiki1m'], 'revision': {REV!r}, 'max_sentences': 5}}); "
            "print(json.dumps([c.sentences, c.provenance['sources']]))")
    with FakeHub({("dataset", WIKI1M_ID): standin}) as fake:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                             env=_env(tmp_path, HF_ENDPOINT=fake.url, PLMCLAIMS_HUB_DIR=str(tmp_path / "none")))
        requests = list(fake.requests)
    assert res.returncode == 0, res.stderr[-2000:]
    sents, sources = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(sents) == 5 and list(sources) == [f"{WIKI1M_ID}@{REV}:{WIKI1M_FILE}"]
    assert any(r.endswith(f"/datasets/{WIKI1M_ID}/resolve/{REV}/{WIKI1M_FILE}") for r in requests), requests


def test_wiki1m_lines_drop_empty_ones_and_documents_are_consecutive_runs(tmp_path):
    folder = tmp_path / "simcse"  # a local folder as the spec's hub: read like a prefetched one
    folder.mkdir()
    words = [f"sentence number {i} of the file with enough words in it" for i in range(50)]
    (folder / WIKI1M_FILE).write_text("\n".join(w if i % 7 else w + "\n  " for i, w in enumerate(words)) + "\n\n")
    corpus = load_corpus({"sources": ["wiki1m"], "hub": str(folder), "document_lines": 20, "min_document_words": 150})
    assert corpus.sentences == words
    assert corpus.documents == [words[:20], words[20:40]]  # the last run: 10 lines of 11 words, under 150
    with pytest.raises(KeyError, match="corpus sources \\['wiki2m'\\] unknown; allowed: .*'wiki1m'"):
        load_corpus({"sources": ["wiki2m"]})


def test_a_paper_contrastive_plan_needs_the_wiki1m_dataset_and_micro_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(tmp_path))
    claims = load_claims(REPO / "replications", ["contrastive/simcse-beats-declutr"])
    paper = load_tier("paper")
    want = HubAsset(WIKI1M_ID, "dataset", REV, "contrastive corpus wiki1m")
    assert want in needed_assets(plan_all(claims, paper), paper)
    micro = load_tier("micro")
    assert all(a.repo_id != WIKI1M_ID for a in needed_assets(plan_all(claims, micro), micro))
