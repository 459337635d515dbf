"""Which kernels of the granule's programs could run at the same time (CPU, no GPU).

    PYTHONPATH=$PWD .venv/bin/python scripts/dev/kernel_waves.py --grid R2B4 --levels 80

Issue 17 item 5 asks whether independent kernels of a program should run on several streams. Two
kernels are independent when neither writes a field the other reads or writes. After the CUDA
default pipeline (the suite's static values, `workflow.translate` + `pipeline.gpu_passes`), each
kernel gets a wave: one more than the latest earlier kernel it depends on; kernels of one wave could
run concurrently. Printed per program: kernels, waves, and the compulsory bytes (perf.model) of the
kernels that share a wave with another, i.e. the most a second stream could overlap.
"""

from __future__ import annotations

import argparse

from icoforge.backend.ir import ir
from icoforge.backend.schedule import pipeline
from icoforge.backend.passes.fuse import _independent
from icoforge.backend.schedule.schedule import default_program_schedule
from icoforge.grids import load_grid
from icoforge.perf.model import program_cost
from icoforge.perf.sizes import suite_sizes
from icoforge.perf.static import suite_program_ir
from icoforge.suite import get_program, make_inputs

GRANULE = (
    "vertically_implicit_solver_at_corrector_step", "vertically_implicit_solver_at_predictor_step",
    "compute_rho_theta_pgrad_and_update_vn", "compute_horizontal_velocity_quantities_and_fluxes",
    "compute_perturbed_quantities_and_interpolation", "compute_advection_in_corrector_vertical_momentum",
    "compute_advection_in_horizontal_momentum", "compute_averaged_vn_and_fluxes",
    "compute_interpolation_and_nonhydro_buoy", "apply_divergence_damping_and_update_vn",
    "compute_diagnostics_from_normal_wind", "compute_advection_in_predictor_vertical_momentum",
    "compute_hydrostatic_correction_term", "update_theta_and_exner_in_halo",
)  # fmt: skip


def waves(kernels: list[ir.Kernel]) -> list[int]:
    """Wave of each kernel, in program order (1 = depends on no earlier kernel); independence is
    fusion's rule (fuse._independent: neither writes what the other touches)."""
    out: list[int] = []
    for j, kj in enumerate(kernels):
        deps = [out[i] for i, ki in enumerate(kernels[:j]) if not _independent(ki, kj)]
        out.append(1 + max(deps, default=0))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default="R2B4")
    ap.add_argument("--levels", type=int, default=80)
    args = ap.parse_args()
    grid = load_grid(args.grid, levels=args.levels, show_progress=False)
    print("| program | kernels | waves | waves of the kernels | MB in shared waves / all |")
    print("| --- | ---: | ---: | --- | ---: |")
    for name in GRANULE:
        info = get_program(name)
        pir = suite_program_ir(info, grid, make_inputs(info, grid, 0))
        _, final, _ = pipeline.gpu_passes(pir, default_program_schedule("cuda"), "cuda")
        kernels = final.kernels()
        level = waves(kernels)
        mb = {c.name: (c.bytes_read + c.bytes_written) / 1e6 for c in program_cost(final, suite_sizes(info, grid, 0)).kernels}
        shared = sum(mb.get(k.name, 0.0) for k, w in zip(kernels, level) if level.count(w) > 1)
        total = sum(mb.get(k.name, 0.0) for k in kernels)
        print(f"| {name} | {len(kernels)} | {max(level, default=0)} | {level} | {shared:.0f} / {total:.0f} |")


if __name__ == "__main__":
    main()
