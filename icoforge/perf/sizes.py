"""Call sizes of a suite program on a grid without allocating its fields: the model only needs
scalar values and index ranges (a program on R2B6 with 80 levels would need gigabytes of inputs).

Scalars come from the suite's argument table (`suite.ranges`) with the values `make_inputs(info,
grid, seed)` gives: every field value `make_inputs` draws takes one 64-bit output of the generator
(random(), uniform()), so skipping a field is `bit_generator.advance(field size)`
(`suite.inputs.make_scalars`). Random switches
(bool scalars) then agree with the inputs the suite runs on, and so do the static scalars that
decide which kernels exist.
"""

from __future__ import annotations

from typing import Any

from icoforge.perf.model import CallSizes


def suite_sizes(info: Any, grid: Any, seed: int = 0) -> CallSizes:
    from icoforge.suite.inputs import field_shape, make_scalars

    fields = {p.name: tuple((0, n) for n in field_shape(p, grid)) for p in info.params if p.is_field}
    return CallSizes.from_args({**make_scalars(info, grid, seed), **fields}, grid.connectivities)
