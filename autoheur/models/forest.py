"""Small-batch scoring of XGBoost boosters without XGBoost's per-call setup.

A config prediction scores a few hundred rows with a few hundred trees at a time. XGBoost 3.2's predictor spends
~5.7 us a tree on every call before it scores a row (it rebuilds its view of every node of the trees), 70-80% of the
shortlist and re-ranker passes (BENCHMARKS.md, "Learned ranking", stop 67). Here a booster's trees become flat node
arrays once (read from its UBJSON dump) and a ~40-line C routine walks them: the same comparisons (`x < split` goes
left), the same float32 sums in the same order (base score, then tree after tree, row by row), so the scores equal
XGBoost's bit for bit (tests/models/test_forest.py checks it on fitted boosters and the shipped models).

The routine is compiled once a machine with the C compiler Triton itself needs (`$CC`, else Python's, else `cc`) into
$AUTOHEUR_CACHE_DIR/forest (else ~/.cache/autoheur/forest) and loaded with ctypes. Where that cannot happen, or for
what this does not read (categorical splits, vector leaves, several outputs, rows with NaN), or for batches big enough
that XGBoost's threads win (more than MAX_ROWS rows), `forest_predict` answers None and the caller asks XGBoost.
AUTOHEUR_FOREST=0 turns it off.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoheur import cache_dir, env_flag

MAX_ROWS = 2048  # above it XGBoost's threaded predictor is as fast (its per-call setup a small share)

_SOURCE = r"""
#include <stdint.h>
typedef struct { int32_t child[2]; int32_t feat; float thr; } node_t;

/* out[i] = base + the value of row i's leaf in tree t, summed over t0 <= t < t1 in that order, in float (as XGBoost's
   CPU predictor adds them). A split sends a row to child[1] when x >= thr, i.e. unless x < thr. A leaf is its own two
   children and holds its value in thr, so walking a tree's full depth from its root ends on the row's leaf. */
void autoheur_forest_score(const float *X, int64_t n, int64_t stride, const node_t *nodes, const int32_t *root,
                           const int32_t *depth, int64_t t0, int64_t t1, float base, float *out)
{
    enum { BLOCK = 64, LANES = 16 };
    for (int64_t i = 0; i < n; i++) out[i] = base;
    for (int64_t r0 = 0; r0 < n; r0 += BLOCK) {  /* a block of rows through every tree: the tree stays in cache */
        const int64_t r1 = r0 + BLOCK < n ? r0 + BLOCK : n;
        for (int64_t t = t0; t < t1; t++) {
            const int32_t d = depth[t], rt = root[t];
            int64_t i = r0;
            for (; i + LANES <= r1; i += LANES) {  /* 16 rows at once: their walks' loads overlap in the core */
                int32_t at[LANES];
                const float *x[LANES];
                for (int k = 0; k < LANES; k++) { at[k] = rt; x[k] = X + (i + k) * stride; }
                for (int32_t l = 0; l < d; l++)
                    for (int k = 0; k < LANES; k++) {
                        const node_t *nd = nodes + at[k];
                        at[k] = nd->child[x[k][nd->feat] >= nd->thr];
                    }
                for (int k = 0; k < LANES; k++) out[i + k] += nodes[at[k]].thr;
            }
            for (; i < r1; i++) {
                int32_t a = rt;
                const float *xi = X + i * stride;
                for (int32_t l = 0; l < d; l++) {
                    const node_t *nd = nodes + a;
                    a = nd->child[xi[nd->feat] >= nd->thr];
                }
                out[i] += nodes[a].thr;
            }
        }
    }
}
"""

NODE_DTYPE = np.dtype([("child", "<i4", (2,)), ("feat", "<i4"), ("thr", "<f4")])


class Unsupported(ValueError):
    """A booster this module does not score (XGBoost does)."""


@dataclass(frozen=True)
class Forest:
    """A booster's trees as flat arrays: `nodes` (all trees, each tree's nodes at `root[t]` on; a leaf is its own two
    children, its value in `thr`), each tree's `depth`, the booster's `base` score, and `indptr` (boosting round r
    holds trees indptr[r] to indptr[r + 1])."""

    nodes: np.ndarray
    root: np.ndarray
    depth: np.ndarray
    base: float
    indptr: np.ndarray
    n_features: int

    @classmethod
    def from_booster(cls, booster) -> Forest:
        return cls.from_model(ubjson_loads(bytes(booster.save_raw("ubj"))))

    @classmethod
    def from_model(cls, model: dict) -> Forest:
        """From a booster's model document (its JSON / UBJSON dump, parsed)."""
        learner = model["learner"]
        gb = learner["gradient_booster"]
        if gb.get("name") != "gbtree":
            raise Unsupported(f"booster {gb.get('name')!r}: only gbtree is read")
        param = learner["learner_model_param"]
        base = _floats(param["base_score"])
        if len(base) != 1 or int(param.get("num_class", 0)) > 1 or int(param.get("num_target", 1)) != 1:
            raise Unsupported("several outputs: only one-output boosters are read")
        trees = gb["model"]["trees"]
        indptr = np.asarray(gb["model"].get("iteration_indptr", range(len(trees) + 1)), dtype=np.int64)
        if len(indptr) != len(trees) + 1 or indptr[-1] != len(trees):
            raise Unsupported("iteration_indptr does not match the trees")
        n_features = int(param["num_feature"])
        sizes, parts = [], []
        for tree in trees:
            if int(tree["tree_param"].get("size_leaf_vector", 1)) > 1:
                raise Unsupported("vector leaves")
            if np.any(np.asarray(tree["split_type"]) != 0):
                raise Unsupported("categorical splits")
            left, right = np.asarray(tree["left_children"], np.int32), np.asarray(tree["right_children"], np.int32)
            parts.append((left, right, np.asarray(tree["split_indices"], np.int32),
                          np.asarray(tree["split_conditions"], np.float32)))  # fmt: skip
            sizes.append(len(left))
        if not trees:
            raise Unsupported("no trees")
        root = np.zeros(len(trees), dtype=np.int32)
        root[1:] = np.cumsum(sizes)[:-1]
        offset = np.repeat(root, sizes)
        left, right, feat, cond = (np.concatenate(p) for p in zip(*parts, strict=True))
        leaf = left < 0
        index = np.arange(len(left), dtype=np.int32)
        size = np.repeat(np.asarray(sizes), sizes)
        if np.any(~leaf & ((left >= size) | (right < 0) | (right >= size) | (feat < 0) | (feat >= n_features))):
            raise Unsupported("a split whose children or feature are out of range")
        nodes = np.zeros(len(left), dtype=NODE_DTYPE)
        nodes["child"][:, 0] = np.where(leaf, index, left + offset)
        nodes["child"][:, 1] = np.where(leaf, index, right + offset)
        nodes["feat"] = np.where(leaf, 0, feat)
        nodes["thr"] = cond  # a split's value, or a leaf's (XGBoost keeps both in split_conditions)
        return cls(nodes, root, _depths(nodes, root), float(base[0]), indptr, n_features)

    def predict(self, X: np.ndarray, begin: int = 0, end: int = 0) -> np.ndarray | None:
        """The margins of rows `X` (float32, C order) over boosting rounds [begin, end) (end 0: all), as float64;
        None where the compiled routine is not there."""
        fn = _library()
        if fn is None:
            return None
        rounds = len(self.indptr) - 1
        end = rounds if end <= 0 else min(end, rounds)
        if not 0 <= begin <= end:
            raise ValueError(f"iteration range ({begin}, {end}) outside the booster's {rounds} rounds")
        if X.ndim != 2 or X.shape[1] != self.n_features or X.dtype != np.float32 or not X.flags.c_contiguous:
            raise ValueError(f"expected C-ordered float32 rows of {self.n_features} features, got {X.dtype} {X.shape}")
        out = np.empty(len(X), dtype=np.float32)
        t0, t1 = int(self.indptr[begin]), int(self.indptr[end])
        trees = (self.nodes.ctypes.data, self.root.ctypes.data, self.depth.ctypes.data)
        fn(X.ctypes.data, len(X), X.shape[1], *trees, t0, t1, self.base, out.ctypes.data)  # one thread
        return out.astype(np.float64)


def _floats(text) -> list[float]:
    """XGBoost's base_score: '[5E-1]' (3.x) or '5E-1' (older)."""
    return [float(v) for v in str(text).strip("[]").split(",") if v.strip()]


def _depths(nodes: np.ndarray, root: np.ndarray) -> np.ndarray:
    """Each tree's depth (the most splits on a path from its root), level by level over all trees at once."""
    level = np.zeros(len(nodes), dtype=np.int32)
    frontier, d = root.copy(), 0
    while True:
        inner = frontier[nodes["child"][frontier, 0] != frontier]
        if not len(inner):
            break
        d += 1
        frontier = nodes["child"][inner].ravel()
        level[frontier] = d
        if d > 64:
            raise Unsupported("a tree deeper than 64")
    return np.maximum.reduceat(level, root) if len(root) else np.zeros(0, dtype=np.int32)


# -- UBJSON (the subset XGBoost writes): objects, arrays, strongly typed arrays read as numpy at once -------------

_NUM = {b"i": ">i1", b"U": ">u1", b"I": ">i2", b"l": ">i4", b"L": ">i8", b"d": ">f4", b"D": ">f8"}


def ubjson_loads(buf: bytes):
    value, pos = _ubj_value(memoryview(buf), 0, None)
    if pos != len(buf):
        raise ValueError(f"UBJSON: {len(buf) - pos} bytes after the document")
    return value


def _ubj_int(buf, pos: int) -> tuple[int, int]:
    marker = bytes(buf[pos : pos + 1])
    if marker not in _NUM or marker in (b"d", b"D"):
        raise ValueError(f"UBJSON: expected an integer at {pos}, got {marker!r}")
    dt = np.dtype(_NUM[marker])
    return int(np.frombuffer(buf, dt, 1, pos + 1)[0]), pos + 1 + dt.itemsize


def _ubj_value(buf, pos: int, marker: bytes | None):
    if marker is None:
        marker, pos = bytes(buf[pos : pos + 1]), pos + 1
    if marker in _NUM:
        dt = np.dtype(_NUM[marker])
        return np.frombuffer(buf, dt, 1, pos)[0].item(), pos + dt.itemsize
    if marker == b"S" or marker == b"H":
        n, pos = _ubj_int(buf, pos)
        return bytes(buf[pos : pos + n]).decode(), pos + n
    if marker == b"C":
        return bytes(buf[pos : pos + 1]).decode(), pos + 1
    if marker in (b"T", b"F", b"Z"):
        return {b"T": True, b"F": False, b"Z": None}[marker], pos
    if marker == b"[":
        typ = count = None
        if buf[pos : pos + 1] == b"$":
            typ, pos = bytes(buf[pos + 1 : pos + 2]), pos + 2
        if buf[pos : pos + 1] == b"#":
            count, pos = _ubj_int(buf, pos + 1)
        if typ is not None and count is None:
            raise ValueError("UBJSON: a typed array without a count")
        if typ in _NUM:  # the trees' arrays: one read each
            dt = np.dtype(_NUM[typ])
            return np.frombuffer(buf, dt, count, pos).astype(dt.newbyteorder("=")), pos + count * dt.itemsize
        out = []
        while count is None and buf[pos : pos + 1] != b"]" or count is not None and len(out) < count:
            v, pos = _ubj_value(buf, pos, typ)
            out.append(v)
        return out, pos + (count is None)
    if marker == b"{":
        if buf[pos : pos + 1] in (b"$", b"#"):
            raise ValueError("UBJSON: optimized objects are not read")
        out = {}
        while buf[pos : pos + 1] != b"}":
            n, pos = _ubj_int(buf, pos)
            key = bytes(buf[pos : pos + n]).decode()
            out[key], pos = _ubj_value(buf, pos + n, None)
        return out, pos + 1
    if marker == b"N":  # no-op
        return _ubj_value(buf, pos, None)
    raise ValueError(f"UBJSON: unknown marker {marker!r} at {pos - 1}")


# -- the compiled routine ----------------------------------------------------------------------------------------

_LOCK = threading.Lock()
_FORESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # booster -> Forest, or the reason it is not read
_state: dict = {}


def enabled() -> bool:
    """AUTOHEUR_FOREST=0 scores through XGBoost alone; a value that is no on/off spelling is refused by name."""
    return env_flag("AUTOHEUR_FOREST", True)


def library_dir() -> Path:
    """Where the compiled routine goes: beside the tuned configs (autoheur.cache_dir())."""
    return cache_dir() / "forest"


def _compiler() -> list[str] | None:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    argv = cc.split()
    return argv if argv and shutil.which(argv[0]) else (["cc"] if shutil.which("cc") else None)


def _library():
    """The compiled scoring routine (ctypes), built on first use; None (and why, in status()) where it cannot be."""
    if "fn" in _state:
        return _state["fn"]
    with _LOCK:
        if "fn" not in _state:
            try:
                _state["fn"] = _load(_build())
                _state["why"] = f"compiled: {_state['path']}"
            except (OSError, RuntimeError, AttributeError, subprocess.SubprocessError) as exc:  # Attr: no symbol
                _state["fn"], _state["why"] = None, f"not compiled ({exc}); XGBoost scores every batch"
    return _state["fn"]


def _build() -> Path:
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler: set CC")
    flags = ["-O3", "-std=c99", "-shared", "-fPIC"]  # -O3: the lanes' loops unrolled, 1.4-1.9x -O2's speed
    tag = hashlib.sha256("\0".join([_SOURCE, *cc, *flags, sys.platform, sysconfig.get_platform()]).encode())
    path = library_dir() / f"forest-{tag.hexdigest()[:16]}.so"
    digest = path.with_suffix(".sha256")  # of the library as built: a damaged file is rebuilt, never loaded
    _state["path"] = path
    if path.exists() and digest.exists() and digest.read_bytes().strip() == _sha256(path).encode():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        src, lib, sha = Path(tmp) / "forest.c", Path(tmp) / "forest.so", Path(tmp) / "forest.sha256"
        src.write_text(_SOURCE)
        run = subprocess.run([*cc, *flags, str(src), "-o", str(lib)], capture_output=True, text=True, timeout=120)
        if run.returncode != 0 or not lib.exists():
            raise RuntimeError(f"{' '.join(cc)} failed: {(run.stderr or run.stdout).strip()[-400:]}")
        sha.write_text(_sha256(lib) + "\n")
        os.replace(lib, path)  # atomic: another process compiling at once writes the same file
        os.replace(sha, digest)  # after it: a library without its digest (yet) is built again, not loaded
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load(path: Path):
    fn = ctypes.CDLL(str(path)).autoheur_forest_score
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    fn.argtypes = [p, i64, i64, p, p, p, i64, i64, ctypes.c_float, p]
    fn.restype = None
    return fn


def status() -> str:
    """How small batches are scored here: the compiled routine's path, or why XGBoost scores them."""
    if not enabled():
        return "off (AUTOHEUR_FOREST=0): XGBoost scores every batch"
    _library()
    return _state["why"]


def prepare(boosters) -> str:
    """Read `boosters` into node arrays and build the routine now, not at their first small batch; status()."""
    if enabled() and _library() is not None:
        for booster in boosters:
            forest_of(booster)
    return status()


def forest_of(booster) -> Forest | None:
    """The booster's Forest, built once a booster (again if its rounds changed, as loading a model into the same
    Booster would), or None where it is not read (see Unsupported)."""
    got = _FORESTS.get(booster)
    if got is None or isinstance(got, Forest) and len(got.indptr) - 1 != booster.num_boosted_rounds():
        try:
            got = Forest.from_booster(booster)
        except (Unsupported, KeyError, ValueError) as exc:
            got = str(exc)
        _FORESTS[booster] = got
    return got if isinstance(got, Forest) else None


def forest_predict(booster, X: np.ndarray, begin: int = 0, end: int = 0) -> np.ndarray | None:
    """`booster`'s margins of rows `X` over rounds [begin, end), as XGBoost gives them; None where XGBoost should
    score them instead (off, too many rows, NaN in them, a booster not read, no compiled routine)."""
    if not enabled() or len(X) > MAX_ROWS or len(X) == 0 or _library() is None:
        return None
    forest = forest_of(booster)
    if forest is None or X.ndim != 2 or X.shape[1] != forest.n_features or np.isnan(X).any():
        return None
    return forest.predict(np.ascontiguousarray(X, dtype=np.float32), begin, end)
