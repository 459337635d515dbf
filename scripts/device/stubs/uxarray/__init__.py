"""A stand-in for uxarray on the device machine, put on PYTHONPATH by setup.sh only where uxarray is
not installed. icon4py imports uxarray at module level (icon4py.model.common.io.ugrid, reached from
the driver's config, which icon4py's testing fixtures and `icoforge model` import) and uses it only in
ugrid's `open_grid`. The real package with its plotting chain (cartopy, holoviews, datashader,
pyproj, ...: 38.6 MiB of wheels) does not fit the 64 MiB a call carries. Any use raises ImportError."""


def __getattr__(name: str):
    raise ImportError(f"uxarray.{name}: uxarray is not installed on this machine (scripts/device/stubs stand-in)")
