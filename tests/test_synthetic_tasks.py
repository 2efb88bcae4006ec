"""The generated non-language tasks of the transfer family (plmclaims.data.synthetic): deterministic per seed, correct
labels (XOR against numpy, ListOps against hand-computed values), balanced classes, and sizes the plan can read."""
from __future__ import annotations

import numpy as np
import pytest

from plmclaims.data import synthetic as S
from plmclaims.errors import UserError

SMALL = {"bit-memory": {"bits": 20, "bits_per_token": 5}, "bit-xor": {"bits": 5},
         "listops": {"max_depth": 2, "max_args": 4, "max_length": 24}}
ID_TO_TOKEN = {**{v: str(d) for d, v in S.DIGIT.items()}, **{v: f"[{op}" for op, v in S.OPEN.items()}, S.CLOSE: "]"}


def _bytes(d: S.TaskData) -> bytes:
    return b"".join(a.tobytes() for a in (d.x, d.mask, d.y, d.scored, d.out_pos))


@pytest.mark.parametrize("task", list(S.TASKS))
def test_same_seed_same_bytes(task):
    a = S.generate(task, 200, 7, "train", SMALL[task])
    assert _bytes(a) == _bytes(S.generate(task, 200, 7, "train", SMALL[task]))
    assert _bytes(a) != _bytes(S.generate(task, 200, 8, "train", SMALL[task]))
    assert _bytes(a) != _bytes(S.generate(task, 200, 7, "test", SMALL[task]))  # train and test are other draws
    assert a.x.shape[1] == S.sequence_length(task, SMALL[task])
    assert S.item_ids(a, 7).tolist() == S.item_ids(S.generate(task, 200, 7, "train", SMALL[task]), 7).tolist()


def test_xor_labels_are_the_xor_of_the_two_strings():
    d = S.generate("bit-xor", 500, 0, "test", {"bits": 6})
    bits = (d.x[..., 0] > 0).astype(int)
    np.testing.assert_array_equal(d.y, bits[:, :6] ^ bits[:, 6:])
    assert d.out_pos.tolist() == list(range(6, 12))  # read at the second string's tokens
    assert 0.45 < d.y.mean() < 0.55


def test_bit_memory_asks_for_one_of_the_shown_strings():
    s = {"bits": 20, "strings": 5, "bits_per_token": 4, "mask": 0.5}
    d = S.generate("bit-memory", 300, 1, "train", s)
    seq = d.x.reshape(300, 6, 20)
    memory, query = seq[:, :5], seq[:, 5]
    target = 2 * d.y - 1
    # the target is one of the five strings shown
    assert all(any(np.array_equal(memory[i, k], target[i]) for k in range(5)) for i in range(300))
    # masked bits are 0 in the query and are exactly the scored items; the others are the target's
    np.testing.assert_array_equal(query == 0, d.scored)
    np.testing.assert_array_equal(query[~d.scored], target[~d.scored])
    assert 0.45 < d.scored.mean() < 0.55 and 0.45 < d.y[d.scored].mean() < 0.55
    assert d.out_pos.tolist() == list(range(25, 30)) and d.per_token == 4


@pytest.mark.parametrize("text,value", [
    ("[MAX 2 9 [MIN 4 7 ] 0 ]", 9),
    ("[MIN [SM 9 9 ] 5 ]", 5),  # 18 mod 10 = 8, min(8, 5)
    ("[SM 3 8 [MAX 2 5 ] ]", 6),  # 3 + 8 + 5 = 16
    ("[MED 1 7 3 ]", 3),
    ("[MED 1 2 3 4 ]", 2),  # median 2.5, rounded down as LRA's int(np.median)
    ("[MAX [MED 9 0 4 ] [SM 5 5 ] [MIN 8 6 ] ]", 6),
])
def test_listops_evaluates_hand_computed_expressions(text, value):
    tree = S.parse(text)
    assert S.evaluate(tree) == value
    assert S.to_text(tree) == text


def test_listops_examples_are_what_their_labels_say_and_balanced():
    s = {"max_depth": 3, "max_args": 4, "max_length": 40}
    d = S.generate("listops", 300, 3, "train", s)
    assert np.bincount(d.y[:, 0], minlength=10).tolist() == [30] * 10  # exactly balanced: chance is 10%
    assert (d.mask[:, -1] == 1).all() and d.out_pos.tolist() == [39]  # left-padded: read at the last token
    for row, label in zip(d.x, d.y[:, 0]):
        text = " ".join(ID_TO_TOKEN[i] for i in row if i != S.PAD)
        assert S.evaluate(S.parse(text)) == label
    assert (d.x[d.mask == 0] == S.PAD).all()


def test_listops_gives_up_with_a_clear_error_when_answers_cannot_balance():
    with pytest.raises(UserError, match="raise max_length"):
        S.generate("listops", 50, 0, "train", {"max_depth": 1, "max_args": 2, "max_length": 3})


def test_settings_are_checked():
    with pytest.raises(UserError, match="unknown settings width"):
        S.sequence_length("bit-xor", {"width": 3})
    with pytest.raises(UserError, match="multiple of bits_per_token"):
        S.sequence_length("bit-memory", {"bits": 12, "bits_per_token": 5})
    with pytest.raises(UserError, match="allowed values: bit-memory"):
        S.generate("mnist", 3, 0, "train")
