"""ReFrame regression checks of icoforge: what an HPC centre runs after every change of the
software stack (compiler, CUDA, CuPy, GT4Py, icon4py) to see that the generated code still
verifies and has not become slower.

    reframe -C hpc/settings.py -c hpc/icoforge_checks.py -r                       # this host (CPU)
    reframe -C hpc/settings.py -c hpc/icoforge_checks.py --system h200:gpu -r     # the GPU checks

`-S icoforge_python=/path/to/venv/bin/python` picks the Python that has icoforge installed
(default: `python3`). Every check runs an `icoforge` command as a user would; sanity is the
command's own verification (poisoned outputs, whole arrays, NaN never passes), performance is
read from its output or its JSON report. The references of the `h200` system are the medians
measured in benchmarks/h200-2026-11-30-s7 (R2B6, 80 levels); a change more than 10 % slower fails.
"""

import json
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, performance_function, run_after, run_before, sanity_function, variable

# programs with several kernels of each kind: maps with k offsets, neighbour reductions, scans
PROGRAMS = (
    "compute_hydrostatic_correction_term",
    "compute_perturbed_quantities_and_interpolation",
    "vertically_implicit_solver_at_predictor_step",
)


class IcoforgeCommand(rfm.RunOnlyRegressionTest):
    """Base: an `icoforge ...` command in the stage directory."""

    icoforge_python = variable(str, value="python3")
    valid_prog_environs = ["builtin"]
    maintainers = ["icoforge"]
    tags = {"icoforge"}

    @run_before("run")
    def unbuffered(self):
        self.env_vars["PYTHONUNBUFFERED"] = "1"
        cache = os.environ.get("ICOFORGE_CACHE")
        if cache:  # grids, passes and builds shared with the user's runs
            self.env_vars["ICOFORGE_CACHE"] = cache


@rfm.simple_test
class IcoforgeProgramCheck(IcoforgeCommand):
    """One program with icoforge, verified against another backend on fresh random inputs."""

    program = parameter(PROGRAMS)
    grid = variable(str, value="R2B3")
    levels = variable(int, value=10)
    backend = variable(str, value="icoforge-cpu")
    reference_backend = variable(str, value="icoforge-emulated-cuda")
    valid_systems = ["*"]
    descr = "icoforge run: verified against a second backend, median time per call"

    @run_after("init")
    def device_tag(self):  # "cpu" here, "gpu" in the GPU twin
        self.tags |= {"cpu"}

    @run_before("run")
    def command(self):
        self.executable = self.icoforge_python
        self.executable_opts = [
            "-m", "icoforge", "run", self.program, "--grid", self.grid, "--levels", str(self.levels),
            "--backend", self.backend, "--compare", self.reference_backend, "--repeat", "5",
        ]  # fmt: skip

    @sanity_function
    def verified(self):
        return sn.all([
            sn.assert_found(r"PASS max rel", self.stdout),
            sn.assert_not_found(r"\bFAIL\b|Traceback|error:", self.stdout),
            sn.assert_not_found(r"Traceback", self.stderr),
        ])  # fmt: skip

    @performance_function("ms")
    def median_per_call(self):
        # the backend's row of the table: name | compile s | first call ms | median ms | ...
        row = rf"{self.backend}\s*\S\s*[\d.]+\s*\S\s*[\d.]+\s*\S\s*(?P<median>[\d.]+)"
        return sn.extractsingle(row, self.stdout, "median", float)


@rfm.simple_test
class IcoforgeGreenlineCheck(IcoforgeCommand):
    """The dycore step (icon4py's SolveNonhydro.time_step) with icoforge on a GPU: fingerprint
    equal to a GT4Py backend's is checked by `greenline --verify` when `compare` is set."""

    grid = variable(str, value="R2B6")
    levels = variable(int, value=80)
    backend = variable(str, value="icoforge-cuda")
    steps = variable(int, value=5)
    valid_systems = ["+gpu"]
    descr = "icoforge greenline: dycore step time per variant on the GPU"
    time_limit = "30m"
    reference = {
        "h200:gpu": {
            "dycore_step": (98.2, None, 0.10, "ms"),  # benchmarks/h200-2026-11-30-s7, unfused run
        }
    }

    @run_before("run")
    def command(self):
        self.executable = self.icoforge_python
        self.executable_opts = [
            "-m", "icoforge", "greenline", "--grid", self.grid, "--levels", str(self.levels),
            "--backend", self.backend, "--steps", str(self.steps), "--warmup", "1", "--profile-steps", "1",
            "--only-used-variants", "--json", "greenline.json",
        ]  # fmt: skip

    def _report(self):
        with open(os.path.join(self.stagedir, "greenline.json")) as f:
            return json.load(f)["backends"][0]

    @sanity_function
    def finished(self):
        return sn.all([
            sn.assert_found(r"dycore step", self.stdout),
            sn.assert_true(os.path.exists(os.path.join(self.stagedir, "greenline.json"))),
            sn.assert_not_found(r"Traceback", self.stderr),
        ])  # fmt: skip

    @performance_function("ms")
    def dycore_step(self):
        return self._report()["dycore_step_ms"]

    @performance_function("ms")
    def first_substep(self):
        return self._report()["variants"]["first"]["median_ms"]

    @performance_function("s")
    def setup_time(self):
        s = self._report()["setup_s"]
        return s["construct"] + s["compile"] + s["first_calls"]


@rfm.simple_test
class IcoforgeGpuProgramCheck(IcoforgeProgramCheck):
    """The program checks on a GPU: icoforge-cuda verified against the CPU target."""

    valid_systems = ["+gpu"]
    grid = "R2B4"
    levels = 80
    backend = "icoforge-cuda"
    reference_backend = "icoforge-cpu"

    @run_after("init")
    def device_tag(self):  # "cpu" here, "gpu" in the GPU twin
        self.tags |= {"gpu"}
