"""Causal language models scored on GLUE through lm-evaluation-harness, fully offline.

`smollm` turns the GGUF file shipped in a pip package into a plain transformers folder, `tasks`
writes lm-eval task files from the local GLUE data, `train` adapts a causal LM to a task with a
PEFT method (or full fine-tuning) on the same prompts, and `evaluate` runs lm-eval on the result.
"""
