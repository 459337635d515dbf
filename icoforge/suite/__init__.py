"""The program suite: icon4py's dycore programs, valid random inputs, timing and verification.

    from icoforge.grids import load_grid
    from icoforge.suite import get_program, make_inputs, run_program, verify

    grid = load_grid("R2B4", levels=80)
    info = get_program("vertically_implicit_solver_at_predictor_step")
    run_program(info, "gtfn_cpu", grid, seed=0, repeat=10).median_ms
    verify(info, "icoforge", "gtfn_cpu", grid).summary()

Modules: `catalogue` (programs and what their GTIR says), `specs` + `ranges` (the table of
argument values), `inputs` (argument building), `argcheck` (cheap validity checks), `backends`
(names -> GT4Py backends), `runner` (compile and time), `verify` (compare two backends).
"""

from icoforge.suite.backends import backend_names, get_backend
from icoforge.suite.catalogue import Param, ProgramInfo, all_programs, get_program, program_names
from icoforge.suite.inputs import copy_args, make_inputs
from icoforge.suite.runner import CustomBackend, RunResult, prepare, run_program
from icoforge.suite.verify import OutputStats, VerifyResult, compare_output, verify

__all__ = [
    "CustomBackend",
    "OutputStats",
    "Param",
    "ProgramInfo",
    "RunResult",
    "VerifyResult",
    "all_programs",
    "backend_names",
    "compare_output",
    "copy_args",
    "get_backend",
    "get_program",
    "make_inputs",
    "prepare",
    "program_names",
    "run_program",
    "verify",
]
