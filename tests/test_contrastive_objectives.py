"""The objectives without a library loss (issue 10): BSL's bootstrap loss and EMA target, DiffCSE's conditional
replaced-token detection, PromptBERT's [MASK] pooling and template denoising, RankEncoder's rank-vector similarity.
Hand-checkable values, and one training step of each on a tiny BERT (seconds)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from plmclaims.data.sentences import Corpus
from plmclaims.methods import contrastive
from plmclaims.methods.contrastive import bsl, diffcse, promptbert, rankencoder, train
from samples import TOY_SENTENCES, save_tiny_mlm_bert, stsb_dev_head

SENTENCES = TOY_SENTENCES


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return save_tiny_mlm_bert(tmp_path_factory.mktemp("tiny-bert"))


def test_the_registry_finds_each_objective_module():
    for name, module in (("bsl", bsl), ("diffcse", diffcse), ("promptbert", promptbert), ("rankencoder", rankencoder)):
        assert contrastive.get(name) is module and module.NAME == name and module.INPUT == "sentences"
        assert module.Objective.DEFAULTS is module.DEFAULTS and "pooling" in module.DEFAULTS


# --- BSL

def test_bsl_loss_is_zero_when_prediction_and_target_agree_and_four_when_opposite():
    x = torch.randn(5, 7)
    assert float(bsl.bsl_loss(x, 3 * x)) == pytest.approx(0.0, abs=1e-6)  # the scale of either side is irrelevant
    assert float(bsl.bsl_loss(x, -x)) == pytest.approx(4.0, abs=1e-6)
    orthogonal = bsl.bsl_loss(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]]))
    assert float(orthogonal) == pytest.approx(2.0, abs=1e-6)


def test_bsl_ema_moves_the_target_by_exactly_one_minus_decay_of_the_gap(tiny_model):
    obj = bsl.Objective(tiny_model, {"ema_decay": 0.9, "predictor_hidden_mult": 2}, seed=0)
    assert all(torch.equal(t, o) for t, o in zip(obj.target.parameters(), obj.encoder.parameters()))
    assert not any(p.requires_grad for p in obj.target.parameters())  # the target gets no gradient
    with torch.no_grad():
        for p in obj.encoder.parameters():
            p.add_(torch.randn_like(p))
    before = [t.detach().clone() for t in obj.target.parameters()]
    online = [o.detach().clone() for o in obj.encoder.parameters()]
    obj.after_step()
    for old, new, o in zip(before, obj.target.parameters(), online):
        torch.testing.assert_close(new - old, 0.1 * (o - old), atol=1e-6, rtol=1e-5)
        assert not torch.equal(new, old)


# --- DiffCSE

def test_replaced_token_labels_are_one_exactly_where_the_edit_differs():
    ids = torch.tensor([[101, 7, 8, 9, 102, 0]])
    chosen = torch.tensor([[False, True, True, False, False, False]])
    generated = torch.tensor([[5, 7, 4, 6, 6, 6]])  # restores token 7, replaces 8 by 4; unchosen positions ignored
    edited, labels = diffcse.replace_tokens(ids, chosen, generated)
    assert edited.tolist() == [[101, 7, 4, 9, 102, 0]]
    assert labels.tolist() == [[0, 0, 1, 0, 0, 0]]


def test_diffcse_masks_30_percent_never_special_and_labels_only_generator_edits(tiny_model):
    obj = diffcse.Objective(tiny_model, {}, seed=0)
    batch = obj.make_batch(SENTENCES + ["a dog", "birds"], np.random.default_rng(0), max_length=16)
    ids = batch["input_ids"]
    special = torch.from_numpy(np.isin(ids.numpy(), obj.tokenizer.all_special_ids))  # [CLS], [SEP], [PAD]
    assert bool((batch["attention_mask"] == 0).any())  # the batch has padding to protect
    for view in (1, 2):
        chosen = batch[f"chosen{view}"]
        assert not bool((chosen & special).any())
        rate = float(chosen.sum()) / float((~special).sum())
        assert 0.25 < rate < 0.35
        assert bool((batch[f"mlm_ids{view}"][chosen] == obj.tokenizer.mask_token_id).float().mean() > 0.6)  # 80% [MASK]
    assert not torch.equal(batch["chosen1"], batch["chosen2"])  # each view its own edit
    with torch.no_grad():
        generated = obj.generator(input_ids=batch["mlm_ids1"], attention_mask=batch["attention_mask"]).logits.argmax(-1)
    _, labels = diffcse.replace_tokens(ids, batch["chosen1"], generated)
    assert torch.equal(labels.bool(), batch["chosen1"] & (generated != ids))
    assert not bool(labels[special].any())


def test_diffcse_discriminator_is_conditioned_on_the_sentence_vector_and_the_generator_frozen(tiny_model):
    obj = diffcse.Objective(tiny_model, {}, seed=0).train()
    assert not obj.generator.training and not any(p.requires_grad for p in obj.generator.parameters())
    batch = obj.tokenize(SENTENCES[:4], 16)
    outs = []
    for value in (0.0, 1.0):
        obj._cls_input = torch.full((4, 32), value)
        with torch.no_grad():
            obj.eval()
            outs.append(obj.discriminator(**batch).last_hidden_state)
    obj._cls_input = None
    assert not torch.allclose(outs[0], outs[1])  # the vector at [CLS] changes every token's output
    obj.train()
    loss = obj.loss(obj.make_batch(SENTENCES[:8], np.random.default_rng(1), 16))
    loss.backward()
    assert obj.rtd_head.weight.grad is not None and float(obj.rtd_head.weight.grad.abs().sum()) > 0
    simcse_only = diffcse.Objective(tiny_model, {"lambda_weight": 0.0}, seed=0)
    assert simcse_only.loss(simcse_only.make_batch(SENTENCES[:8], np.random.default_rng(1), 16)).item() != pytest.approx(loss.item())


# --- PromptBERT

def test_promptbert_mask_position_is_found_for_sentences_of_different_lengths(tiny_model):
    obj = promptbert.Objective(tiny_model, {}, seed=0).eval()
    sents = ["a", "a man is playing a guitar on the stage tonight", "the [MASK] sat"]  # the last has its own [MASK] text
    batch = obj.tokenize(sents, 32)
    mask_id = obj.tokenizer.mask_token_id
    for i in range(len(sents)):
        last_mask = int(torch.nonzero(batch["input_ids"][i] == mask_id).max())  # the template's [MASK] is the last one
        assert int(batch["mask_pos"][i]) == last_mask
    assert len(set(batch["mask_pos"].tolist())) == 3
    # padding does not move the vector: each sentence alone gives what it gives inside the padded batch
    together = obj.embed(sents, batch_size=3, max_length=32)
    for i, s in enumerate(sents):
        np.testing.assert_allclose(obj.embed([s], 1, 32)[0], together[i], atol=1e-5)


def test_promptbert_template_denoising_subtracts_exactly_the_template_only_vector(tiny_model):
    obj = promptbert.Objective(tiny_model, {}, seed=0).eval()
    sents = ["a dog runs", "the old man sees the house by the river"]
    plain = obj.embed(sents, 2, 32)
    obj.params["denoise_test"] = True
    denoised = obj.embed(sents, 2, 32)
    for i, s in enumerate(sents):
        n = len(obj.tokenizer(s + ".", add_special_tokens=False)["input_ids"])  # embed appends '.' (evaluation.py)
        with torch.no_grad():
            template_only = obj.template_vectors(0, [n])[0].numpy()
        np.testing.assert_allclose(plain[i] - denoised[i], template_only, atol=1e-5)
    # the template-only input keeps the positions a sentence of that length leaves: a shift changes the vector
    with torch.no_grad():
        v = obj.template_vectors(0, [0, 5])
        t = obj.templates[0]
        ids = torch.tensor([t.head + t.tail])
        unshifted = obj.encoder(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0, len(t.head) + t.mask_offset]
    torch.testing.assert_close(v[0], unshifted, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(v[0], v[1])


def test_promptbert_views_are_the_two_templates(tiny_model):
    obj = promptbert.Objective(tiny_model, {}, seed=0)
    batch = obj.make_batch(["a dog runs"], np.random.default_rng(0), 32)
    decode = lambda b: obj.tokenizer.decode(b["input_ids"][0])  # noqa: E731
    assert decode(batch["view1"]) == '[CLS] this sentence of " a dog runs " means [MASK]. [SEP]'
    assert decode(batch["view2"]) == '[CLS] this sentence : " a dog runs " means [MASK]. [SEP]'
    with pytest.raises(Exception, match=r"\[X\]"):
        promptbert.Objective(tiny_model, {"template": "no slot [MASK] ."}, seed=0)
    with pytest.raises(Exception, match="pooling"):
        promptbert.Objective(tiny_model, {"pooling": "mean"}, seed=0)


# --- RankEncoder

def test_rank_similarity_equals_scipy_spearman_on_a_hand_made_example():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(40, 6))
    a, b = rng.normal(size=(5, 6)), rng.normal(size=(5, 6))
    got = rankencoder.rank_similarity(a, b, ref)

    def cos(x, y):
        return (x @ y.T) / np.linalg.norm(x, axis=1)[:, None] / np.linalg.norm(y, axis=1)[None]

    expected = [spearmanr(cos(a[i:i + 1], ref)[0], cos(b[i:i + 1], ref)[0]).statistic for i in range(5)]
    np.testing.assert_allclose(got, expected, atol=1e-10)
    # the batch matrix the loss uses agrees with the per-pair values, and a sentence's rank vector matches itself
    m = rankencoder.rank_correlation_matrix(torch.tensor(cos(a, ref)), torch.tensor(cos(b, ref))).numpy()
    np.testing.assert_allclose(np.diag(m), expected, atol=1e-10)
    assert rankencoder.rank_similarity(a, a, ref) == pytest.approx(np.ones(5))


def test_rankencoder_similarity_is_not_plain_cosine(tiny_model):
    obj = rankencoder.Objective(tiny_model, {"corpus_size": 30}, seed=0)
    with pytest.raises(RuntimeError, match="reference corpus"):
        obj.similarity(np.ones((1, 32)), np.ones((1, 32)))
    obj.set_reference(SENTENCES)
    assert len(obj.reference) == 30 and set(obj.reference) <= set(SENTENCES)
    a, b = obj.embed(SENTENCES[:6], 8, 16), obj.embed(SENTENCES[6:12], 8, 16)
    ref = obj.embed(obj.reference, 8, 16)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    expected = 0.9 * cos + 0.1 * rankencoder.rank_similarity(a, b, ref)
    np.testing.assert_allclose(obj.similarity(a, b), expected, atol=1e-5)
    assert not np.allclose(obj.similarity(a, b), cos, atol=1e-4)


# --- one training step each: finite loss, the encoder moves

@pytest.mark.parametrize("module", [bsl, diffcse, promptbert, rankencoder], ids=lambda m: m.NAME)
def test_one_training_step_moves_the_encoder(tiny_model, module, tmp_path):
    torch.manual_seed(0)
    obj = module.Objective(tiny_model, {"predictor_hidden_mult": 2} if module is bsl else {}, seed=0)
    if module is rankencoder:
        obj.set_reference(SENTENCES)
    obj.train()
    before = [p.detach().clone() for p in obj.encoder.parameters()]
    opt = torch.optim.AdamW([p for p in obj.parameters() if p.requires_grad], lr=1e-3)
    loss = obj.loss(obj.make_batch(SENTENCES[:8], np.random.default_rng(0), 16))
    assert torch.isfinite(loss)
    loss.backward()
    opt.step()
    obj.after_step()
    assert any(not torch.equal(b, p) for b, p in zip(before, obj.encoder.parameters()))
    vec = obj.embed(SENTENCES[:3], 2, 16)
    assert vec.shape == (3, 32) and np.isfinite(vec).all()
    obj.save(tmp_path)
    assert (tmp_path / "config.json").exists() and (tmp_path / "contrastive.json").exists()


@pytest.fixture(scope="module")
def dev(data_root):
    return stsb_dev_head(data_root, 60)


@pytest.mark.parametrize("name", ["bsl", "diffcse", "promptbert", "rankencoder"])
def test_each_objective_trains_through_the_shared_loop_deterministically(tiny_model, dev, name):
    budget = {"steps": 2, "batch_size": 4, "max_length": 16, "lr": 1e-3, "eval_every": 1}
    params = {"predictor_hidden_mult": 2} if name == "bsl" else {}
    runs = [train.train(name, tiny_model, params, Corpus(SENTENCES, [], {}), dev, budget, seed=1, device="cpu",
                        progress=False) for _ in range(2)]
    assert len(runs[0]["losses"]) == 2 and all(np.isfinite(runs[0]["losses"])) and runs[0]["best_step"] in (1, 2)
    assert runs[0]["losses"] == runs[1]["losses"] and runs[0]["history"] == runs[1]["history"]  # same seed, same run
    assert runs[0]["objective_params"]["pooling"] == {"bsl": "mean", "diffcse": "cls-before-pooler", "promptbert": "mask",
                                                        "rankencoder": "cls-before-pooler"}[name]


# --- DiffCSE with a separate generator (the paper's distilbert-base-uncased; here a tiny DistilBERT MLM)

def _tiny_distilbert(path, tiny_model, extra_rows=0):
    """A 1-layer, dim-32 DistilBERT MLM with the tiny BERT's tokenizer (`extra_rows` more embedding rows: another
    vocabulary), random weights."""
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertForMaskedLM

    tok = AutoTokenizer.from_pretrained(tiny_model)
    torch.manual_seed(1)
    DistilBertForMaskedLM(DistilBertConfig(vocab_size=len(tok) + extra_rows, dim=32, n_layers=1, n_heads=2, hidden_dim=64,
                                           max_position_embeddings=64)).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def test_diffcse_with_a_separate_distilbert_generator_takes_a_training_step(tiny_model, tmp_path):
    gen = _tiny_distilbert(tmp_path / "gen", tiny_model)
    obj = diffcse.Objective(tiny_model, {"generator": gen}, seed=0).train()
    assert type(obj.generator).__name__ == "DistilBertForMaskedLM" and not obj.generator.training
    assert not any(p.requires_grad for p in obj.generator.parameters())
    frozen = [p.detach().clone() for p in obj.generator.parameters()]
    before = [p.detach().clone() for p in obj.encoder.parameters()]
    batch = obj.make_batch(SENTENCES[:8], np.random.default_rng(0), 16)
    opt = torch.optim.AdamW([p for p in obj.parameters() if p.requires_grad], lr=1e-3)
    loss = obj.loss(batch)
    assert torch.isfinite(loss)
    loss.backward()
    opt.step()
    assert float(obj.rtd_head.weight.grad.abs().sum()) > 0  # the detection loss reached the head
    assert any(not torch.equal(b, p) for b, p in zip(before, obj.encoder.parameters()))
    assert all(torch.equal(b, p) for b, p in zip(frozen, obj.generator.parameters()))
    # the generator is the saved DistilBERT (its weights, not the encoder's own MLM head), fed the encoder's ids
    from transformers import AutoModelForMaskedLM

    saved = AutoModelForMaskedLM.from_pretrained(gen).eval()
    own = diffcse.Objective(tiny_model, {}, seed=0).generator
    ids = {"input_ids": batch["mlm_ids1"], "attention_mask": batch["attention_mask"]}
    with torch.no_grad():
        ours = obj.generator(**ids).logits
        assert torch.equal(ours, saved(**ids).logits) and not torch.allclose(ours, own(**ids).logits)


def test_diffcse_refuses_a_generator_with_another_vocabulary_in_one_line(tiny_model, tmp_path):
    from plmclaims.errors import UserError

    gen = _tiny_distilbert(tmp_path / "gen", tiny_model, extra_rows=5)
    with pytest.raises(UserError) as err:
        diffcse.Objective(tiny_model, {"generator": gen}, seed=0)
    msg = str(err.value)
    assert "\n" not in msg and "generator" in msg and gen in msg and "vocabulary" in msg


def test_diffcse_refuses_a_generator_saved_without_its_masked_lm_head(tiny_model, tmp_path):
    """An encoder saved without its MLM head (a sentence encoder, a base model) would load with a random head and
    generate noise; it is refused in one line naming the folder. The micro-BERT's own head loads."""
    from transformers import AutoModel, AutoTokenizer

    from plmclaims.errors import UserError

    headless = tmp_path / "headless"
    AutoModel.from_pretrained(tiny_model).save_pretrained(headless)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(headless)
    with pytest.raises(UserError) as err:
        diffcse.Objective(tiny_model, {"generator": str(headless)}, seed=0)
    msg = str(err.value)
    assert "\n" not in msg and str(headless) in msg and "no masked-LM head" in msg
    assert diffcse.Objective(tiny_model, {}, seed=0).generator is not None


# --- the cost plan's passes per step (costs.CONTRASTIVE_STEP) are the ones each loss runs

DOCUMENTS = [["the red dog sees a house .", "the red dog likes a tree ."] * 4, ["one two three four five six ."] * 6,
             ["a man plays a guitar on the stage ."] * 5]


@pytest.mark.parametrize("name", sorted(contrastive.OBJECTIVES))
def test_the_cost_plans_passes_per_step_are_the_ones_the_loss_runs(tiny_model, name):
    """Sequences through each network in one loss() call, counted with forward hooks, per batch example: what
    `plmclaims plan` prices each contrastive run at. PromptBERT's template-only denoising passes (their own position
    ids, one row per sentence length) are priced apart and counted apart here."""
    from collections import Counter

    from plmclaims import costs

    module = contrastive.get(name)
    obj = module.Objective(tiny_model, {"predictor_hidden_mult": 2} if name == "bsl" else {}, seed=0)
    examples = DOCUMENTS if module.INPUT == "documents" else SENTENCES[:6]
    if name == "rankencoder":  # the reference corpus is encoded once before the first step, priced per run
        obj.set_reference(SENTENCES)
        obj.base_reference(max_length=16)
    rows: Counter = Counter()
    roles = {"encoder": "trained", "discriminator": "trained", "target": "frozen", "base": "frozen",
             "generator": "generator"}

    def hook(role):
        def count(mod, args, kwargs, out):
            ids = kwargs.get("input_ids", args[0] if args else None)
            template = name == "promptbert" and kwargs.get("position_ids") is not None
            rows["template" if template else role] += ids.shape[0]
        return count

    for attr, role in roles.items():
        if isinstance(getattr(obj, attr, None), torch.nn.Module):
            getattr(obj, attr).register_forward_hook(hook(role), with_kwargs=True)
    obj.train()
    batch = obj.make_batch(examples, np.random.default_rng(0), 16)
    obj.loss(batch)
    step, _ = costs.contrastive_step(name, {})  # at the recipe's settings, as the loss ran
    n = len(examples)
    assert {r: k for r, k in rows.items() if r != "template"} == {r: step[r] * n for r in ("trained", "frozen", "generator") if r in step}
    if name == "promptbert":  # one template-only row per distinct sentence length, per view
        assert 2 <= rows["template"] <= 2 * n
    trained_models = sum(1 for attr in ("encoder", "discriminator") if isinstance(getattr(obj, attr, None), torch.nn.Module))
    assert step.get("models", 1) == trained_models


def test_the_cost_plans_copies_of_recipe_settings_are_the_objectives_defaults():
    from plmclaims import costs

    for name, settings in costs.CONTRASTIVE_DEFAULTS.items():
        defaults = contrastive.get(name).DEFAULTS
        assert {k: defaults[k] for k in settings} == settings, name
