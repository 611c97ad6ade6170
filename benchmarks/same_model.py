"""Whether two model files hold the same fitted ranker: each booster's SHA-1 (its `save_raw('json')`, per layout
expert: the members and the re-ranker) and the metadata that names what it was fitted on. For a change that must not
move a model (a faster fit, another host): refit with the README's command and compare with the shipped file.

    python benchmarks/same_model.py models/nvidia-h100-80gb-hbm3.joblib /tmp/refit.joblib

Exits 1 when any booster differs.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import joblib

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

META_KEYS = ("train_data_hash", "train_problems", "train_rows", "space_hash", "features_hash", "params")


def booster_digests(ranker) -> dict[str, str]:
    """name -> SHA-1 of the booster's JSON, for every booster of an XGBRankerModel (per expert, if it has experts)."""
    out = {}
    for e, m in (getattr(ranker, "experts_", None) or {"-": ranker}).items():
        for i, member in enumerate(getattr(m, "members_", None) or [m.model_]):
            out[f"expert {e} member {i}"] = _digest(member)
        if getattr(m, "reranker_", None) is not None:
            out[f"expert {e} reranker"] = _digest(m.reranker_)
    return out


def _digest(model) -> str:
    return hashlib.sha1(bytes(model.get_booster().save_raw("json"))).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    args = ap.parse_args()
    blobs = [joblib.load(p) for p in (args.a, args.b)]
    digests = [booster_digests(b["ranker"]) for b in blobs]
    same = digests[0] == digests[1]
    for name in sorted(set(digests[0]) | set(digests[1])):
        a, b = (d.get(name, "-") for d in digests)
        print(f"{name:28s} {a[:16]:16s} {b[:16]:16s} {'same' if a == b else 'DIFFERENT'}")
    for key in META_KEYS:
        a, b = (blob["meta"].get(key) for blob in blobs)
        print(f"meta {key:23s} {'same' if a == b else f'DIFFERENT: {a!r} / {b!r}'}")
    print("boosters: same" if same else "boosters: DIFFERENT")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
