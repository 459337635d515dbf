"""Kernel fingerprints of a program as `icoforge tune --static-value ...` compiles it (CPU, no GPU).

    PYTHONPATH=$PWD .venv/bin/python scripts/dev/tune_fingerprints.py --grid REGIONAL --levels 80 \
        compute_rho_theta_pgrad_and_update_vn limited_area=True nflat_gradp=79 ...

A tuned entry applies where the kernel's fingerprint is the one tuned (icoforge/backend/schedule/tuned.py).
Before spending device time on a tune of a granule variant, compare these with the fingerprints
the granule's compile log printed ("its code changed since it was tuned (fingerprint ...)"): equal
fingerprints mean the tune's entries will apply there. The suite's static scalars with the given
values replacing them (`suite.runner.static_overrides`, as the tuner does), fingerprinted by
granule_variants.py's `suite_prints` with the CUDA default schedule.
"""

from __future__ import annotations

import argparse

from granule_variants import suite_prints, suite_statics

from icoforge.backend.schedule.schedule import default_program_schedule
from icoforge.grids import load_grid
from icoforge.suite import get_program
from icoforge.suite.runner import static_overrides


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("program")
    ap.add_argument("values", nargs="*", metavar="NAME=VALUE", help="static values, as --static-value of icoforge tune")
    ap.add_argument("--grid", default="R2B4")
    ap.add_argument("--levels", type=int, default=80)
    args = ap.parse_args()
    grid = load_grid(args.grid, levels=args.levels, show_progress=False)
    info = get_program(args.program)
    static = {**suite_statics(info, grid), **static_overrides(info, dict(v.split("=", 1) for v in args.values))}
    for kernel, fingerprint in suite_prints(info, grid, static, default_program_schedule("cuda")).items():
        print(kernel, fingerprint)


if __name__ == "__main__":
    main()
