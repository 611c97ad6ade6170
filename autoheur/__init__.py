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


class SettingError(ValueError):
    """An AUTOHEUR_* environment setting with a value it does not take: the CLI says so in one line (exit 2)."""


FLAGS = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False, "no": False}


def env_flag(name: str, default: bool) -> bool:
    """An on/off knob (AUTOHEUR_CACHE, AUTOHEUR_CHECK_OFFSETS, AUTOHEUR_FOREST, AUTOHEUR_BORROW_MODEL): unset is
    `default`; any other value must be one of FLAGS' spellings, any case, so that a typo is refused rather than read
    as on."""
    text = os.environ.get(name)
    if text is None:
        return default
    value = text.strip().lower()
    if value not in FLAGS:
        raise SettingError(f"{name}={text!r}: expected one of {tuple(FLAGS)}")
    return FLAGS[value]


def __getattr__(name: str):
    if name == "grouped_mm":
        from autoheur.inference.api import grouped_mm

        return grouped_mm
    if name == "ops":
        from autoheur.inference import op

        return op
    raise AttributeError(f"module 'autoheur' has no attribute {name!r}")
