"""Run time: `grouped_mm` with a predicted, briefly autotuned and cached config; the custom op for torch.compile
(`torch.ops.autoheur.grouped_mm`, registered on import)."""

from autoheur.inference import op  # noqa: F401  (registers torch.ops.autoheur.grouped_mm)
from autoheur.inference.api import grouped_mm

__all__ = ["grouped_mm"]
