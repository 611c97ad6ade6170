"""autoheur: a learned config predictor for Triton grouped GEMM (torch._grouped_mm).

`autoheur.grouped_mm(a, b, offs=None, out_dtype=None)` has torch._grouped_mm's semantics and picks its kernel config
by prediction plus a brief autotune (imported lazily: `import autoheur` stays cheap for the command line).
"""

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where autoheur keeps what it builds at run time (tuned configs, the compiled tree walk): $AUTOHEUR_CACHE_DIR,
    else ~/.cache/autoheur."""
    return Path(os.environ.get("AUTOHEUR_CACHE_DIR") or Path.home() / ".cache" / "autoheur")


def __getattr__(name: str):
    if name == "grouped_mm":
        from autoheur.inference.api import grouped_mm

        return grouped_mm
    if name == "ops":
        from autoheur.inference import op

        return op
    raise AttributeError(f"module 'autoheur' has no attribute {name!r}")
