"""plmclaims: a reproducible replication suite for published claims about pre-trained language models."""

__version__ = "0.1.0"
