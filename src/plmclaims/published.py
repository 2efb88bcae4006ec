"""The published architectures of the hub models a tier names: each repository's config.json values, the class its
weights were saved from and its tokenizer's kind and vocabulary, written out because nothing can be downloaded here.

The rehearsal builds its stand-ins to these (plmclaims.standins), the contrastive family checks a recipe's generator or
base encoder against the encoder's tokenizer with them, and the cost estimate sizes models by them. A hub model without
an entry cannot be rehearsed and is named in one line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

BERT = {"model_type": "bert", "type_vocab_size": 2, "max_position_embeddings": 512, "hidden_act": "gelu",
        "layer_norm_eps": 1e-12, "pad_token_id": 0}
T5 = {"model_type": "t5", "d_kv": 64, "relative_attention_num_buckets": 32, "feed_forward_proj": "relu",
      "n_positions": 512, "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0, "vocab_size": 32128}
# T5 1.1 (the LM-adapted checkpoints Lester et al. prompt-tune): gated-GELU feed-forward, untied input and output
# embeddings, no dropout change; sizes from the T5 1.1 release notes (text-to-text-transfer-transformer,
# released_checkpoints.md) and the repositories' config.json
T5_V11 = {**T5, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False, "layer_norm_epsilon": 1e-6,
          "relative_attention_max_distance": 128}

BERT_BASE_UNCASED = {**BERT, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                     "vocab_size": 30522}
ROBERTA_BASE = {"model_type": "roberta", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                "intermediate_size": 3072, "vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1,
                "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}


@dataclass(frozen=True)
class Published:
    """One hub model's published architecture: its config.json values, the class its weights were saved from (so every
    AutoModel* loads the same key prefixes as from the real file), and its tokenizer's kind and vocabulary."""

    architecture: str
    config: dict
    tokenizer: str  # wordpiece | wordpiece-cased | roberta-bpe | gpt2-bpe | t5-unigram
    vocab: int  # the tokenizer's own size (T5's embedding has 28 rows more than its tokenizer)
    sentence_transformers: dict = field(default_factory=dict)  # {max_seq_length, pooling, normalize} for ST repos


PUBLISHED = {
    "google-bert/bert-base-uncased": Published("BertForMaskedLM", {**BERT, "hidden_size": 768, "num_hidden_layers": 12,
                                               "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522}, "wordpiece", 30522),
    "princeton-nlp/unsup-simcse-bert-base-uncased": Published("BertModel", {**BERT, "hidden_size": 768, "num_hidden_layers": 12,
                                                              "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522}, "wordpiece", 30522),
    "sentence-transformers/all-MiniLM-L6-v2": Published("BertModel", {**BERT, "hidden_size": 384, "num_hidden_layers": 6,
                                                        "num_attention_heads": 12, "intermediate_size": 1536, "vocab_size": 30522},
                                                        "wordpiece", 30522, {"max_seq_length": 256, "normalize": True}),
    "google-bert/bert-large-cased": Published("BertForMaskedLM", {**BERT, "hidden_size": 1024, "num_hidden_layers": 24,
                                              "num_attention_heads": 16, "intermediate_size": 4096, "vocab_size": 28996}, "wordpiece-cased", 28996),
    "FacebookAI/roberta-base": Published("RobertaForMaskedLM", {"model_type": "roberta", "hidden_size": 768, "num_hidden_layers": 12,
                                         "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 50265,
                                         "max_position_embeddings": 514, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
                                         "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}, "roberta-bpe", 50265),
    "google-t5/t5-small": Published("T5ForConditionalGeneration", {**T5, "d_model": 512, "d_ff": 2048, "num_heads": 8,
                                    "num_layers": 6, "num_decoder_layers": 6}, "t5-unigram", 32100),
    "google-t5/t5-base": Published("T5ForConditionalGeneration", {**T5, "d_model": 768, "d_ff": 3072, "num_heads": 12,
                                   "num_layers": 12, "num_decoder_layers": 12}, "t5-unigram", 32100),
    "google-t5/t5-large": Published("T5ForConditionalGeneration", {**T5, "d_model": 1024, "d_ff": 4096, "num_heads": 16,
                                    "num_layers": 24, "num_decoder_layers": 24}, "t5-unigram", 32100),
    "google/t5-small-lm-adapt": Published("T5ForConditionalGeneration", {**T5_V11, "d_model": 512, "d_ff": 1024, "num_heads": 6,
                                          "num_layers": 8, "num_decoder_layers": 8}, "t5-unigram", 32100),
    "google/t5-base-lm-adapt": Published("T5ForConditionalGeneration", {**T5_V11, "d_model": 768, "d_ff": 2048, "num_heads": 12,
                                         "num_layers": 12, "num_decoder_layers": 12}, "t5-unigram", 32100),
    "google/t5-large-lm-adapt": Published("T5ForConditionalGeneration", {**T5_V11, "d_model": 1024, "d_ff": 2816, "num_heads": 16,
                                          "num_layers": 24, "num_decoder_layers": 24}, "t5-unigram", 32100),
    "openai-community/gpt2-medium": Published("GPT2LMHeadModel", {"model_type": "gpt2", "n_embd": 1024, "n_layer": 24, "n_head": 16,
                                              "n_positions": 1024, "vocab_size": 50257, "activation_function": "gelu_new",
                                              "bos_token_id": 50256, "eos_token_id": 50256}, "gpt2-bpe", 50257),
    # the contrastive family's released checkpoints: their base model's published configuration (the class their
    # weights were saved from is not checked offline: AutoModel loads either prefix)
    "princeton-nlp/unsup-simcse-roberta-base": Published("RobertaModel", ROBERTA_BASE, "roberta-bpe", 50265),
    "johngiorgi/declutr-base": Published("RobertaModel", ROBERTA_BASE, "roberta-bpe", 50265),
    "voidism/diffcse-bert-base-uncased-sts": Published("BertModel", BERT_BASE_UNCASED, "wordpiece", 30522),
    "royokong/unsup-PromptBERT": Published("BertModel", BERT_BASE_UNCASED, "wordpiece", 30522),
    # not named by paper.yaml today; written out so that a family taking one of these common encoders rehearses at once
    "google-bert/bert-base-cased": Published("BertForMaskedLM", {**BERT, "hidden_size": 768, "num_hidden_layers": 12,
                                             "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 28996}, "wordpiece-cased", 28996),
    "google-bert/bert-large-uncased": Published("BertForMaskedLM", {**BERT, "hidden_size": 1024, "num_hidden_layers": 24,
                                                "num_attention_heads": 16, "intermediate_size": 4096, "vocab_size": 30522}, "wordpiece", 30522),
    "distilbert/distilbert-base-uncased": Published("DistilBertForMaskedLM", {"model_type": "distilbert", "dim": 768, "n_layers": 6,
                                                    "n_heads": 12, "hidden_dim": 3072, "vocab_size": 30522,
                                                    "max_position_embeddings": 512, "activation": "gelu", "pad_token_id": 0},
                                                    "wordpiece", 30522),
    "FacebookAI/roberta-large": Published("RobertaForMaskedLM", {"model_type": "roberta", "hidden_size": 1024, "num_hidden_layers": 24,
                                          "num_attention_heads": 16, "intermediate_size": 4096, "vocab_size": 50265,
                                          "max_position_embeddings": 514, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
                                          "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}, "roberta-bpe", 50265),
    "openai-community/gpt2": Published("GPT2LMHeadModel", {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                                       "n_positions": 1024, "vocab_size": 50257, "activation_function": "gelu_new",
                                       "bos_token_id": 50256, "eos_token_id": 50256}, "gpt2-bpe", 50257),
    # MultiBERTs (Sellam et al. 2022): BERT-base pre-trainings, one repository per seed and per saved step, each with
    # bert-base-uncased's published configuration and vocabulary (saved from BertForPreTraining: MLM and NSP heads)
    "google/multiberts-seed_{seed}": Published("BertForPreTraining", BERT_BASE_UNCASED, "wordpiece", 30522),
    "google/multiberts-seed_{seed}-step_{step_k}k": Published("BertForPreTraining", BERT_BASE_UNCASED, "wordpiece",
                                                              30522),
}
# static vectors (sentence-transformers WordEmbeddings): the published dimension; the vocabulary is the offline text's
# words (2.2M in the release: a stand-in cannot have them, and no rule's code path depends on its size)
STATIC = {"sentence-transformers/average_word_embeddings_glove.840B.300d": 300}


def published(repo_id: str) -> Published | None:
    """A repository's published architecture: its own entry, or the entry of the family pattern it matches (a key
    with {seed}, {step} or {step_k} fields, each a number)."""
    if repo_id in PUBLISHED:
        return PUBLISHED[repo_id]
    for pattern, pub in PUBLISHED.items():
        if "{" in pattern and re.fullmatch(re.sub(r"\\\{\w+\\\}", r"\\d+", re.escape(pattern)), repo_id):
            return pub
    return None

WIDTH_KEYS = {"bert": ("hidden_size", "num_attention_heads", "intermediate_size"),
              "roberta": ("hidden_size", "num_attention_heads", "intermediate_size"),
              "gpt2": ("n_embd", "n_head", None), "t5": ("d_model", "num_heads", "d_ff"),
              "distilbert": ("dim", "n_heads", "hidden_dim")}


def shaped(pub: Published, shapes: str, head_size: int) -> dict:
    """The config to build: the published one, or with shapes 'cut' the same depth, heads, vocabulary, positions and
    model type at `head_size` per head (hidden = heads x head_size; the feed-forward keeps its published ratio)."""
    config = dict(pub.config)
    if shapes == "real":
        return config
    hidden, heads, ffn = WIDTH_KEYS[config["model_type"]]
    ratio = config[ffn] / config[hidden] if ffn else None
    config[hidden] = config[heads] * head_size
    if ffn:
        config[ffn] = int(config[hidden] * ratio)
    if config["model_type"] == "t5":
        config["d_kv"] = head_size
    return config
