"""Dump the generated code of a fixed set of programs and schedules, to check that a refactoring
of the compiler leaves it byte-identical.

    PYTHONPATH=$PWD .venv/bin/python scripts/dev/dump_generated.py OUT_DIR [--grid R2B4 --levels 10]
    diff -r OUT_BEFORE OUT_AFTER     # must print nothing (or only intended changes)

Per program (icon4py's int/bool scalars bound, as `icoforge run` compiles it): the kernel IR after
translation, the C++ module, and per GPU schedule the CUDA/HIP module, its host plan and its
kernel names. GT4Py's passes run once per program (on-disk cache); everything after them is fast.
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import sys
import time

PROGRAMS = (
    # the big four (by time in the granule) and the corrector's solver
    "vertically_implicit_solver_at_predictor_step",
    "vertically_implicit_solver_at_corrector_step",
    "compute_rho_theta_pgrad_and_update_vn",
    "compute_horizontal_velocity_quantities_and_fluxes",
    # small ones covering the constructs (as tests/schedule/conftest.py's REPRESENTATIVES)
    "compute_contravariant_correction_of_w",  # C2E with level shifts
    "extrapolate_at_top",  # pure vertical
    "compute_divergence_of_fluxes_of_rho_and_theta",  # C2E reduction, sparse coefficients
    "mo_math_divrot_rot_vertex_ri_dsl",  # V2E reduction over skip values
    "solve_tridiagonal_matrix_for_w_forward_sweep",  # a scan with tuple state
    "apply_divergence_damping_and_update_vn",  # temporaries, host conditionals
    "compute_perturbed_quantities_and_interpolation",  # fused by the fuse schedule
    "compute_explicit_part_for_rho_and_exner",  # cell maps with level shifts
)

# name -> (vendor, ProgramSchedule JSON without "default" keys: the vendor default fills them)
SCHEDULES = {
    "cuda-default": ("cuda", {}),
    "cuda-fused": ("cuda", {"fuse": ["*"]}),
    "cuda-kloop": ("cuda", {"default": {"block": [32, 4], "k_per_thread": 4, "k_unroll": 2}}),
    "cuda-smem": ("cuda", {"default": {"block": [64, 2], "smem_tables": ["*"], "h_per_thread": 2}}),
    "cuda-auto": ("cuda", {"default": {"block": [32, 8], "index_bits": "auto", "chiplet_remap": True}}),
    "cuda-32": ("cuda", {"default": {"block": [128, 1], "index_bits": 32, "max_registers": 64}}),
    "hip-default": ("hip", {}),
}


def schedule_of(vendor: str, spec: dict):
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule

    d = dict(spec)
    d.setdefault("default", VENDOR_DEFAULTS[vendor].to_json())
    return ProgramSchedule.from_json(d)


def program_ir(name: str, grid):
    from icoforge.perf.sizes import suite_sizes
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite.catalogue import get_program

    info = get_program(name)
    return suite_program_ir(info, grid, suite_sizes(info, grid, 0).scalars)


def cpp_source(pir) -> str:
    from icoforge.backend.codegen.cpp import render_program_cpp
    from icoforge.backend.runtime.workflow import module_name_for

    return render_program_cpp(pir, module_name_for(pir))


def gpu_sources(pir, vendor: str, schedule) -> dict[str, str]:
    from icoforge.backend.runtime.gpu import gpu_artifact

    art = gpu_artifact(pir, vendor, schedule)
    ext = "cu" if vendor == "cuda" else "hip"
    return {ext: art.module_source, "host.py": art.host_plan, "kernels.txt": "\n".join(art.kernel_names) + "\n"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--grid", default="R2B4")
    ap.add_argument("--levels", type=int, default=10)
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    a = ap.parse_args()
    from icoforge.grids import load_grid

    grid = load_grid(a.grid, levels=a.levels, show_progress=False)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for name in a.programs.split(","):
        t0 = time.perf_counter()
        pir = program_ir(name, grid)
        files = {"ir.txt": str(pir), "cpp.cpp": cpp_source(pir)}
        for label, (vendor, spec) in SCHEDULES.items():
            for suffix, text in gpu_sources(pir, vendor, schedule_of(vendor, spec)).items():
                files[f"{label}.{suffix}"] = text
        for fname, text in files.items():
            path = out / name / fname
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            manifest.append(f"{hashlib.sha256(text.encode()).hexdigest()[:16]}  {name}/{fname}")
        print(f"{name}: {len(files)} files in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    (out / "MANIFEST").write_text("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
