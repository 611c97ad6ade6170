"""Trained models on disk: the fitted ranker plus what it depends on, checked on load.

A model file (`models/<device-slug>.joblib`, with a readable `<device-slug>.json` of its metadata beside it) holds:
the ranker, its feature names and features hash, the config-space hash, the device fingerprint of its training data,
the training-data hash, library versions, the held-out figures measured when it was trained, and the best fixed
list of 10 of its training data (the fallback). Loading refuses a model whose space or features differ from the
installed code, saying how to retrain.
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from autoheur.device import device_slug
from autoheur.features import FEATURE_NAMES, features_hash
from autoheur.kernels.config import SPACE_HASH, KernelConfig, Ragged, Signature, all_configs, feasible_mask
from autoheur.models.base import Ranker

FORMAT_VERSION = 1
MODELS_DIR = Path(__file__).resolve().parents[2] / "models"
RETRAIN = "retrain it with this autoheur: autoheur train --data data/<device-slug> (see README)"
RESTORE = "restore the model and its side-car .json from git (git checkout -- models/), or " + RETRAIN
# A model of another config space was trained on a dataset of that space, which `autoheur train` refuses (check_space).
RECOLLECT = (
    "its training data was timed over that config space too, which training refuses: re-collect it with this autoheur "
    "(autoheur collect{family} --out {data} --new-dataset{aux}), then retrain (autoheur train --data {data}; see "
    "README); or install the autoheur version that trained it"
)
# Metadata every model must carry: inference reads them (the device's fields decide the feasible configs).
REQUIRED_META = ("device", "space_hash", "features_hash", "feature_names")
# What tells one trained model from another: a side-car must agree with its model file on these.
IDENTITY_META = ("family", "device", "train_data_hash", "created_at")


# Packages under every distribution name they ship as (xgboost also comes as the CPU-only wheel "xgboost-cpu").
_DISTRIBUTIONS = {
    "autoheur": ("autoheur",),
    "xgboost": ("xgboost", "xgboost-cpu"),
    "scikit-learn": ("scikit-learn",),
    "numpy": ("numpy",),
    "pandas": ("pandas",),
}


def library_versions() -> dict:
    """package -> installed version, None where it is not installed."""
    out = {}
    for pkg, names in _DISTRIBUTIONS.items():
        out[pkg] = None
        for name in names:
            try:
                out[pkg] = version(name)
                break
            except PackageNotFoundError:
                continue
    return out


def check_margin(value, name: str) -> float:
    """A range margin (`TrainedModel.extrapolation`, the Inductor filter's `range_margin`) as a float: a finite share of
    a feature's training span, 0 or more; ValueError naming `name` otherwise (a bool, NaN, a string included)."""
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf")):
        raise ValueError(f"{name}={value!r}: expected a share of a feature's training span, 0 or more")
    return float(value)


@dataclass
class TrainedModel:
    ranker: Ranker
    meta: dict = field(default_factory=dict)
    _candidates: dict = field(default_factory=dict, repr=False, compare=False)  # (signature, device) -> configs
    _feasible_sets: dict = field(default_factory=dict, repr=False, compare=False)  # (mask, device) -> configs

    # -- inference ------------------------------------------------------------------------------------------------

    @property
    def device(self) -> dict:
        return self.meta["device"]

    @property
    def fixed_list(self) -> list[str]:
        return list(self.meta.get("fixed_list", []))

    def candidates(self, problem, device: dict, signature: Signature | None = None) -> tuple[KernelConfig, ...]:
        """The feasible configs of `problem` on `device` (`signature`: its call's, where the operands are known, e.g.
        one broadcast along its rows, which goes by pointers; default: the problem's); one tuple per (signature,
        device), kept (the feature code caches a tuple's config arrays by identity), and one tuple per distinct
        feasible set: signatures that differ only where feasibility does not look (the layout) share it, and with it
        its cached arrays."""
        key = (signature or problem.signature(), device["name"])
        hit = self._candidates.get(key)
        if hit is None:
            hit = self._candidates[key] = self._feasible(key[0], device)
        return hit

    def _feasible(self, sig, device: dict) -> tuple[KernelConfig, ...]:
        from autoheur.device import DeviceSpec

        spec = DeviceSpec.from_dict({k: device[k] for k in DeviceSpec.__dataclass_fields__})
        mask = feasible_mask(sig, spec)
        key = (mask.tobytes(), device["name"])
        if key not in self._feasible_sets:
            space = all_configs()
            self._feasible_sets[key] = tuple(space[i] for i in np.flatnonzero(mask).tolist())
        return self._feasible_sets[key]

    def extrapolation(self, problem, device: dict | None = None, margin: float = 0.0) -> list[str]:
        """The problem features of `problem` outside the range the model was trained on (empty: inside it); with a
        `margin`, only those further out than that share of the feature's span in training (a feature constant in
        training has no span: any other value is outside)."""
        check_margin(margin, "margin")
        from autoheur.features.core import N_PROBLEM, problem_vector

        out = []
        kinds = self.meta.get("problem_kinds")  # models trained before it was recorded: ranges only
        kind = problem_kind(problem)
        if kinds is not None and list(kind) not in kinds:
            out.append("{} {} with A {}-major and B {}-major (never trained on this operand layout)".format(*kind))
        ranges = self.meta.get("problem_ranges")
        if not ranges:
            return out
        device = device or self.device
        x = problem_vector(problem, device)
        for name, v in zip(FEATURE_NAMES[:N_PROBLEM], x.tolist(), strict=True):
            lo, hi = ranges[name]
            pad = margin * (hi - lo) + 1e-6
            if v < lo - pad or v > hi + pad:
                out.append(f"{name}={v:.3g} (trained on {lo:.3g}..{hi:.3g})")
        return out

    def top_k(
        self, problem, k: int = 10, device: dict | None = None, signature: Signature | None = None
    ) -> list[tuple[KernelConfig, float]]:
        """The k best-scored feasible configs of `problem` (device: the training device unless given; `signature`:
        the call's, as in `candidates`)."""
        device = device or self.device
        configs = self.candidates(problem, device, signature)
        scores = np.asarray(self.ranker.rank(problem, configs, device), dtype=float)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(configs[i], float(scores[i])) for i in order]

    def prepare_scoring(self) -> str:
        """Build what scoring needs now rather than on the first top_k: the ranker's boosters read into forest.py's
        node arrays (~0.15 s a booster) and its compiled routine, and the candidate sets (with their feature arrays)
        of the training device for the element sizes the model was trained on, TMA-aligned or not (~1-2 ms each on
        a first call otherwise). Returns forest.status()."""
        from autoheur.features.core import prepare_configs
        from autoheur.models import forest
        from autoheur.problem import DTYPES

        sizes = sorted({DTYPES[kind[1]].itemsize for kind in self.meta.get("problem_kinds") or () if kind[1] in DTYPES})
        for elem in sizes:
            for aligned in (True, False):
                prepare_configs(self._feasible(Signature(Ragged.M, elem, aligned), self.device), elem, self.device)
        return forest.prepare(self.ranker.boosters() if hasattr(self.ranker, "boosters") else ())

    # -- files ----------------------------------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """The model file and its side-car .json, each written to a temp file and renamed into place: a kill or a
        full disk leaves the earlier pair whole (a half-written side-car broke every model lookup)."""
        import joblib

        path = Path(path)
        side = path.with_suffix(".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp, tmp_side = (p.with_name(f".{p.name}.tmp-{os.getpid()}") for p in (path, side))
        try:
            tmp_side.write_text(json.dumps(self.meta, indent=2, default=str) + "\n")
            joblib.dump({"format_version": FORMAT_VERSION, "meta": self.meta, "ranker": self.ranker}, tmp, compress=3)
            os.replace(tmp, path)
            os.replace(tmp_side, side)
        finally:
            tmp.unlink(missing_ok=True)
            tmp_side.unlink(missing_ok=True)
        return path

    @classmethod
    def load(cls, path: str | Path) -> TrainedModel:
        import joblib

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no model at {path}; {RETRAIN}")
        try:
            blob = joblib.load(path)
        except ModuleNotFoundError as exc:  # the model is fine; this environment lacks its library (e.g. xgboost)
            raise ImportError(
                f"{path} needs the Python package {exc.name!r}, which is not installed: pip install {exc.name}"
            ) from None
        except Exception as exc:  # a truncated or foreign file
            raise ValueError(
                f"{path} is not a readable autoheur model ({type(exc).__name__}: {exc}); {RETRAIN}"
            ) from None
        if not isinstance(blob, dict) or blob.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path} is not an autoheur model of format {FORMAT_VERSION}; {RETRAIN}")
        meta = blob.get("meta")
        check_required_meta(meta, path)
        if not isinstance(blob.get("ranker"), Ranker):  # else a KeyError here, or an AttributeError at the first top_k
            what = "no ranker" if blob.get("ranker") is None else f"a {type(blob['ranker']).__name__}, not a ranker"
            raise ValueError(f"{path} holds {what}: not a model `autoheur train` saved; {RETRAIN}")
        problems = []
        space = expected_space_hash(meta.get("family", "triton"))
        if meta.get("space_hash") != space:
            problems.append(f"config-space hash {meta.get('space_hash')} != installed {space}")
        if meta.get("features_hash") != features_hash():
            problems.append(f"features hash {meta.get('features_hash')} != installed {features_hash()}")
        elif list(meta["feature_names"]) != list(FEATURE_NAMES):  # the hash covers the names: one was edited
            problems.append("feature names that are not those its features hash stands for")
        if problems:
            how = RETRAIN
            if meta.get("space_hash") != space:  # its dataset is of that space too, and `autoheur train` refuses it
                family = " --family inductor" if meta.get("family") == "inductor" else ""
                aux = [a["dataset"] for a in meta.get("auxiliary") or () if isinstance(a, dict) and a.get("dataset")]
                also = f"; and its auxiliary data ({', '.join(aux)}) the same way, for --aux" if aux else ""
                how = RECOLLECT.format(family=family, data=meta.get("dataset") or "data/<device-slug>", aux=also)
            raise ValueError(f"{path} does not match this autoheur ({'; '.join(problems)}): {how}")
        stale_kernel_warning(meta, path)
        return cls(blob["ranker"], meta)


def check_required_meta(meta, path) -> None:
    """Refuse a model whose metadata lacks what inference reads (`REQUIRED_META`, the device's name and the fields
    feasibility takes), on load rather than with a KeyError at the first prediction."""
    from autoheur.device import DeviceSpec

    if not isinstance(meta, dict):
        raise ValueError(f"{path} carries no metadata record: not a model `autoheur train` saved; {RETRAIN}")
    missing = [k for k in REQUIRED_META if k not in meta]
    device = meta.get("device")
    if "device" not in missing:
        if not isinstance(device, dict):
            missing.append("device (not a record)")
        else:
            missing += [f"device.{k}" for k in ("name", *DeviceSpec.__dataclass_fields__) if k not in device]
    if missing:
        raise ValueError(f"{path}'s metadata lacks {missing} (edited, or saved by another tool); {RETRAIN}")


def stale_kernel_warning(meta: dict, path) -> None:
    """Warn when a model of autoheur's kernel was trained on timings of another version of the kernel source.

    Not refused: the model still ranks the installed config space, and the brief autotune measures the installed
    kernel, so results stay correct; only the ranking may have drifted."""
    from autoheur.collect.schema import kernel_source_hash

    trained_on, installed = meta.get("kernel_hash"), kernel_source_hash()
    if meta.get("family", "triton") == "triton" and trained_on and trained_on != installed:
        warnings.warn(
            f"{path} was trained on timings of kernel source {trained_on}, but the installed kernel hashes to "
            f"{installed}: its ranking may be stale. Re-collect the dataset and {RETRAIN}",
            stacklevel=3,
        )


def problem_ranges(train) -> dict[str, list[float]]:
    """[min, max] of every problem feature over the training problems: inference says when it extrapolates."""
    from autoheur.features.core import N_PROBLEM

    P = train.X[:, :N_PROBLEM]
    return {n: [float(P[:, j].min()), float(P[:, j].max())] for j, n in enumerate(FEATURE_NAMES[:N_PROBLEM])}


def problem_kind(problem) -> tuple[str, str, str, str]:
    """(layout, dtype, a_major, b_major): what decides the kernel's code path and its compiled binaries."""
    return (problem.layout, problem.dtype, problem.a_major, problem.b_major)


def problem_kinds(train) -> list[list[str]]:
    """The `problem_kind`s of the training problems. Inference says when a problem's is not among them, which the
    features' ranges alone do not show: a 2D x 3D call with W N-contiguous (the backward's dA) had every problem
    feature inside the ranges of the 2D x 3D and 2D x 2D problems, and the model had never seen one (its oracle
    was in the top 10 for 34% of them; BENCHMARKS.md, stop 34)."""
    f = train.frame.drop_duplicates("problem_id")
    return [list(k) for k in sorted(set(zip(f["layout"], f["dtype"], f["a_major"], f["b_major"], strict=True)))]


def expected_space_hash(family: str) -> str:
    """The config-space hash a model of `family` must carry to match the installed code (and torch, for Inductor)."""
    if family == "inductor":
        from autoheur.inductor.choices import grid_hash

        return grid_hash()
    return SPACE_HASH


def build_meta(
    ranker: Ranker,
    train,
    dataset: str,
    fit_s: float,
    heldout: list[dict] | None,
    fixed: list[str],
    family: str = "triton",
    kernel_hash: str = "",
    space_hash: str | None = None,
):
    """The model's metadata. `space_hash`: the training data's config-space hash (train checks it is the installed
    one); None: the installed space of `family`."""
    return {
        "family": family,
        "kernel_hash": kernel_hash,  # the kernel source the training timings were taken on
        "problem_ranges": problem_ranges(train),
        "problem_kinds": problem_kinds(train),
        "model": ranker.name,
        "params": ranker.get_params(),
        "objective": getattr(ranker, "objective_", None),
        "objective_selection": {k: list(v) for k, v in getattr(ranker, "selection_", {}).items()},
        "hedge": getattr(ranker, "hedge_", 0),
        "hedge_selection": {str(k): list(v) for k, v in getattr(ranker, "hedge_selection_", {}).items()},
        "expert_fits": getattr(ranker, "expert_fits_", {}),  # layout experts: each one's problems, objective, hedge
        "feature_names": list(FEATURE_NAMES),
        "features_hash": features_hash(),
        "space_hash": expected_space_hash(family) if space_hash is None else space_hash,
        "device": train.device,
        "dataset": dataset,
        "train_data_hash": train.data_hash(),
        "train_problems": int(len(train.problems)),
        "train_rows": int(len(train.frame)),
        "fit_seconds": round(fit_s, 1),
        "versions": library_versions(),
        "heldout": heldout or [],
        "fixed_list": fixed,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def shipped_models(directory: Path = MODELS_DIR, family: str = "triton") -> list[Path]:
    """The models in `directory` of one kernel family (autoheur's kernel by default, or Inductor's template)."""
    return [path for path, _ in _shipped(directory, family)]


def _shipped(directory: Path, family: str, unreadable: list[str] | None = None) -> list[tuple[Path, dict]]:
    """(model file, its side-car metadata) of every model of `family` in `directory`, each read once. A side-car
    that does not read as a JSON record is left out with a warning (and named in `unreadable`, when given): one
    damaged file must not stop the lookup of the other models."""
    if not directory.exists():
        return []
    out = []
    for path in sorted(directory.glob("*.joblib")):
        side = path.with_suffix(".json")
        try:
            meta = json.loads(side.read_text()) if side.exists() else {}
            if not isinstance(meta, dict):
                raise ValueError(f"a JSON {type(meta).__name__}, not a record")
        except (OSError, ValueError) as exc:
            what = f"{side} is unreadable ({type(exc).__name__}: {exc}), so {path.name} is left out; {RESTORE}"
            warnings.warn(what, stacklevel=3)
            if unreadable is not None:
                unreadable.append(str(side))
            continue
        if meta.get("family", "triton") == family:
            out.append((path, meta))
    return out


# What tells GPUs of one architecture apart in a model's device record, for the nearest one (`nearest_model`).
NEAR_KEYS = ("sm_count", "l2_bytes", "smem_per_sm", "smem_per_block_optin", "regs_per_sm", "max_threads_per_sm")


def model_dirs() -> list[Path]:
    """Where run-time lookups find models: $AUTOHEUR_MODELS_DIR first (a GPU's own model trained outside the
    checkout, e.g. `autoheur train --out $AUTOHEUR_MODELS_DIR/<device-slug>.joblib`), then the shipped `models/`."""
    extra = os.environ.get("AUTOHEUR_MODELS_DIR")
    if extra and not Path(extra).is_dir():
        _warn_missing_models_dir(extra)
    if extra and Path(extra).resolve() == MODELS_DIR.resolve():  # the shipped directory named again: once
        extra = None
    return ([Path(extra)] if extra else []) + [MODELS_DIR]


@functools.cache
def _warn_missing_models_dir(path: str) -> None:
    """Once a process: a set AUTOHEUR_MODELS_DIR that is no directory (a typo) is otherwise silently passed over."""
    warnings.warn(f"AUTOHEUR_MODELS_DIR={path!r} is not a directory: only the shipped models/ is searched",
                  stacklevel=3)  # fmt: skip


def _models_in(directory: Path | None, family: str, unreadable: list[str]) -> list[tuple[Path, dict]]:
    """`_shipped` over `directory`, or over `model_dirs()` in order (the first a GPU's model is found in wins)."""
    dirs = [Path(directory)] if directory is not None else model_dirs()
    return [m for d in dirs for m in _shipped(d, family, unreadable)]


def model_for_device(
    device_name: str, directory: Path | None = None, family: str = "triton", spec: dict | None = None
) -> tuple[TrainedModel | None, str]:
    """(the shipped model of `family` trained on `device_name`, or None and a message naming the fallback). The
    model file must be the one its side-car describes: a model copied over another's file is refused, not used as
    the side-car's device's.

    `spec` (the GPU's properties, `DeviceSpec.to_dict()`): where no model was trained on `device_name`, borrow the
    model of the nearest GPU of the same compute capability (`nearest_model`) instead of falling back to the fixed
    list, unless AUTOHEUR_BORROW_MODEL=0. Why: each shipped model ranks the other GPU's problems far better than a
    fixed list does (the H100 model on the H200's fresh problems: best-of-10 0.998 / P10 0.994 against the list's
    0.956 / 0.882; a model of the H200's data alone on the H100's 8,795: 0.998 / 0.994 against 0.969 / 0.920;
    BENCHMARKS.md, stops 61 and 79). The borrowed model's message says so; the caller warns with it."""
    unreadable: list[str] = []
    models = _models_in(directory, family, unreadable)
    own = _trained_on(models, device_name)
    if own:
        path = _one_of(own, device_name, family)
        model = TrainedModel.load(path)
        check_side_car(model.meta, dict(own)[path], path, device_name, family)
        return model, f"model {path.name} (trained on {device_name})"
    bad = f"; unreadable side-cars left out: {', '.join(unreadable)} ({RESTORE})" if unreadable else ""
    have = ", ".join(p.stem for p, _ in models) or "none"
    why = ""
    if spec is not None and borrow_enabled():
        near = nearest_model(models, spec)
        if near is not None:
            path, side = near
            other = side["device"]["name"]
            try:
                model = TrainedModel.load(path)
                check_side_car(model.meta, side, path, other, family)
            except (ValueError, TypeError, KeyError, OSError, ImportError) as exc:  # then as with nothing to borrow
                why = f"; the nearest GPU's model, {path.name}, is unusable ({exc})"
            else:
                cc = "".join(str(v) for v in _capability(spec))
                return model, (
                    f"no shipped model for {device_name!r}; borrowing {path.name}, trained on {other!r} (the nearest "
                    f"GPU of the same architecture, sm_{cc}; AUTOHEUR_BORROW_MODEL=0: the best fixed list instead). "
                    f"For this GPU's own: autoheur collect, then autoheur train (README){bad}"
                )
    return None, (f"no shipped model for {device_name!r} (have: {have}{bad}{why}); using the best fixed list of 10. "
                  "For this GPU's own: autoheur collect, then autoheur train (README)")  # fmt: skip


def _trained_on(models: list[tuple[Path, dict]], device_name: str) -> list[tuple[Path, dict]]:
    """Those of (model file, side-car) pairs whose side-car names `device_name` as the GPU it was trained on."""
    return [(path, side) for path, side in models
            if isinstance(side.get("device"), dict) and side["device"].get("name") == device_name]  # fmt: skip


def lookup_path(device_name: str, family: str = "triton") -> Path | None:
    """The file `model_for_device(device_name, family=family)` would take of the GPU's own models (none: None), read
    from the side-cars alone: no model loaded, no warning (`train`'s note after a save)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unreadable side-car: said by the lookups themselves
        own = _trained_on(_models_in(None, family, []), device_name)
    return _one_of(own, device_name, family, warn=False) if own else None


def lookup_identity(names: list[str], spec: dict | None = None) -> str:
    """Which model the run-time lookup takes, from the side-cars alone (no model loaded, no warning): the first of
    `names` with a model of its own (`lookup_path`; the tuner's order: in the interpreter, interpreter data's first),
    else the nearest GPU's of `spec`'s architecture where borrowing is on, as "<file name> <created_at>
    <train_data_hash>"; "fixed list" where there is none. The tuner records it with each predicted choice, so that a
    choice ranked by another model (the fixed list, or a borrowed model before the GPU's own was trained) is tuned
    again."""
    path = next((p for p in map(lookup_path, names) if p is not None), None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unreadable side-car: said by the lookups themselves
        models = _models_in(None, "triton", [])
    if path is None and spec is not None and borrow_enabled():
        near = nearest_model(models, spec)
        path = near[0] if near is not None else None
    if path is None:
        return "fixed list"
    side = dict(models).get(path, {})  # (a model removed between the two reads of the side-cars: named by its file)
    return f"{path.name} {side.get('created_at')} {side.get('train_data_hash')}"


def model_stem(device_name: str, family: str = "triton") -> str:
    """The file stem of a GPU's own model of `family`: `<device-slug>` (autoheur's kernel), `inductor-<device-slug>`
    (Inductor's grid): what `autoheur train --data data/<that stem>` writes, and what a lookup prefers."""
    return ("" if family == "triton" else f"{family}-") + device_slug(device_name)


def _one_of(own: list[tuple[Path, dict]], device_name: str, family: str = "triton", warn: bool = True) -> Path:
    """Of the models of `family` trained on `device_name` (in lookup order), the one a lookup takes: in the first
    directory that has any, the one named for the GPU (`model_stem`), else the first by name. Several there: one
    warning a process names them all and the one taken, since a model trained on another dataset of the GPU (e.g. a
    small trial) would otherwise stand in for it unsaid."""
    first = [path for path, _ in own if path.parent == own[0][0].parent]
    named = [path for path in first if path.stem == model_stem(device_name, family)]
    chosen = (named or first)[0]
    if warn and len(first) > 1:  # (once a process: the warning is cached, so a silent caller passes warn=False)
        _warn_several_models(tuple(str(p) for p in first), str(chosen), device_name, family)
    return chosen


@functools.cache
def _warn_several_models(paths: tuple[str, ...], chosen: str, device_name: str, family: str) -> None:
    names, stem = ", ".join(Path(p).name for p in paths), model_stem(device_name, family)
    why = "the one named for the GPU" if Path(chosen).stem == stem else "the first by name"
    warnings.warn(
        f"{Path(chosen).parent} holds {len(paths)} models of the {family!r} family trained on {device_name!r} "
        f"({names}): using {Path(chosen).name}, {why}. To use another, name it {stem}.joblib (with its .json) or move "
        "the others out",
        stacklevel=4,
    )


def borrow_enabled() -> bool:
    """AUTOHEUR_BORROW_MODEL (default on): a GPU without a model of its own borrows its nearest kin's."""
    from autoheur import env_flag

    return env_flag("AUTOHEUR_BORROW_MODEL", True)


def nearest_model(models: list[tuple[Path, dict]], spec: dict) -> tuple[Path, dict] | None:
    """Of (model file, side-car) pairs, the one whose training GPU has `spec`'s compute capability and the nearest
    properties (sum of |log ratio| over NEAR_KEYS; ties: the first given), or None: no GPU of that architecture.
    Another architecture is never borrowed: its kernels compile to other instructions (wgmma and TMA on sm_90 only),
    and its timings say nothing of this GPU's. A side-car that does not give its GPU's capability and every one of
    NEAR_KEYS as positive numbers is passed over: a GPU described in part could not be told near from far."""
    cc = _capability(spec)
    want = _properties(spec)
    if cc is None or want is None:
        return None
    best, best_d = None, float("inf")
    for path, side in models:
        dev = side.get("device")
        have = _properties(dev) if isinstance(dev, dict) else None
        if have is None or _capability(dev) != cc:
            continue
        d = float(np.abs(np.log(have / want)).sum())
        if d < best_d - 1e-9:  # a tie within rounding keeps the first
            best, best_d = (path, side), d
    return best


def _capability(device: dict) -> tuple[int, int] | None:
    """A device record's compute capability as (major, minor), or None where it is not two integers."""
    cc = device.get("compute_capability")
    if isinstance(cc, (list, tuple)) and len(cc) == 2 and all(type(v) is int for v in cc):
        return (cc[0], cc[1])
    return None


def _properties(device: dict) -> np.ndarray | None:
    """A device record's NEAR_KEYS as positive floats, or None where one is missing or not a positive number."""
    vals = [device.get(k) for k in NEAR_KEYS]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in vals):
        return None
    return np.asarray(vals, dtype=float)


def check_side_car(meta: dict, side: dict, path: Path, device_name: str, family: str) -> None:
    """Refuse a model file whose own metadata is not its side-car's (`IDENTITY_META`) or not of the device and
    family asked for: lookups go by the side-car, and an H100 model saved over the H200 one would otherwise rank
    as the H200's."""
    json_meta = json.loads(json.dumps(meta, default=str))  # as save() wrote the side-car
    name = (meta.get("device") or {}).get("name")
    diff = [] if name == device_name else [f"the model file's device is {name!r}, the side-car's {device_name!r}"]
    diff += [
        f"its {k} differs" for k in IDENTITY_META if json_meta.get(k) != side.get(k) and not (k == "device" and diff)
    ]
    if meta.get("family", "triton") != family:
        diff.append(f"the model file's family is {meta.get('family', 'triton')!r}, not {family!r}")
    if diff:
        raise ValueError(
            f"{path} is not the model its side-car {path.with_suffix('.json').name} describes ({'; '.join(diff)}): "
            f"one of the two files was replaced; {RESTORE}"
        )


def feasible_fallback(sig: Signature, spec) -> list[KernelConfig]:
    """The configs of the best fixed list (`fallback_list`) that a call of `sig` can run on `spec`, in the list's
    order: what the run-time tuner and `predict` fall back to where no model ranks. `spec` None (a GPU whose
    properties are unknown): the list less what the call rules out on any GPU, TMA loads where its operands are not
    aligned for them."""
    from autoheur.kernels.config import feasible_configs

    if spec is None:
        return [c for c in map(KernelConfig.from_id, fallback_list()) if sig.tma_aligned or c.load != "tma"]
    ok = {c.config_id for c in feasible_configs(sig, spec)}
    return [KernelConfig.from_id(c) for c in fallback_list() if c in ok]


def fallback_list(directory: Path | None = None) -> list[str]:
    """The best fixed list of the first model found (any device; `model_dirs()` by default): better than nothing,
    and said so."""
    for _, meta in _models_in(directory, "triton", []):
        if meta.get("fixed_list"):
            return list(meta["fixed_list"])
    warnings.warn("no shipped model: the fallback list is empty", stacklevel=2)
    return []
