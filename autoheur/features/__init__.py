"""Pure feature functions: (problem, config, device) -> named float32 features, one vectorized path.

Training: `feature_matrix(dataset_frame, dataset_frame, metadata.device)`. Inference:
`problem_config_matrix(problem, candidate_configs, device)`. Columns are `FEATURE_NAMES`; FEATURES.md says what each
one is and why it matters. numpy and pandas only: importing this package does not import torch.
"""

from autoheur.features.config import CONFIG_COLUMNS, ConfigArrays, config_arrays, config_frame
from autoheur.features.core import (
    FEATURE_NAMES,
    FEATURES_VERSION,
    feature_matrix,
    features_hash,
    problem_config_matrix,
)
from autoheur.features.device import DeviceParams, device_params
from autoheur.features.problem import SCALAR_COLUMNS, problem_frame

__all__ = [
    "CONFIG_COLUMNS", "FEATURES_VERSION", "FEATURE_NAMES", "SCALAR_COLUMNS", "ConfigArrays", "DeviceParams",
    "config_arrays", "config_frame", "device_params", "feature_matrix", "features_hash", "problem_config_matrix",
    "problem_frame",
]  # fmt: skip
