"""Stage 1, frontend: GT4Py's side of the compiler.

Takes a GT4Py program (`CompilableProgramDef`: GTIR, argument types, offset providers) and gives
the GTIR that lowering reads: GT4Py's passes run (with icoforge's speed-ups, `gt4py_speedups`, and
the early pipeline, `gt4py_early`, that keeps field-level expressions), dead code removed
(`dead_code`), and the GT4Py version differences papered over (`gt4py_compat`, `gt4py_symbols`).
Imports nothing else of the backend.
"""
