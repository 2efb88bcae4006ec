"""Data verified before compute: corrupted, truncated, unknown and missing files each stop with one line, on a
copy of the release data made here (only the files a test needs); malformed rows name the file and line."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from plmclaims.data import glue, sts, verify
from plmclaims.errors import UserError

TIER = {"data": {"sts": {"source": "local", "path": "{data_root}/senteval"},
                 "sts_mteb": {"source": "local", "path": "{data_root}/senteval"},
                 "glue": {"source": "local", "path": "{data_root}/glue"}}}
FIX = "restore the release file, or pass --config allow_unverified_data=true to use other data on purpose"
HEX = "[0-9a-f]{12}"


def copy_files(data_root: Path, dst: Path, files: list[str], sums: bool = True) -> Path:
    """Copy the named release files (and SHA256SUMS) into dst, keeping the layout; files are made writable."""
    for rel in files + (["SHA256SUMS"] if sums else []):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_root / rel, dst / rel)
    return dst


def sts_copy(data_root: Path, dst: Path, evaluator: str = "senteval", form: str = "tokenised", sums: bool = True) -> Path:
    files = [str(Path(p).relative_to(data_root)) for p in verify.sts_files(TIER, evaluator, form, str(data_root))]
    return copy_files(data_root, dst, files, sums)


def edit(path: Path, old: bytes, new: bytes, line: int | None = None) -> None:
    """Replace the first `old` (on 1-based `line` when given) by `new`; the mtime moves so no cache hides it."""
    lines = path.read_bytes().split(b"\n")
    i = line - 1 if line else next(k for k, ln in enumerate(lines) if old in ln)
    assert old in lines[i], (path, line, old)
    lines[i] = lines[i].replace(old, new, 1)
    st = path.stat()
    path.write_bytes(b"\n".join(lines))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def one_line(err: pytest.ExceptionInfo, path: Path, pattern: str) -> str:
    """The error is one line of at most 300 characters: '<file>: <pattern>'. A long path (a deep temporary folder) is
    shortened from the left to '…<its tail>' so that the line fits; the tail must still be the file's."""
    msg = str(err.value)
    assert "\n" not in msg and len(msg) <= 300, msg
    m = re.fullmatch("(…?)(.+?): " + pattern, msg)
    assert m and (m[2] == str(path) if not m[1] else str(path).endswith(m[2]) and len(m[2]) > 20), msg
    return msg


def verify_sts(root: Path, evaluator: str = "senteval", form: str = "tokenised", **kw) -> list[str]:
    return verify.verify_files(verify.sts_files(TIER, evaluator, form, str(root)), str(root), **kw)


# ---------------------------------------------------------------- the release passes; every file list is what loaders read

def test_release_files_verify_and_lists_match_loaders(data_root):
    for evaluator in ("senteval", "mteb"):
        for form in sts.FORMS:
            files = verify.sts_files(TIER, evaluator, form, str(data_root))
            read = {}
            for name in sts.BENCHMARKS:
                read.update(sts.load(TIER["data"]["sts"], name, form, sts.split_for(evaluator, name), str(data_root)).files)
            assert files == list(read), (evaluator, form)  # same paths, same order, as strings
            assert verify.verify_files(files, str(data_root)) == []
    for task, split in glue.KNOWN_COUNTS:
        files = verify.glue_files(TIER, task, str(data_root), splits=(split,))
        assert files == list(glue.load_local(glue.local_root(TIER["data"]["glue"], str(data_root)), task, split).files)
        assert verify.verify_files(files, str(data_root)) == []
    assert [Path(f).name for f in verify.glue_files(TIER, "MRPC", str(data_root))] == ["dev_ids.tsv", "msr_paraphrase_train.txt", "dev.tsv"]
    assert verify.sts_files({"data": {"sts_mteb": {"source": "hub"}}}, "mteb", "raw", None) == []


# ---------------------------------------------------------------- the corrupted-data cases of issue 9

def test_one_changed_byte_in_a_sentence(data_root, tmp_path):
    root = sts_copy(data_root, tmp_path)
    assert verify_sts(root) == []  # the copy itself is the release
    path = root / "senteval/STS/STS12-en-test/STS.input.MSRpar.txt"
    edit(path, b"a", b"e", line=1)  # same size: only the hash can tell
    with pytest.raises(UserError) as err:
        verify_sts(root)
    one_line(err, path, f"sha256 {HEX}, expected {HEX} \\(the data root's SHA256SUMS\\); {re.escape(FIX)}")


def test_changed_gold_score(data_root, tmp_path):
    root = sts_copy(data_root, tmp_path)
    path = root / "senteval/STS/STS16-en-test/STS.gs.headlines.txt"
    edit(path, b"5", b"1")
    with pytest.raises(UserError) as err:
        verify_sts(root)
    one_line(err, path, f"sha256 {HEX}, expected {HEX} \\(the data root's SHA256SUMS\\); {re.escape(FIX)}")


def test_stsb_test_file_cut_by_20_bytes(data_root, tmp_path):
    root = sts_copy(data_root, tmp_path)
    path = root / "senteval/STS/STSBenchmark/sts-test.csv"
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(UserError) as err:
        verify_sts(root)
    one_line(err, path, f"{size - 20} bytes where the release file has {size} \\(-20\\); {re.escape(FIX)}")


def test_changed_sick_score_against_pinned_checksums(data_root, tmp_path):
    """Without SHA256SUMS in the data root, the checksums pinned in the package decide."""
    root = sts_copy(data_root, tmp_path, sums=False)
    assert verify_sts(root) == []
    path = root / "senteval/SICK/SICK_test_annotated.txt"
    edit(path, b"\t4.5\t", b"\t3.5\t")
    with pytest.raises(UserError) as err:
        verify_sts(root)
    one_line(err, path, f"sha256 {HEX}, expected {HEX} \\(the pinned release checksums\\); {re.escape(FIX)}")


def test_several_problems_name_the_first_and_count_the_rest(data_root, tmp_path):
    root = sts_copy(data_root, tmp_path)
    first = root / "senteval/STS/STS12-en-test/STS.input.MSRpar.txt"
    edit(first, b"a", b"e")
    edit(root / "senteval/SICK/SICK_test_annotated.txt", b"\t4.5\t", b"\t3.5\t")
    with pytest.raises(UserError) as err:
        verify_sts(root)
    one_line(err, first, f"sha256 {HEX}, expected {HEX} \\(the data root's SHA256SUMS\\) \\(and 1 more file\\); {re.escape(FIX)}")


def test_unknown_file_is_unverified(data_root, tmp_path):
    """A file no checksum list knows (here: SHA256SUMS lacks its line and nothing is pinned for it)."""
    root = copy_files(data_root, tmp_path, ["glue/CoLA/original/raw/in_domain_dev.tsv"], sums=False)
    path = root / "glue/CoLA/original/raw/in_domain_dev.tsv"
    with pytest.raises(UserError) as err:
        verify.verify_files([str(path)], str(root))
    one_line(err, path, "no known checksum \\(neither the data root's SHA256SUMS nor the pinned release checksums list it\\); "
             + re.escape(FIX))


def test_missing_file(data_root, tmp_path):
    root = sts_copy(data_root, tmp_path)
    path = root / "senteval/STS/STS14-en-test/STS.gs.images.txt"
    path.unlink()
    with pytest.raises(UserError) as err:
        verify_sts(root, allow_unverified=True)  # no flag makes a missing file readable
    one_line(err, path, re.escape("data file missing; restore it from the release, or pass --config data_root=<a complete copy>"))


def test_allow_unverified_returns_one_warning_per_file(data_root, tmp_path):
    root = sts_copy(data_root, tmp_path)
    a = root / "senteval/STS/STS12-en-test/STS.input.MSRpar.txt"
    b = root / "senteval/STS/STSBenchmark/sts-test.csv"
    edit(a, b"a", b"e")
    b.write_bytes(b.read_bytes()[:-20])
    warnings = verify_sts(root, allow_unverified=True)
    assert len(warnings) == 2
    tail = re.escape("; used anyway (allow_unverified_data=true), the report marks the rows that read it")
    assert re.fullmatch(re.escape(str(a)) + f": sha256 {HEX}, expected {HEX} \\(the data root's SHA256SUMS\\)" + tail, warnings[0])
    assert re.fullmatch(re.escape(str(b)) + r": \d+ bytes where the release file has \d+ \(-20\)" + tail, warnings[1])
    assert all(len(w) <= 300 for w in warnings)


def test_is_verified_marks_other_data(data_root):
    path = verify.sts_files(TIER, "senteval", "tokenised", str(data_root))[0]
    digest = verify.file_sha256(path)
    assert verify.is_verified(path, digest, str(data_root))
    assert not verify.is_verified(path, "0" * 64, str(data_root))
    assert not verify.is_verified("/elsewhere/STS.input.MSRpar.txt", digest, str(data_root))
    assert verify.is_verified("mteb/sts12-sts@a0d554a:data-00000.arrow", "", str(data_root))  # hub: pinned by revision


def test_long_paths_are_shortened_not_the_line(data_root, tmp_path):
    deep = tmp_path / ("d" * 120) / ("e" * 120)
    root = sts_copy(data_root, deep)
    path = root / "senteval/STS/STSBenchmark/sts-test.csv"
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(UserError) as err:
        verify_sts(root)
    msg = str(err.value)
    assert len(msg) <= 300 and msg.startswith("…") and "STSBenchmark/sts-test.csv: " in msg and msg.endswith(FIX)


# ---------------------------------------------------------------- the data root, at planning time

TIER_UD = {"data": {**TIER["data"], "ud": {"source": "local", "path": "{data_root}/ud"}}}


def test_missing_data_root(tmp_path):
    with pytest.raises(UserError) as err:
        verify.check_data_root(str(tmp_path / "nope"), TIER)
    assert str(err.value) == (f"data_root '{tmp_path / 'nope'}': folder not found; "
                              "pass --config data_root=<folder holding senteval/ (SentEval's layout) and glue/>")


def test_data_root_without_the_layout(data_root, tmp_path):
    verify.check_data_root(str(data_root), TIER)
    verify.check_data_root(str(data_root))
    (tmp_path / "senteval" / "STS").mkdir(parents=True)
    (tmp_path / "glue").mkdir()
    with pytest.raises(UserError) as err:
        verify.check_data_root(str(tmp_path), TIER)
    assert str(err.value) == (f"data_root '{tmp_path}': {tmp_path / 'senteval'} has no SICK/; "
                              "pass --config data_root=<folder holding senteval/ (SentEval's layout) and glue/>")
    # pointing at senteval/ itself (a common slip): no senteval/ inside
    with pytest.raises(UserError, match=re.escape(f"{tmp_path / 'senteval'} has no senteval/;")):
        verify.check_data_root(str(tmp_path / "senteval"), TIER)
    # a hub-only tier needs no local folders
    verify.check_data_root(str(tmp_path / "glue"), {"data": {"sts": {"source": "hub"}, "glue": {"source": "hub"}}})
    # with the planned files, only the sources they lie in must be there (an STS-only selection needs no ud/)
    sick = tmp_path / "senteval" / "SICK"
    sick.mkdir()
    with pytest.raises(UserError, match=re.escape(f"{tmp_path} has no ud/;")):
        verify.check_data_root(str(tmp_path), TIER_UD)
    verify.check_data_root(str(tmp_path), TIER_UD, [str(sick / "SICK_test_annotated.txt")])


def test_sums_file_malformed_is_one_line(data_root, tmp_path):
    root = sts_copy(data_root, tmp_path)
    (root / "SHA256SUMS").write_text("deadbeef  ./senteval/x\n")
    with pytest.raises(UserError) as err:
        verify_sts(root)
    one_line(err, root / "SHA256SUMS:1", re.escape("expected '<sha256>  <path>' as sha256sum writes it; ") + ".*")


# ---------------------------------------------------------------- malformed rows: file, line number, what was expected

def test_tab_replaced_by_space_in_an_sts_file(data_root, tmp_path):
    root = sts_copy(data_root, tmp_path)
    path = root / "senteval/STS/STS12-en-test/STS.input.MSRpar.txt"
    edit(path, b"\t", b" ", line=5)
    with pytest.raises(UserError) as err:
        sts.load_local(root / "senteval", "STS12", "tokenised")
    one_line(err, Path(f"{path}:5"), re.escape("expected two tab-separated sentences, found 1 tab-separated column(s); "
                                               "fix the row or restore the release file"))


def test_gold_score_that_is_not_a_number(data_root, tmp_path):
    root = sts_copy(data_root, tmp_path)
    path = root / "senteval/STS/STS12-en-test/STS.gs.MSRpar.txt"
    lines = path.read_text().split("\n")
    lines[2] = "4.4x0"
    path.write_text("\n".join(lines))
    with pytest.raises(UserError) as err:
        sts.load_local(root / "senteval", "STS12", "tokenised")
    one_line(err, Path(f"{path}:3"), re.escape("gold score '4.4x0' is not a number from 0 to 5; fix the row or restore the release file"))


def test_gold_score_out_of_range_and_nan(data_root, tmp_path):
    root = copy_files(data_root, tmp_path, ["senteval/SICK/SICK_test_annotated.txt"])
    path = root / "senteval/SICK/SICK_test_annotated.txt"
    edit(path, b"\t4.5\t", b"\tnan\t")
    with pytest.raises(UserError, match=re.escape(f"{path}:") + r"\d+: gold score 'nan' is not a number from 0 to 5"):
        sts.load_local(root / "senteval", "SICK-R", "raw")


def test_short_stsb_row(data_root, tmp_path):
    root = sts_copy(data_root, tmp_path)
    path = root / "senteval/STS/STSBenchmark/sts-test.csv"
    lines = path.read_bytes().split(b"\n")
    lines[9] = b"\t".join(lines[9].split(b"\t")[:5])
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(UserError) as err:
        sts.load_local(root / "senteval", "STSBenchmark", "tokenised")
    one_line(err, Path(f"{path}:10"), re.escape("expected 7 columns (genre, file, year, id, score, sentence 1, sentence 2), "
                                                "found 5 tab-separated column(s); fix the row or restore the release file"))


def test_short_sick_row_is_an_error_not_skipped(data_root, tmp_path):
    root = copy_files(data_root, tmp_path, ["senteval/SICK/SICK_test_annotated.txt"])
    path = root / "senteval/SICK/SICK_test_annotated.txt"
    lines = path.read_text().split("\n")
    lines[3] = "\t".join(lines[3].split("\t")[:3])
    path.write_text("\n".join(lines))
    with pytest.raises(UserError) as err:
        sts.load_local(root / "senteval", "SICK-R", "raw")
    one_line(err, Path(f"{path}:4"), re.escape("expected 5 columns (pair_ID, sentence_A, sentence_B, relatedness_score, "
                                               "entailment_judgment), found 3 tab-separated column(s); fix the row or restore the release file"))


def test_cola_row_without_its_sentence(data_root, tmp_path):
    root = copy_files(data_root, tmp_path, ["glue/CoLA/dev.tsv"])
    path = root / "glue/CoLA/dev.tsv"
    lines = path.read_text().split("\n")
    lines[6] = "\t".join(lines[6].split("\t")[:3])
    path.write_text("\n".join(lines))
    with pytest.raises(UserError) as err:
        glue.load_local(root / "glue", "CoLA", "dev")
    one_line(err, Path(f"{path}:7"), re.escape("expected 4 tab-separated columns (source, label, author's label, sentence), "
                                               "found 3; fix the row or restore the release file"))


@pytest.mark.parametrize("task,rel,line,old,new,allowed", [
    ("RTE", "glue/RTE/dev.tsv", 2, b"\tnot_entailment", b"\tcontradiction", "entailment, not_entailment"),
    ("SST-2", "glue/SST-2/dev.tsv", 2, b"\t1", b"\t2", "0, 1"),
    ("STS-B", "glue/STS-B/dev.tsv", 2, b"\t5.000", b"\t5.0x0", "a number from 0 to 5"),
])
def test_glue_label_outside_the_allowed_values(data_root, tmp_path, task, rel, line, old, new, allowed):
    root = copy_files(data_root, tmp_path, [rel])
    edit(root / rel, old, new, line=line)
    with pytest.raises(UserError) as err:
        glue.load_local(root / "glue", task, "dev")
    one_line(err, Path(f"{root / rel}:{line}"), re.escape(f"label {new[1:].decode()!r} not allowed; allowed values: {allowed}; "
                                                          "fix the row or restore the release file"))


# ---------------------------------------------------------------- one set for STS-B and SICK-R (issue 8, §3)

@pytest.mark.parametrize("name,split", [("STSBenchmark", "test"), ("SICK-R", "test"), ("SICK-R", "all")])
def test_stsb_and_sick_aggregations_coincide(senteval_root, name, split):
    from plmclaims import stats
    from plmclaims.evaluation import senteval

    data = sts.load_local(senteval_root, name, "raw", split)
    pred = data.scores + np.random.default_rng(0).normal(0, 1.5, len(data))
    out = senteval.score(pred, data)
    assert out["all"] == pytest.approx(out["wmean"]) == pytest.approx(out["mean"])
    assert set(data.subsets) == {name}  # what predictions.npz records as '::subsets' for the bootstrap


def test_sts_years_still_average_their_subsets(senteval_root):
    from plmclaims.evaluation import senteval

    data = sts.load_local(senteval_root, "STS12", "tokenised")
    out = senteval.score(data.scores + np.random.default_rng(0).normal(0, 1.5, len(data)), data)
    assert len(set(data.subsets)) == 5 and out["wmean"] != pytest.approx(out["mean"])


# ---------------------------------------------------------------- speed: each file hashed once per process

def test_each_file_is_hashed_once_until_it_changes(data_root, tmp_path, monkeypatch):
    import hashlib

    root = sts_copy(data_root, tmp_path, form="raw")
    hashed = []
    real = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda f, name: hashed.append(f.name) or real(f, name))
    files = verify.sts_files(TIER, "senteval", "raw", str(root))
    assert verify.verify_files(files, str(root)) == [] and len(hashed) == len(files)
    assert verify.verify_files(files, str(root)) == [] and len(hashed) == len(files)  # the second start hashes nothing
    path = root / "senteval/STS/STS13-en-test/test-gs/STS.input.OnWN.txt"
    edit(path, b"a", b"e")  # same size, new mtime: hashed again, and caught
    with pytest.raises(UserError, match=re.escape(f"{path}: sha256 ")):
        verify.verify_files(files, str(root))
    assert hashed[len(files):] == [str(path)]


def test_allow_unverified_flag_as_config_passes_it():
    assert verify.allow_unverified({"allow_unverified_data": "true"}) and verify.allow_unverified({"allow_unverified_data": True})
    assert not verify.allow_unverified({}) and not verify.allow_unverified({"allow_unverified_data": "false"})
