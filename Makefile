# icoforge: set-up, demo, tests. Everything runs inside .venv, made from the Python that
# .python-version selects (pyenv) -- icon4py 0.4 and gt4py 1.2 need Python 3.12.
PYTHON ?= $(shell command -v pyenv >/dev/null 2>&1 && pyenv which python 2>/dev/null || command -v python3.12 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
GRID ?= R2B4
LEVELS ?= 20
# e.g. `make demo COMPARE="--compare gtfn_cpu"` also builds GT4Py's gtfn_cpu (minutes on 2 cores) and checks ours against it
COMPARE ?=

.PHONY: setup demo test verify-all gpu-check hpc-references clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 12), f"need Python 3.12, got {sys.version}"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# The main job on the CPU with our backend, on a small grid.
demo: setup
	$(BIN)/icoforge run vertically_implicit_solver_at_predictor_step --grid $(GRID) --levels $(LEVELS) --backend icoforge $(COMPARE) --repeat 5

# The CI test suite (GPU tests are skipped without a GPU).
test: setup
	$(BIN)/python -m pytest -q

# Every dycore program, icoforge-cpu vs gtfn_cpu on R2B4 at 80 and 17 levels (hours on 2 cores;
# minutes on the 16-core device machine). The table lands in benchmarks/.
verify-all: setup
	$(BIN)/icoforge verify-all --grid R2B4 --levels 80 17 --out benchmarks/verify-all-cpu.md

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
