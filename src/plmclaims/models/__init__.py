"""Models the workflow builds itself (the micro tier's small BERT)."""
