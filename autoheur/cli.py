"""The `autoheur` command line: each subcommand calls one library function.

Examples:
  autoheur selftest                         # kernels vs reference on every layout (GPU, else the CPU interpreter)
  autoheur space                            # the config space: size, hash, feasible configs per layout
  autoheur space --device h200 --dtype float16 --layout 2d2d
"""

from __future__ import annotations

import argparse
import sys


def cmd_selftest(args: argparse.Namespace) -> int:
    from autoheur.selftest import run

    return 1 if run(verbose=not args.quiet) else 0


def cmd_space(args: argparse.Namespace) -> int:
    from collections import Counter

    from autoheur.device import PRESETS, current_device_spec
    from autoheur.kernels.config import SPACE_HASH, SPACE_VERSION, Signature, all_configs, feasible_configs
    from autoheur.problem import LAYOUTS

    device = PRESETS[args.device] if args.device else current_device_spec()
    elem = {"bfloat16": 2, "float16": 2, "float32": 4}[args.dtype]
    sig = Signature(LAYOUTS[args.layout], elem, tma_aligned=not args.no_tma)
    feas = feasible_configs(sig, device)
    print(f"config space v{SPACE_VERSION}, hash {SPACE_HASH}: {len(all_configs())} configs in all")
    print(f"feasible for {args.layout} {args.dtype} on {device.name}: {len(feas)}")
    for field in ("block_m", "block_n", "block_k", "num_stages", "num_warps", "load", "warp_specialize"):
        counts = Counter(getattr(c, field) for c in feas)
        print(f"  {field:16s} " + "  ".join(f"{k}:{v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="autoheur", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("selftest", help="check the kernel family against the reference on small problems")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_selftest)

    p = sub.add_parser("space", help="describe the config space and its feasible part")
    p.add_argument("--device", choices=["h100", "h200"], help="a preset (default: the current GPU, else h100)")
    p.add_argument("--layout", default="2d3d", choices=["2d3d", "3d2d", "2d2d", "3d3d"])
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--no-tma", action="store_true", help="a call whose group bases are not 16-byte aligned")
    p.set_defaults(fn=cmd_space)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
