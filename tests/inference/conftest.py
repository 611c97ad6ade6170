"""Shared by the run-time tests: every test gets its own disk cache, a fresh process tuner and a small top-k (the
interpreter is slow), with tensors made on the default device (the GPU where there is one, as tests/conftest.py
decides)."""

from __future__ import annotations

import pytest
import torch

from autoheur.inference import tuner as tuner_mod

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOHEUR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AUTOHEUR_TOP_K", "2")
    monkeypatch.setattr(tuner_mod, "_TUNER", None)
    torch.set_default_device(DEVICE)
    yield
    torch.set_default_device(None)
