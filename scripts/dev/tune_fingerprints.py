"""Kernel fingerprints of a program as `icoforge tune --static-value ...` compiles it (CPU, no GPU).

    PYTHONPATH=$PWD .venv/bin/python scripts/dev/tune_fingerprints.py --grid REGIONAL --levels 80 \
        compute_rho_theta_pgrad_and_update_vn limited_area=True nflat_gradp=79 ...

A tuned entry applies where the kernel's fingerprint is the one tuned (icoforge/backend/tuned.py).
Before spending device time on a tune of a granule variant, compare these with the fingerprints
the granule's compile log printed ("its code changed since it was tuned (fingerprint ...)"): equal
fingerprints mean the tune's entries will apply there. The same steps as the tuner: the suite's
inputs with the static values replaced (`tuner.static_overrides`), `workflow.translate`, then the
CUDA default schedule's fusion (`pipeline.gpu_passes`), fingerprinted as `tuned.applied` does.
"""

from __future__ import annotations

import argparse

from icoforge.backend import pipeline, tuned
from icoforge.backend.schedule import default_program_schedule
from icoforge.grids import load_grid
from icoforge.perf.static import suite_program_ir
from icoforge.suite import get_program, make_inputs
from icoforge.tune.tuner import static_overrides


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("program")
    ap.add_argument("values", nargs="*", metavar="NAME=VALUE", help="static values, as --static-value of icoforge tune")
    ap.add_argument("--grid", default="R2B4")
    ap.add_argument("--levels", type=int, default=80)
    args = ap.parse_args()
    grid = load_grid(args.grid, levels=args.levels, show_progress=False)
    info = get_program(args.program)
    values = dict(v.split("=", 1) for v in args.values)
    pir = suite_program_ir(info, grid, {**make_inputs(info, grid, 0), **static_overrides(info, values)})
    scheduled, _, _ = pipeline.gpu_passes(pir, default_program_schedule("cuda"), "cuda")
    for k in scheduled.kernels():
        print(k.name, tuned.kernel_fingerprint(k))


if __name__ == "__main__":
    main()
