"""Run time: `grouped_mm` with a predicted, briefly autotuned and cached config; the custom op for torch.compile
(`torch.ops.autoheur.grouped_mm`, registered on import)."""

from autoheur.inference import op  # noqa: F401  (registers torch.ops.autoheur.grouped_mm)
from autoheur.inference.api import grouped_mm
from autoheur.inference.tuner import default_tuner


def prepare(device: int | None = None, wait: bool = False) -> None:
    """Load the GPU's model and import the kernel now, and with AUTOHEUR_COMPILE_IN=processes start the compile
    workers (once, at a serving process's start-up), so that the first call of a new shape pays only for compiling
    and timing its candidates. `wait`: return once the workers are up."""
    default_tuner().prepare(device, wait)


__all__ = ["grouped_mm", "prepare"]
