"""Evaluators: SentEval-style STS (our own) and MTEB-protocol STS (through the mteb package)."""
