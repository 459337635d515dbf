"""Helpers for timing icon4py's own benchmarks with any backend (pytest plugins loaded with `-p`)."""
