"""The feature matrix: one vectorized path for training (a dataset frame) and inference (one problem, many configs).

Rows pair a problem with a config on a device. Problem-only quantities are computed once per distinct problem and
gathered; config and pair features are numpy expressions over the rows. `FEATURE_NAMES` orders the columns;
`features_hash()` fingerprints names and version so a model refuses features it was not trained on. Pure: numpy and
pandas only (no torch, no CUDA, no I/O), deterministic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from autoheur.features.config import CONFIG_FEATURES, ConfigArrays, config_arrays, config_features
from autoheur.features.derived import DERIVED_FEATURES, derived_features
from autoheur.features.device import DeviceParams, device_params
from autoheur.features.problem import PROBLEM_FEATURES, SCALAR_COLUMNS, ProblemArrays, problem_features

if TYPE_CHECKING:
    from autoheur.kernels.config import KernelConfig
    from autoheur.problem import Problem

# Bump whenever a feature is added, removed, reordered or changes meaning (models store features_hash()).
FEATURES_VERSION = 3
FEATURE_NAMES: tuple[str, ...] = PROBLEM_FEATURES + CONFIG_FEATURES + DERIVED_FEATURES
N_PROBLEM = len(PROBLEM_FEATURES)


def features_hash() -> str:
    """sha256 of the version and the ordered names, 16 hex digits."""
    text = f"v{FEATURES_VERSION};" + ";".join(FEATURE_NAMES)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _distinct_problems(problems: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row's problem, first row of each code). Codes number problems in order of first appearance.

    Rows are keyed by `problem_id` when the frame has it, else by the scalar problem columns (two problems whose
    size statistics all agree would then share the first one's sizes).
    """
    if "problem_id" in problems.columns:
        codes = pd.factorize(problems["problem_id"], sort=False)[0]
    else:
        codes = problems.groupby(list(SCALAR_COLUMNS), sort=False, dropna=False).ngroup().to_numpy()
    codes = np.asarray(codes, dtype=np.intp)
    if len(codes) == 0:
        return codes, codes
    running = np.maximum.accumulate(codes)
    first = np.flatnonzero(np.r_[True, running[1:] > running[:-1]])
    return codes, first


def _assemble(
    pblock: np.ndarray, p: ProblemArrays, codes: np.ndarray | None, c: ConfigArrays, dev: DeviceParams
) -> np.ndarray:
    """Gather the problem block (rows of `pblock` by `codes`, or its one row broadcast) and add the other columns.

    Built feature-major and returned transposed: a column-major (n, F) array, each feature contiguous. Filling a
    row-major array column by column costs twice as long on a million rows; np.ascontiguousarray if rows must be.
    """
    cfeat = config_features(c, p.elem[0] if codes is None else p.elem[codes], dev)
    dfeat = derived_features(p, codes, c, dev, cfeat["occupancy"], cfeat["log2_tile_intensity"])
    out = np.empty((len(FEATURE_NAMES), len(c)), dtype=np.float32)
    out[:N_PROBLEM] = pblock[0][:, None] if codes is None else pblock[codes].T
    for j, name in enumerate(CONFIG_FEATURES + DERIVED_FEATURES, start=N_PROBLEM):
        out[j] = cfeat[name] if name in cfeat else dfeat[name]
    return out.T


def feature_matrix(problems: pd.DataFrame, configs: pd.DataFrame, device: Mapping) -> np.ndarray:
    """Features of row-aligned `problems` x `configs` on `device`: float32 (rows, len(FEATURE_NAMES)).

    `problems` has the schema's problem columns (layout ... empty_groups, and `sizes` for exact tile counts),
    `configs` the config columns; a dataset frame can be passed as both. `device` is a device fingerprint mapping
    (or DeviceSpec); missing `copy_GBps` / `matmul_TFLOPs` default by name (see `device_params`).
    """
    if len(problems) != len(configs):
        raise ValueError(f"problems has {len(problems)} rows, configs {len(configs)}: they must be row-aligned")
    dev = device_params(device)
    c = config_arrays(configs)
    codes, first = _distinct_problems(problems)
    distinct = ProblemArrays.from_frame(problems.iloc[first])
    pfeat = problem_features(distinct, dev)
    pblock = np.stack([pfeat[name] for name in PROBLEM_FEATURES], axis=1).astype(np.float32)
    return _assemble(pblock, distinct, codes, c, dev)


def problem_config_matrix(
    problem: Problem, configs: Sequence[KernelConfig] | pd.DataFrame | ConfigArrays, device: Mapping
) -> np.ndarray:
    """Features of one `problem` with each of `configs` (inference): float32 (len(configs), len(FEATURE_NAMES)).

    Pass the candidate configs as a tuple (cached by identity), a `ConfigArrays`, or a config frame.
    Equal to `feature_matrix(problem_frame(problem) repeated, config_frame(configs), device)`, and row-major (the
    layout XGBoost's prediction reads, so it needs no copy).
    """
    dev = device_params(device)
    cached = isinstance(configs, (tuple, ConfigArrays))  # the same object call after call: its block is kept
    c = config_arrays(configs)
    p = ProblemArrays.from_problem(problem)
    pfeat = problem_features(p, dev)
    block = _config_block(c, float(p.elem[0]), dev, cached)
    # The derived features of each distinct (block sizes, stages, occupancy), given to every config that shares it:
    # they read nothing else of a config, and ~2,200 candidates have ~280 such combinations.
    dfeat = derived_features(p, None, block.distinct, dev, block.occupancy, block.log2_tile_intensity)
    out = np.empty((len(c), len(FEATURE_NAMES)), dtype=np.float32)
    out[:, :N_PROBLEM] = np.array([pfeat[name] for name in PROBLEM_FEATURES], dtype=np.float32).T
    out[:, N_PROBLEM:_N_PC] = block.columns
    out[:, _N_PC:] = np.stack([dfeat[name] for name in DERIVED_FEATURES], axis=1)[block.inverse]
    return out


_N_PC = N_PROBLEM + len(CONFIG_FEATURES)


def problem_vector(problem: Problem, device: Mapping) -> np.ndarray:
    """The PROBLEM_FEATURES of `problem` on `device` (float32, N_PROBLEM): the first columns of each row of its
    problem_config_matrix, without the configs."""
    pfeat = problem_features(ProblemArrays.from_problem(problem), device_params(device))
    return np.array([pfeat[name] for name in PROBLEM_FEATURES], dtype=np.float32).reshape(-1)


def prepare_configs(configs: tuple[KernelConfig, ...], elem_bytes: int, device: Mapping) -> None:
    """Build and cache now what `problem_config_matrix` reads of a candidate tuple for problems of `elem_bytes`-byte
    elements on `device` (its config arrays and their problem-free features), which its first call would."""
    _config_block(config_arrays(configs), float(elem_bytes), device_params(device), True)


@dataclass(frozen=True, slots=True, eq=False)
class _ConfigBlock:
    """What inference needs of a candidate set that does not depend on the problem."""

    columns: np.ndarray  # (n, len(CONFIG_FEATURES)) float32: the CONFIG_FEATURES of each config
    distinct: ConfigArrays  # one config of each distinct (bm, bn, bk, stages, occupancy), the inputs of derived
    occupancy: np.ndarray  # the CONFIG_FEATURES derived_features reads, of `distinct`'s configs
    log2_tile_intensity: np.ndarray
    inverse: np.ndarray  # (n,): the row of `distinct` that stands for each config


_BLOCKS: dict[tuple, tuple[ConfigArrays, _ConfigBlock]] = {}


def _config_block(c: ConfigArrays, elem: float, dev: DeviceParams, cache: bool) -> _ConfigBlock:
    key = (id(c), elem, dev)
    hit = _BLOCKS.get(key) if cache else None
    if hit is not None and hit[0] is c:
        return hit[1]
    cfeat = config_features(c, elem, dev)
    columns = np.stack([np.broadcast_to(cfeat[name], len(c)) for name in CONFIG_FEATURES], axis=1)
    inputs = np.stack([c.bm, c.bn, c.bk, c.stages, cfeat["occupancy"]], axis=1)
    _, first, inverse = np.unique(inputs, axis=0, return_index=True, return_inverse=True)
    pick = lambda a: np.ascontiguousarray(np.broadcast_to(a, len(c))[first])
    block = _ConfigBlock(
        columns.astype(np.float32),
        ConfigArrays(*(pick(getattr(c, f.name)) for f in fields(ConfigArrays))),
        pick(cfeat["occupancy"]),
        pick(cfeat["log2_tile_intensity"]),
        inverse.reshape(-1),
    )
    if cache:
        if len(_BLOCKS) >= 16:
            _BLOCKS.pop(next(iter(_BLOCKS)))
        _BLOCKS[key] = (c, block)  # holds `c`: its id cannot be reused while cached
    return block
