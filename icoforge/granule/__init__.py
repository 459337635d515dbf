"""The greenline granule: icon4py's dycore step (`SolveNonhydro.time_step`) with any backend.

    icoforge greenline --grid R2B3 --levels 10 --backend icoforge-cpu --compare gtfn_cpu --verify

Modules (data flows down):

    fields.py      geometry / interpolation / metric fields from icon4py's factories, once per
                   grid (cached on disk), as NumPy arrays shared by every backend
    backends.py    backends by name; "A+B" pairs (B compiles what A rejects); GT4Py's roundtrip
                   backends, incl. "roundtrip-passes" (Python on icoforge's cached GT4Py passes)
    state.py       random but plausible initial state, identical for every backend
    solver.py      SolveNonhydro for one backend (icon4py's benchmark configuration);
                   only_used_variants compiles just the program variants the steps call
    instrument.py  per-program timing inside the step; kernels per compiled program
    runner.py      setup phases, timed variants (first/middle/last substep), profile
    verify.py      the same substeps with two backends, compared field by field
    golden.py      recorded reference results (fingerprints) for CI
    gpulock.py     --gpu-lock: an flock held while measuring, so parallel runs time one at a time
    greenline.py   the whole job for several backends -> GreenlineReport (JSON-able)
    decompose.py   MPI ranks: icon4py's decomposition (METIS/BFS partition, GridManager with halos),
                   the rank's fields and state, owned points gathered back (issue 23)
    halo_exchange.py  the exchange icon4py's SolveNonhydro calls: GHEX (icon4py's) or ours over mpi4py, timed
    ranks.py       the decomposed step on every rank: setup, verification against one rank, timing
    merge.py       several runs' JSON reports (same inputs) -> one report (greenline-merge)
    report.py      tables from the JSON form: rich (terminal) or Markdown (benchmarks/)

Reading the output:

- setup: "construct" includes most of the compilation (icon4py submits every program variant to
  GT4Py's compile workers, then calls one program inside SolveNonhydro.__init__ and so waits for
  the queue); "compile" is what is left after construction; "first call" runs each substep
  variant once (loading the compiled modules). Grid and static fields are shared and shown once.
  The icoforge translation cache line says whether the compile was cold (0/N hits) or warm.
- step time: per variant (at_first_substep / at_last_substep of time_step) the median and minimum
  of the timed calls, each between device synchronisations; "dycore step" is first + 3 x middle +
  last, the 5 substeps of one model time step.
- per program: every GT4Py program call inside one dycore step, timed with a device
  synchronisation before and after; sorted by time per step, so the biggest contributors come
  first. calls/step counts calls in the 5 substeps (velocity advection's predictor runs only in
  the first); share is of the instrumented step; kernels is the number of kernels in icoforge's
  compiled program ("-" for GT4Py's backends); the last row is the time spent outside programs
  (icon4py's Python between calls).
- verification: largest max|a - b| / max|reference| per prognostic field over the substeps.

Parallel runs, one backend each (GT4Py's GPU backends compile for minutes each; compilation may
overlap, measurements must overlap neither each other nor anyone's setup):

    for b in icoforge-cuda gtfn_gpu dace_gpu; do
        icoforge greenline --grid R2B6 --levels 80 --backend $b --gpu-lock /tmp/gpu.lock --json $b.json &
    done; wait
    icoforge greenline-merge icoforge-cuda.json gtfn_gpu.json dace_gpu.json --markdown benchmarks/x.md

With --gpu-lock each backend's verification substeps, warm-up + timed steps and profile run under
an exclusive flock on the file; grid, static fields, construction, compilation and the first calls
(which compile what a backend compiles lazily) hold it shared, so no backend is timed while another
one still sets up (its GPU transfers and compiling CPUs would be on the clock). The setup table shows the seconds each backend waited for the
lock. greenline-merge prints the tables a single run with all the backends would print (the first
file's backend is the reference column), refuses reports of different inputs (grid, levels, seed,
steps, warm-up, profile steps, static-field key) or a backend named twice, and writes --json /
--markdown (the Markdown starts with date, machine and versions of each run).
"""

from icoforge.granule.greenline import GreenlineOptions, GreenlineReport, run_greenline

__all__ = ["GreenlineOptions", "GreenlineReport", "run_greenline"]
