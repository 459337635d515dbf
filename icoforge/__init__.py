"""icoforge: a GT4Py backend and performance lab for ICON's dynamical core."""

__version__ = "0.1.0"
