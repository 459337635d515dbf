"""icon4py's model (its driver, `icon4py.model.driver`) run with an icoforge backend.

A lab layer beside `icoforge.granule`: it may import `icoforge.grids`, `icoforge.suite` and
`icoforge.backend`; only the CLI (`icoforge model`) imports it.

- `experiments.py`: the configuration of a run: a named experiment built from icon4py's own
  configuration classes (the Jablonowski-Williamson baroclinic wave on any grid preset) or
  icon4py's configuration directory, with the defaults made consistent and every change said;
- `run.py`: icon4py's driver set up and stepped one time step at a time, with progress and
  timings (steps while GT4Py compile workers were alive are kept apart);
- `diagnostics.py`: global dry mass and minimum surface pressure per step;
- `store.py`: stored gtfn_cpu results of a JW run and the comparison against them;
- `report.py`: the summary table and the Markdown/PNG of a long run.
"""
