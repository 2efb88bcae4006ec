"""Attention to special tokens (Clark et al. 2019): the measures against values computed by hand on tiny arrays, the
masked positions, and one real forward and backward pass whose gradient autograd can be checked against."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from plmclaims.methods import attention as A


def _maps():
    """Two layers, two heads, three tokens ([CLS] w [SEP]); each row sums to 1."""
    layer1 = np.array([[[0.5, 0.25, 0.25], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]],
                       [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]])
    layer2 = np.full((2, 3, 3), 1 / 3)
    return np.stack([layer1, layer2])


def test_attention_share_by_hand():
    attn, sep, cls = _maps(), np.array([False, False, True]), np.array([True, False, False])
    # layer 1: head 1 puts .25, 0, 0 on [SEP] (mean 1/12), head 2 puts 1, 1, 1 (mean 1): (1/12 + 1) / 2 = 13/24
    # [CLS]: head 1 .5, .5, 1 (mean 2/3), head 2 0: 1/3; layer 2 is uniform: 1/3 on each token
    assert A.attention_share(attn, sep) == pytest.approx([13 / 24, 1 / 3])
    assert A.attention_share(attn, cls) == pytest.approx([1 / 3, 1 / 3])
    assert A.attention_share(attn, sep | cls) == pytest.approx([13 / 24 + 1 / 3, 2 / 3])  # shares of types add up
    assert A.attention_share(attn, np.zeros(3, bool)) == pytest.approx([0, 0])
    assert A.uniform_share(sep) == pytest.approx(1 / 3) and A.uniform_share(sep | cls) == pytest.approx(2 / 3)


def test_gradient_magnitude_by_hand():
    grad = np.zeros((2, 2, 3, 3))
    grad[0, 0, :, 2] = [0.3, -0.3, 0.0]  # layer 1, head 1, on [SEP]
    grad[0, 1, :, 2] = [0.0, 0.0, 0.6]
    grad[0, :, :, 0] = 5.0  # on [CLS]: not [SEP]'s
    grad[1] = -0.1
    sep = np.array([False, False, True])
    # layer 1: |.3| + |-.3| + |.6| over 2 heads x 3 queries = 1.2 / 6; layer 2: .1 everywhere
    assert A.gradient_magnitude(grad, sep) == pytest.approx([0.2, 0.1])
    assert np.isnan(A.gradient_magnitude(grad, np.zeros(3, bool))).all()


def test_mask_positions():
    rng = np.random.default_rng(0)
    got = A.mask_positions(np.arange(1, 21), 0.15, rng)
    assert len(got) == 3 and len(set(got)) == 3 and set(got) <= set(range(1, 21)) and list(got) == sorted(got)
    assert len(A.mask_positions(np.array([4, 5]), 0.15, rng)) == 1  # at least one: every sentence has a loss
    assert list(A.mask_positions(np.array([7]), 0.9, rng)) == [7]
    again = A.mask_positions(np.arange(1, 21), 0.15, np.random.default_rng(0))
    assert list(again) == list(got)  # seeded


@pytest.fixture(scope="module")
def tiny_mlm():
    import torch
    from transformers import AutoModelForMaskedLM, BertConfig

    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    return AutoModelForMaskedLM.from_config(config, attn_implementation="eager").eval()


@pytest.mark.slow
def test_forward_returns_maps_and_the_loss_gradient(tiny_mlm):
    import torch
    from transformers import AutoModelForMaskedLM

    ids = np.array([2, 7, 8, 9, 3])
    (attn,), (grad,) = A.forward(tiny_mlm, [ids], [np.array([2])], 4)
    assert attn.shape == grad.shape == (2, 2, 5, 5)
    assert attn.sum(-1) == pytest.approx(np.ones((2, 2, 5)), abs=1e-5)
    # the gradient is the MLM loss's: the model's own loss on the masked input, differentiated by autograd
    inputs = torch.tensor([[2, 7, 4, 9, 3]])
    out = tiny_mlm(input_ids=inputs, labels=torch.tensor([[-100, -100, 8, -100, -100]]), output_attentions=True)
    expected = torch.stack(torch.autograd.grad(out.loss, out.attentions))[:, 0].numpy()
    assert grad == pytest.approx(expected, abs=1e-7) and np.abs(grad).sum() > 0
    (alone,), none = A.forward(tiny_mlm, [ids])
    assert none is None and np.allclose(alone, attn)
    sdpa = AutoModelForMaskedLM.from_config(copy.deepcopy(tiny_mlm.config), attn_implementation="sdpa")
    with pytest.raises(ValueError, match="eager"):
        A.forward(sdpa.eval(), [ids])


def test_a_padded_batch_gives_each_sequence_its_own_maps_and_gradient(tiny_mlm):
    """Padding gets no attention and sequences share none: batched values equal those of each sequence alone."""
    seqs = [np.array([2, 7, 8, 9, 10, 11, 3]), np.array([2, 12, 3]), np.array([2, 13, 14, 3])]
    masks = [np.array([1, 4]), np.array([1]), np.array([2])]
    attn, grad = A.forward(tiny_mlm, seqs, masks, 4)
    for s, m, a, g in zip(seqs, masks, attn, grad):
        (a1,), (g1,) = A.forward(tiny_mlm, [s], [m], 4)
        assert a.shape == a1.shape == (2, 2, len(s), len(s))
        assert a == pytest.approx(a1, abs=1e-5) and g == pytest.approx(g1, abs=1e-6)
