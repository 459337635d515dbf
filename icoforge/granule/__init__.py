"""The greenline granule: icon4py's dycore step (`SolveNonhydro.time_step`) with any backend.

    fields.py      geometry / interpolation / metric fields from icon4py's factories (cached)
    backends.py    backends by name, and "A+B" pairs (B compiles what A rejects)
    state.py       random but plausible initial state, identical for every backend
    solver.py      SolveNonhydro for one backend (icon4py's benchmark configuration)
    instrument.py  per-program timing inside the step, kernels per program
    runner.py      setup phases, timed variants (first/middle/last substep), profile
    verify.py      the same substeps with two backends, compared
    greenline.py   the whole job for several backends -> GreenlineReport (JSON-able)
    report.py      rich tables

CLI: `icoforge greenline --grid R2B3 --levels 10 --backend icoforge-cpu --compare gtfn_cpu --verify`.
"""

from icoforge.granule.greenline import GreenlineOptions, GreenlineReport, run_greenline

__all__ = ["GreenlineOptions", "GreenlineReport", "run_greenline"]
