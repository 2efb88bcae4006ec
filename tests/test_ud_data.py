"""UD English EWT reader and the probing tasks built from it, on the real release files."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from plmclaims.data import ud
from plmclaims.errors import UserError

ROW = "{i}\t{w}\t{w}\tNOUN\tNN\t{f}\t{h}\t{r}\t_\t_"


@pytest.fixture(scope="module")
def dev(data_root):
    return ud.load(data_root, "dev")


@pytest.mark.parametrize("split", ud.SPLITS)
def test_release_counts(data_root, split):
    data = ud.load(data_root, split)
    assert (len(data.sentences), data.n_words) == ud.KNOWN_COUNTS[split]
    assert (len(data.sentences), data.n_words) == {"train": (12544, 204577), "dev": (2001, 25147),
                                                   "test": (2077, 25094)}[split]
    (path,) = data.files
    assert path.endswith(f"ud/en_ewt-ud-{split}.conllu") and len(data.files[path]) == 64


def test_first_dev_sentence(dev):
    s = dev.sentences[0]
    assert s.words == ["From", "the", "AP", "comes", "this", "story", ":"]
    assert s.heads.tolist() == [3, 3, 4, 0, 6, 4, 4]
    assert s.deprels[2] == "obl" and s.upos[3] == "VERB" and s.xpos[6] == ":"
    assert s.feats[3]["Tense"] == "Pres" and s.feats[1] == {"Definite": "Def", "PronType": "Art"}


def write(tmp_path, *lines, name="x.conllu"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_multiword_tokens_and_empty_nodes_are_skipped(tmp_path):
    path = write(tmp_path, "# sent_id = a", "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_", ROW.format(i=1, w="do", f="_", h=0, r="root"),
                 ROW.format(i=2, w="n't", f="_", h=1, r="advmod"), "1.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t1:conj\t_",
                 "", "# sent_id = b", ROW.format(i=1, w="hi", f="_", h=0, r="root"))  # no blank line at the end
    a, b = ud.read_conllu(path)
    assert (a.sent_id, a.words, a.heads.tolist()) == ("a", ["do", "n't"], [0, 1])
    assert (b.sent_id, b.words) == ("b", ["hi"])


@pytest.mark.parametrize("bad, message", [
    ("1\tx\tx\tNOUN\tNN\t_\t0\troot\t_", "expected 10 tab-separated CoNLL-U fields, found 9"),
    (ROW.format(i=3, w="x", f="_", h=1, r="dep"), "word ID must be 2"),
    (ROW.format(i=2, w="x", f="_", h="?", r="dep"), "HEAD must be a word ID or 0"),
    (ROW.format(i=2, w="x", f="Tense", h=1, r="dep"), "FEATS must be _ or Name=Value"),
])
def test_malformed_line_names_file_and_line(tmp_path, bad, message):
    path = write(tmp_path, "# sent_id = a", ROW.format(i=1, w="a", f="_", h=0, r="root"), bad)
    with pytest.raises(UserError, match=rf"x\.conllu:3: {message}"):
        ud.read_conllu(path)


def test_tree_errors_and_missing_files(tmp_path, data_root):
    path = write(tmp_path, ROW.format(i=1, w="a", f="_", h=2, r="dep"), ROW.format(i=2, w="b", f="_", h=5, r="dep"))
    with pytest.raises(UserError, match=r"x\.conllu:1: sentence \? needs one root"):
        ud.read_conllu(path)
    path = write(tmp_path, ROW.format(i=1, w="a", f="_", h=0, r="root"), ROW.format(i=2, w="b", f="_", h=3, r="dep"),
                 ROW.format(i=3, w="c", f="_", h=2, r="dep"))
    with pytest.raises(UserError, match=r"x\.conllu:1: sentence \? has a cycle"):
        ud.read_conllu(path)
    with pytest.raises(UserError, match="UD file not found"):
        ud.load(tmp_path, "dev")
    with pytest.raises(UserError, match="allowed values: train, dev, test"):
        ud.load(data_root, "validation")


def test_truncated_copy_fails_the_count_check(tmp_path, data_root):
    (tmp_path / "ud").mkdir()
    text = (data_root / "ud" / "en_ewt-ud-dev.conllu").read_text()
    (tmp_path / "ud" / "en_ewt-ud-dev.conllu").write_text(text[: len(text) // 2].rsplit("\n\n", 1)[0] + "\n")
    with pytest.raises(UserError, match=r"en_ewt-ud-dev\.conllu: \d+ sentences and \d+ words, expected 2001 and 25147"):
        ud.load(tmp_path, "dev")
    assert len(ud.load(tmp_path, "dev", check_counts=False).sentences) < 2001


def test_depths_of_a_hand_made_tree():
    # 1 <- 2 (root) -> 3 -> 4 -> 5
    assert ud.depths(np.array([2, 0, 2, 3, 4])).tolist() == [2, 1, 2, 3, 4]
    with pytest.raises(UserError, match="cycle"):
        ud.depths(np.array([2, 1, 0]))


def test_word_and_pair_tasks(dev):
    upos = ud.upos_task(dev.sentences)
    assert len(upos.labels) == 25147 and upos.index.shape == (25147, 2)
    assert len(set(upos.labels)) == 17  # the UD UPOS tag set
    deps = ud.dependency_task(dev.sentences)
    assert len(deps.labels) == 25147 - 2001  # every word but the root has a head
    s, h, d = deps.index[0]
    assert (s, h, d, deps.labels[0]) == (0, 2, 0, "case")  # "From" <-case- "AP"
    assert "nmod:poss" in set(deps.labels) and "nmod:poss" not in set(ud.dependency_task(dev.sentences, False).labels)


def test_sentence_tasks(dev):
    length = ud.length_task(dev.sentences)
    assert length.labels[0] == "1"  # 7 words: bin 6-10
    assert set(length.labels) == {str(k) for k in range(len(ud.LENGTH_EDGES) + 1)}
    depth = ud.depth_task(dev.sentences)
    assert depth.labels[0] == "1"  # comes (1) -> AP (2) -> From (3): max depth 3, the class [3, 4)
    tense, subj = ud.tense_task(dev.sentences), ud.subject_number_task(dev.sentences)
    assert tuple(tense.index[0]) == (0, 3) and tense.labels[0] == "Pres"
    assert tuple(subj.index[0]) == (0, 5) and subj.labels[0] == "Sing"
    assert set(tense.labels) == {"Pres", "Past"} and set(subj.labels) == {"Sing", "Plur"}
    assert 0.3 * len(dev.sentences) < len(tense.labels) < len(dev.sentences)


def _sentence(sid: str, words: str, punct: str = "") -> ud.Sentence:
    """A hand-made sentence: words split on spaces, UPOS PUNCT at the positions of `punct`'s 'p's, a chain tree."""
    w = words.split()
    upos = ["PUNCT" if punct[i:i + 1] == "p" else "NOUN" for i in range(len(w))]
    return ud.Sentence(sid, w, upos, ["NN"] * len(w), [{}] * len(w), np.arange(len(w)), ["dep"] * len(w))


HAND_MADE = [_sentence("a", "the cat sat .", "___p"), _sentence("b", "dogs bark loudly"), _sentence("c", ", .", "pp"),
             _sentence("d", "go go"), _sentence("e", "a b , c", "__p_"), _sentence("f", "one more time !", "___p"),
             _sentence("g", "x y")]


def test_bigram_shift_pairs_leave_out_punctuation_and_equal_words():
    assert [ud.bigram_shift_pairs(s) for s in HAND_MADE] == [[0, 1], [0, 1], [], [], [0], [0, 1], [0]]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_bigram_shift_on_hand_made_sentences(seed):
    task = ud.bigram_shift_task(HAND_MADE, seed=seed)
    usable = [0, 1, 4, 5, 6]  # "c" is all punctuation, "d" swaps to itself
    assert task.index[:, 0].tolist() == usable and task.words[2] == [",", "."] and task.words[3] == ["go", "go"]
    assert sorted(task.labels.tolist()) == ["I", "I", "O", "O", "O"]  # half of 5 usable, rounded down
    for s, label in zip(usable, task.labels):
        before, after = HAND_MADE[s].words, task.words[s]
        changed = [i for i in range(len(before)) if before[i] != after[i]]
        if label == "O":
            assert changed == [] and task.swaps[s] == -1
        else:  # exactly one adjacent pair swapped, at the recorded position, neither word punctuation
            i = int(task.swaps[s])
            assert changed == [i, i + 1] and after[i:i + 2] == before[i:i + 2][::-1]
            assert i in ud.bigram_shift_pairs(HAND_MADE[s])
    again = ud.bigram_shift_task(HAND_MADE, seed=seed)
    assert again.words == task.words and again.labels.tolist() == task.labels.tolist()
    # rebuilt from the recorded swaps (what the encode stores), the task is the same
    rebuilt = ud.bigram_shift_task(HAND_MADE, swaps=task.swaps)
    assert rebuilt.words == task.words and rebuilt.labels.tolist() == task.labels.tolist()


def test_bigram_shift_on_dev_is_balanced_and_seeded(dev):
    a, b = ud.bigram_shift_task(dev.sentences, seed=1), ud.bigram_shift_task(dev.sentences, seed=1)
    assert a.words == b.words and a.labels.tolist() == b.labels.tolist()
    assert a.labels.tolist() != ud.bigram_shift_task(dev.sentences, seed=2).labels.tolist()
    counts = Counter(a.labels.tolist())
    assert (counts["O"], counts["I"]) == (891, 890)  # 1781 of dev's 2001 sentences have two adjacent non-punctuation words
    assert len(a.labels) == sum(1 for s in dev.sentences if ud.bigram_shift_pairs(s))
    for s, label in zip(a.index[:, 0], a.labels):
        diffs = sum(x != y for x, y in zip(a.words[s], dev.sentences[s].words))
        assert diffs == (2 if label == "I" else 0)
