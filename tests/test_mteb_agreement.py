"""The SentEval-style evaluator and the MTEB protocol agree on raw text for the same model (within 0.01)."""
from __future__ import annotations

import pytest

from plmclaims import encoders
from plmclaims.data import sts
from plmclaims.evaluation import mteb_sts, senteval

pytestmark = pytest.mark.slow  # encodes STS-B with all-MiniLM-L6-v2 through both stacks


@pytest.fixture(scope="module")
def stsb_minilm(senteval_root, minilm_path):
    data = sts.load_local(senteval_root, "STSBenchmark", "raw")
    model, tok = encoders.load_transformer(minilm_path)
    sents = data.sentences()
    vecs = encoders.pool(encoders.encode_layers(model, tok, sents, max_length=256, device="cpu", progress=False), "mean")
    return data, sents, vecs


def test_own_evaluator_matches_mteb_with_sentence_transformers(stsb_minilm, minilm_path):
    """Two independent stacks: our encoder + SentEval-style scoring vs sentence-transformers + mteb.evaluate."""
    from sentence_transformers import SentenceTransformer

    data, sents, vecs = stsb_minilm
    ours = senteval.score(senteval.pair_predictions(data, vecs, sents), data)["all"]
    st = SentenceTransformer(minilm_path, device="cpu")
    theirs = mteb_sts.evaluate(st, [data])["STSBenchmark"]["main_score"]
    assert abs(ours - theirs) < 0.01, (ours, theirs)
    assert abs(ours - 82.03) < 0.05  # the published MTEB score of all-MiniLM-L6-v2 on STSBenchmark


def test_vector_encoder_names_are_unique_per_run(stsb_minilm):
    """mteb identifies results by model name; two poolings must not share one."""
    data, sents, vecs = stsb_minilm
    index = {s: i for i, s in enumerate(sents)}
    a = mteb_sts.VectorEncoder("minilm-mean", lambda t: vecs[[index[s] for s in t]], vecs.shape[1])
    b = mteb_sts.VectorEncoder("minilm-first8", lambda t: vecs[[index[s] for s in t], :8], 8)
    ra, rb = mteb_sts.evaluate(a, [data])["STSBenchmark"], mteb_sts.evaluate(b, [data])["STSBenchmark"]
    assert a.mteb_model_meta.name != b.mteb_model_meta.name
    assert abs(ra["main_score"] - rb["main_score"]) > 1.0
    from mteb.models.model_meta import ScoringFunction

    assert a.mteb_model_meta.similarity_fn_name is ScoringFunction.COSINE
