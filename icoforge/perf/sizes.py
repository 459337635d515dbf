"""Call sizes of a suite program on a grid without allocating its fields: the model only needs
scalar values and index ranges (a program on R2B6 with 80 levels would need gigabytes of inputs).

Scalars come from the suite's argument table (`suite.ranges`) with the values `make_inputs(info,
grid, seed)` gives: every field value `make_inputs` draws takes one 64-bit output of the generator
(random(), uniform()), so skipping a field is `bit_generator.advance(field size)`. Random switches
(bool scalars) then agree with the inputs the suite runs on, and so do the static scalars that
decide which kernels exist.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from icoforge.perf.model import CallSizes


def suite_sizes(info: Any, grid: Any, seed: int = 0) -> CallSizes:
    from icoforge.suite.inputs import default_spec, field_shape
    from icoforge.suite.ranges import spec_for
    from icoforge.suite.specs import SpecContext

    ctx = SpecContext(grid=grid, rng=np.random.default_rng(seed))
    fields, scalars = {}, {}
    for p in info.params:
        if p.is_field:
            shape = field_shape(p, grid)
            fields[p.name] = tuple((0, n) for n in shape)
            ctx.rng.bit_generator.advance(int(np.prod(shape)))  # the draws make_inputs makes
        else:
            scalars[p.name] = ctx.resolve_scalar(spec_for(info.name, p.name) or default_spec(info, p), p.dtype)
    return CallSizes.from_args({**scalars, **fields}, grid.connectivities)
