"""The Triton grouped-GEMM kernel family and its config space."""

from autoheur.kernels.config import (
    SPACE_HASH,
    KernelConfig,
    Ragged,
    Signature,
    all_configs,
    feasible_configs,
    infeasible_reason,
)
from autoheur.kernels.grouped_gemm import grouped_mm, launch
from autoheur.kernels.reference import reference_grouped_mm, relative_error
from autoheur.kernels.validate import GemmCall, validate

__all__ = [
    "SPACE_HASH",
    "GemmCall",
    "KernelConfig",
    "Ragged",
    "Signature",
    "all_configs",
    "feasible_configs",
    "grouped_mm",
    "infeasible_reason",
    "launch",
    "reference_grouped_mm",
    "relative_error",
    "validate",
]
