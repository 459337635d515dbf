# icoforge: set-up, demo, tests. Everything runs inside .venv, made from the Python that
# .python-version selects (pyenv) -- icon4py 0.4 and gt4py 1.2 need Python 3.12.
PYTHON ?= $(shell command -v pyenv >/dev/null 2>&1 && pyenv which python 2>/dev/null || command -v python3.12 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
GRID ?= R2B4
LEVELS ?= 20
# e.g. `make demo COMPARE="--compare gtfn_cpu"` also builds GT4Py's gtfn_cpu (minutes on 2 cores) and checks ours against it
COMPARE ?=

.PHONY: setup demo test test-all verify-all clean

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

clean:
	rm -rf $(VENV) build *.egg-info
