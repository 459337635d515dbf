"""pytest-benchmark: the big four dycore programs per call with icoforge's CPU target, to track
CPU performance from commit to commit (not part of `make test`: benchmarks/ is outside testpaths).

    .venv/bin/python -m pytest scripts/bench/test_bench_cpu_programs.py --benchmark-only \
        --benchmark-autosave                    # keep the run under .benchmarks/
    .venv/bin/python -m pytest scripts/bench/test_bench_cpu_programs.py --benchmark-only \
        --benchmark-compare --benchmark-compare-fail=median:10%   # fail if 10 % slower than the last

Each program is first checked against GT4Py's gtfn_cpu on fresh random inputs (the suite's
verification: poisoned outputs, whole arrays): a benchmark of wrong code would be worthless.
gtfn_cpu's builds are kept between runs (GT4PY_BUILD_CACHE_LIFETIME=persistent unless set), so
only the first run pays its compile (minutes on 2 cores; GT4Py's embedded backend cannot run two of
the four programs). Grid
and levels: $ICOFORGE_BENCH_GRID (default R2B4) and $ICOFORGE_BENCH_LEVELS (default 10). The
machine, grid and levels are stored in each run's `extra_info`.
"""

from __future__ import annotations

import os
import platform

import pytest

os.environ.setdefault("GT4PY_BUILD_CACHE_LIFETIME", "persistent")  # before GT4Py is imported

from icoforge.suite.catalogue import BIG_FOUR  # noqa: E402

GRID = os.environ.get("ICOFORGE_BENCH_GRID", "R2B4")
LEVELS = int(os.environ.get("ICOFORGE_BENCH_LEVELS", "10"))


@pytest.fixture(scope="module")
def grid():
    from icoforge.grids import load_grid

    return load_grid(GRID, levels=LEVELS, show_progress=False)


@pytest.mark.parametrize("name", BIG_FOUR)
def test_icoforge_cpu_per_call(benchmark, grid, name):
    from icoforge.suite import get_program, make_inputs, prepare
    from icoforge.suite.verify import verify

    info = get_program(name)
    check = verify(info, "icoforge-cpu", "gtfn_cpu", grid, seed=int.from_bytes(os.urandom(2), "little"))
    assert check.passed, check.summary()

    args = make_inputs(info, grid, seed=0)
    call, _ = prepare(info, "icoforge-cpu", grid, args)
    benchmark.extra_info.update(
        grid=GRID, levels=LEVELS, backend="icoforge-cpu", host=platform.node(), cpus=os.cpu_count(),
        omp_threads=os.environ.get("OMP_NUM_THREADS", "default"),
    )  # fmt: skip
    benchmark(call, args)
