"""Tuned configs, in memory and on disk.

The disk cache is one JSON file per environment: device, torch and triton versions, kernel source hash, config
space hash and key version are in its name, so a tuned config is never reused under anything that could change its
speed or validity (an upgrade simply starts a new file); choices made with torch._grouped_mm among the candidates
(aten.py) go to a file of their own. Writers take an exclusive lock on a sibling lock file,
re-read, merge and atomically replace, so concurrent processes never lose each other's entries. A corrupt file is
set aside, not trusted. Location: $AUTOHEUR_CACHE_DIR, else ~/.cache/autoheur.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from pathlib import Path

from autoheur import cache_dir
from autoheur.inference.aten import choice_from_id
from autoheur.inference.key import KEY_VERSION
from autoheur.kernels.config import SPACE_HASH


def environment_tag(device_name: str, aten: bool = False) -> str:
    """device / torch / triton / kernel source / space / key meaning (/ ATen among the candidates), as a short
    file-name-safe tag."""
    import torch

    from autoheur.collect.schema import kernel_source_hash, toolchain_versions

    v = toolchain_versions()
    parts = [device_name, v["torch"], v["triton"], kernel_source_hash(), SPACE_HASH, KEY_VERSION] + ["aten"] * aten
    text = json.dumps(parts)
    slug = "".join(ch if ch.isalnum() else "-" for ch in device_name.lower()).strip("-")
    return f"{slug}-torch{torch.__version__.split('+')[0]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


class TuneCache:
    """key string -> {"config": config id or "aten", ...details}; memory first, then the environment's disk file.
    `aten`: the cache of choices made with torch._grouped_mm among the candidates."""

    def __init__(self, device_name: str, directory: Path | None = None, disk: bool = True, aten: bool = False):
        self.path = (directory or cache_dir()) / f"tuned-{environment_tag(device_name, aten)}.json"
        self.disk = disk
        self.memory: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._loaded = False

    def _read(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            for v in data.values():
                choice_from_id(v["config"])  # every entry must name a valid config (or "aten")
            return data
        except FileNotFoundError:
            return {}
        except (ValueError, KeyError, TypeError):
            self.path.replace(self.path.with_suffix(f".corrupt-{os.getpid()}"))
            return {}

    def get(self, key: str) -> dict | None:
        with self._lock:
            if key in self.memory:
                return self.memory[key]
            if self.disk and not self._loaded:
                self.memory.update({k: v for k, v in self._read().items() if k not in self.memory})
                self._loaded = True
            return self.memory.get(key)

    def put(self, key: str, entry: dict) -> None:
        choice_from_id(entry["config"])
        with self._lock:
            self.memory[key] = entry
            if not self.disk:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path.with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                data = self._read()
                data[key] = entry
                tmp = self.path.with_suffix(f".tmp-{os.getpid()}-{threading.get_ident()}")
                tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
                tmp.replace(self.path)
