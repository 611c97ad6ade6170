"""A pytest plugin that records what a test process does between its summary and its exit.

At stop 81 the GPU suite printed its summary at 548 s and had not exited by 565 s. Loaded with
`-p pytest_exit_trace` (scripts/ on PYTHONPATH) and EXIT_TRACE=FILE set, it writes to FILE, from pytest's last hook
on: a time stamp per stage (unconfigure, atexit), every thread's Python stack every PERIOD seconds (faulthandler), and
the process's live children (from /proc) at the same period, until the process is gone.
"""

from __future__ import annotations

import atexit
import faulthandler
import os
import threading
import time

_PERIOD = float(os.environ.get("EXIT_TRACE_PERIOD", "5"))
_file = None
_t0 = time.monotonic()


def _note(text: str) -> None:
    if _file is not None:
        _file.write(f"[{time.strftime('%T')}, {time.monotonic() - _t0:7.1f} s in] {text}\n")
        _file.flush()


def _children() -> list[str]:
    """The live descendants of this process: pid, state and command line, read from /proc."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parent[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    mine, frontier = [], [os.getpid()]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        mine += kids
        frontier += kids
    out = []
    for pid in sorted(mine):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:160]
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        out.append(f"  {pid} {state} {cmd}")
    return out


def _watch() -> None:
    while True:
        time.sleep(_PERIOD)
        kids = _children()
        _note(f"{len(kids)} child processes, {threading.active_count()} threads")
        for line in kids:
            _file.write(line + "\n")
        _file.flush()


def pytest_unconfigure(config) -> None:
    global _file
    path = os.environ.get("EXIT_TRACE")
    if not path or _file is not None:
        return
    _file = open(path, "w")  # noqa: SIM115  (kept open until the process exits)
    _note("pytest_unconfigure (the summary is out)")
    for line in _children():
        _file.write(line + "\n")
    atexit.register(_note, "atexit handlers start (the last registered runs first)")
    faulthandler.dump_traceback_later(_PERIOD, repeat=True, file=_file)
    threading.Thread(target=_watch, daemon=True, name="exit-trace").start()
