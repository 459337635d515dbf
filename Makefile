# icoforge: set-up, demo, tests. Everything runs inside .venv, made from the Python that
# .python-version selects (pyenv) -- icon4py 0.4 and gt4py 1.2 need Python 3.12.
PYTHON ?= $(shell command -v pyenv >/dev/null 2>&1 && pyenv which python 2>/dev/null || command -v python3.12 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
GRID ?= R2B4
LEVELS ?= 20
# e.g. `make demo COMPARE="--compare gtfn_cpu"` also builds GT4Py's gtfn_cpu (minutes on 2 cores) and checks ours against it
COMPARE ?=

# One cache for everything make runs (demo, CI's .ci/run); the test suite gives each session its
# own empty cache inside it (tests/conftest.py), so tests always exercise generation.
export ICOFORGE_CACHE ?= $(CURDIR)/.icoforge-cache
# Progress lines reach a pipe (CI logs, tee) as they are printed, not when a buffer fills.
export PYTHONUNBUFFERED := 1
# numpy without its AVX-512 paths (their trigonometry rounds otherwise) and with OpenBLAS's AVX2
# kernels (np.linalg rounds otherwise): the stored references are bitwise and were recorded on AVX2
# (icoforge/portable_numpy.py says why).
export NPY_DISABLE_CPU_FEATURES ?= X86_V4 AVX512_ICL AVX512_SPR
export OPENBLAS_CORETYPE ?= Haswell
# pytest: a line per test file with its time, `still running` lines during long tests
# (tests/conftest.py), and the slowest tests at the end.
PYTEST := $(BIN)/python -m pytest --durations=15

# GHEX 0.9.0 (icon4py's halo exchange for --ranks) is a source package on PyPI: cmake + MPI + Boost
# headers; 32 min on the shared 2-core dev VM at load 10-16 (2026-12-01). Without it --ranks uses
# icoforge's mpi4py exchange.
GHEX_VERSION ?= 0.9.0

.PHONY: setup setup-ghex demo test test-slow test-icon4py verify-all references test-references gpu-check hpc-references clean

setup: $(VENV)/.installed

# pip prints a line per package it collects and installs (about 80 s from a fresh clone).
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 12), f"need Python 3.12, got {sys.version}"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e '.[test,mpi,icon4py-tests]'
	touch $@

# Needs mpicc (Debian: openmpi-bin libopenmpi-dev) and Boost headers (libboost-dev); .ci/run installs them.
setup-ghex: setup
	$(BIN)/python -c 'import ghex' 2>/dev/null || CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/pip install ghex==$(GHEX_VERSION)

# The main job on the CPU with our backend, checked against GT4Py's stored gtfn_cpu outputs
# (R2B3, 10 levels: the store's grid; no GT4Py compile); prints PASS/FAIL and the time per call.
demo: setup
	$(BIN)/icoforge run vertically_implicit_solver_at_predictor_step --reference --backend icoforge $(COMPARE) --repeat 5

# The test suite without the tests marked slow and the 78-program reference check (GPU tests are
# skipped without a GPU); CI runs those two after it (`make test-slow test-references`).
test: setup
	$(PYTEST) -m "not slow and not references"

# The tests marked slow (minutes each on 2 cores: the granule end to end, nvcc/hipcc over every
# program, fused granule by emulation); CI runs them after `make test`.
test-slow: setup
	$(PYTEST) -m slow

# Every dycore program, icoforge-cpu vs gtfn_cpu on R2B4 at 80 and 17 levels (hours on 2 cores;
# minutes on the 16-core device machine). The table lands in benchmarks/.
verify-all: setup
	$(BIN)/icoforge verify-all --grid R2B4 --levels 80 17 --out benchmarks/verify-all-cpu.md

# GT4Py's gtfn_cpu on every dycore program, outputs stored as digests in
# icoforge/suite/gt4py_references.json (72 min with JOBS=2 on the shared 2-core VM; minutes with JOBS=16).
JOBS ?= 2
references: setup
	$(BIN)/icoforge references make --jobs $(JOBS)

# icon4py 0.4.1's own stencil tests (../shared/icon4py-0.4.1-tests, used from there; $ICON4PY_TESTS
# elsewhere) with `--backend icoforge.backend:cpu`, against icon4py's NumPy references: the runs of
# scripts/icon4py_suite/run.py (`--list`): double-simple (all 280 stencil tests of dycore, diffusion,
# tracer advection, muphys, common interpolation and math, icon4py's simple grid), mixed-simple
# (dycore + diffusion with FLOAT_PRECISION=mixed) and double-r2b4 (three dycore/diffusion tests on
# icoforge's R2B4 preset at 30 levels via icon4py's --grid FILE:LEVELS). Writes the table per package
# to benchmarks/icon4py-suite-cpu.md. CI runs all three, beside `make test` (2026-12-05, shared 2-core
# machine under other users' load, cold cache: double-simple 13.2 min wall / 8.8 min CPU, mixed-simple
# 0.2 min (collection fails: icon4py's error, see README), double-r2b4 4.6 min wall / 2.4 min CPU;
# about one core for ~12 min): estimated whole .ci/run ~45 min, under its 60.
# One run: `make test-icon4py ICON4PY_RUNS=mixed-simple` (the table then holds that run only).
ICON4PY_RUNS ?=
test-icon4py: setup
	$(BIN)/python scripts/icon4py_suite/run.py $(ICON4PY_RUNS) --markdown benchmarks/icon4py-suite-cpu.md

# Every dycore program compiled with icoforge-cpu and compared with the stored references.
test-references: setup
	$(PYTEST) -m references tests/suite/test_references.py

# CUDA (nvcc sm_90) and HIP (hipcc gfx90a) compile check of every program: registers and spills.
gpu-check: setup
	$(BIN)/icoforge gpu-check --out benchmarks/gpu-compile-check.md

# References of the ReFrame checks (hpc/) measured on this machine, written for SYSTEM:PARTITION
# (local:cpu: about 15 min on the 2-core dev machine, cold cache; see README).
SYSTEM ?= local:cpu
FEATURES ?= cpu
OUT ?= hpc/references.toml
hpc-references: setup
	$(BIN)/python -m icoforge hpc-references $(SYSTEM) --features $(FEATURES) --out $(OUT)

clean:
	rm -rf $(VENV) build *.egg-info
