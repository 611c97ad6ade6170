"""Tuned configs, in memory and on disk.

The disk cache is one JSON file per environment: device, torch and triton versions, kernel source hash, config
space hash and key version are in its name, so a tuned config is never reused under anything that could change its
speed or validity (an upgrade simply starts a new file); choices made with torch._grouped_mm among the candidates
(aten.py) go to a file of their own, and the Triton-only file never hands back an "aten"; so do interpreted runs
(TRITON_INTERPRET), whose timings are the CPU's. Writers take an exclusive lock on a sibling lock file, re-read,
merge and atomically replace, so concurrent processes never lose each other's entries. A corrupt file is read as
empty and set aside, under that lock and only if it is still corrupt when re-read there (a writer may have just
replaced it). A location that cannot be used (a file where a directory should be, no permission) leaves the cache
in memory, with one warning. Location: $AUTOHEUR_CACHE_DIR, else ~/.cache/autoheur.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autoheur import cache_dir
from autoheur.inference.aten import ATEN_ID, choice_from_id
from autoheur.inference.key import KEY_VERSION
from autoheur.kernels.config import SPACE_HASH
from autoheur.kernels.validate import interpreting

log = logging.getLogger("autoheur")
_WARNED: set[Path] = set()  # cache files already warned about as unusable, one warning each per process


def environment_tag(device_name: str, aten: bool = False) -> str:
    """device / torch / triton / kernel source / space / key meaning (/ ATen among the candidates), as a short
    file-name-safe tag."""
    import torch

    from autoheur.collect.schema import kernel_source_hash, toolchain_versions

    v = toolchain_versions()
    parts = [device_name, v["torch"], v["triton"], kernel_source_hash(), SPACE_HASH, KEY_VERSION] + ["aten"] * aten
    parts += ["interpreter"] * interpreting()  # wall-clock timings of the CPU: never a GPU's winners
    text = json.dumps(parts)
    slug = "".join(ch if ch.isalnum() else "-" for ch in device_name.lower()).strip("-")
    return f"{slug}-torch{torch.__version__.split('+')[0]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


class TuneCache:
    """key string -> {"config": config id or "aten", ...details}; memory first, then the environment's disk file.
    `aten`: the cache of choices made with torch._grouped_mm among the candidates (the only one that may hold
    "aten")."""

    def __init__(self, device_name: str, directory: Path | None = None, disk: bool = True, aten: bool = False):
        self.path = (directory or cache_dir()) / f"tuned-{environment_tag(device_name, aten)}.json"
        self.disk = disk
        self.aten = aten
        self.memory: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._loaded = False

    def _check(self, entry: dict) -> None:
        """ValueError unless `entry` names a valid config, or "aten" in the cache that may hold it."""
        choice_from_id(entry["config"])
        if entry["config"] == ATEN_ID and not self.aten:
            raise ValueError('"aten" in the Triton-only cache (AUTOHEUR_ATEN=off must never read it back)')

    def _read(self) -> dict[str, dict] | None:
        """The disk file's entries ({} when there is none), or None when it is corrupt. An "aten" entry in the
        Triton-only file is dropped: a miss, tuned again and overwritten. OSError (an unusable location) is raised."""
        try:
            data = json.loads(self.path.read_text())
            if not isinstance(data, dict):
                return None
            for v in data.values():
                choice_from_id(v["config"])  # every entry must name a valid config (or "aten")
                if not _fields_ok(v):  # what the lookup compares: a hand-edited list or string there raised in it
                    return None
        except FileNotFoundError:
            return {}
        except (ValueError, KeyError, TypeError, AttributeError):  # UnicodeDecodeError is a ValueError
            return None
        if not self.aten:
            for key in [k for k, v in data.items() if v["config"] == ATEN_ID]:
                log.warning('autoheur: %s holds "aten" for %s, which this Triton-only file must not: ignored',
                            self.path, key)  # fmt: skip
                del data[key]
        return data

    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        """The lock every process takes to replace or set aside the file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _read_or_set_aside(self) -> dict[str, dict]:
        """The file's entries, with the lock held: a file still corrupt is moved aside and read as empty."""
        data = self._read()
        if data is None:
            try:
                self.path.replace(self.path.with_suffix(f".corrupt-{os.getpid()}"))
                log.warning("autoheur: corrupt tuning cache %s set aside (%s)", self.path, f"*.corrupt-{os.getpid()}")
            except FileNotFoundError:  # moved already (by a process that does not lock, or by hand)
                pass
            data = {}
        return data

    def _load(self) -> dict[str, dict]:
        """The disk file's entries. Read without the lock; only a corrupt read takes it, to re-read and set aside."""
        try:
            data = self._read()
            if data is None:
                with self._file_lock():
                    data = self._read_or_set_aside()
            return data
        except OSError as exc:
            self._unusable(exc)
            return {}

    def _unusable(self, exc: OSError) -> None:
        """The disk file cannot be read or written here: memory only from now on, said once per file."""
        self.disk = False
        if self.path not in _WARNED:
            _WARNED.add(self.path)
            warnings.warn(
                f"autoheur: cannot use the tuning cache {self.path} ({type(exc).__name__}: {exc}); tuned configs "
                "are kept in memory for this process only. Set AUTOHEUR_CACHE_DIR to a writable directory, or "
                "AUTOHEUR_CACHE=0 to keep them in memory without this warning",
                stacklevel=2,
            )

    def get(self, key: str) -> dict | None:
        with self._lock:
            if key in self.memory:
                return self.memory[key]
            if self.disk and not self._loaded:
                self.memory.update({k: v for k, v in self._load().items() if k not in self.memory})
                self._loaded = True
            return self.memory.get(key)

    def put(self, key: str, entry: dict) -> None:
        self._check(entry)
        with self._lock:
            self.memory[key] = entry
            if not self.disk:
                return
            tmp = self.path.with_suffix(f".tmp-{os.getpid()}-{threading.get_ident()}")
            try:
                with self._file_lock():
                    data = self._read_or_set_aside()
                    data[key] = entry
                    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
                    tmp.replace(self.path)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                self._unusable(exc)


def _fields_ok(entry: dict) -> bool:
    """The types of the fields a lookup reads beside the config (tuner._lookup): the mode and model as text, the top
    k as a whole number; each may be absent (entries of earlier versions)."""
    return (
        isinstance(entry.get("mode", ""), str)
        and isinstance(entry.get("model", ""), str)
        and type(entry.get("top_k", 1)) is int
    )
