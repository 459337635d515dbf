"""Which GPU CuPy sees here: its vendor, name and architecture (None without one). The main
process asks when it makes a GPU backend; GT4Py's compile workers see no GPU."""

from __future__ import annotations


def cupy_vendor() -> str | None:
    """"cuda" or "hip" for the CuPy build importable here, None without CuPy or a device."""
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() < 1:
            return None
        return "hip" if cp.cuda.runtime.is_hip else "cuda"
    except Exception:
        return None


def device_name() -> str | None:
    """The name of CuPy's current device ("NVIDIA H200"), None without one."""
    try:
        import cupy as cp

        name = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return None


def device_arch() -> str | None:
    """The GPU architecture of CuPy's current device: "sm_90" (CUDA compute capability) or
    "gfx942" (HIP), None without one. Tuned schedules hold across devices of one architecture."""
    try:
        import cupy as cp

        if cp.cuda.runtime.is_hip:
            props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
            name = props["gcnArchName"]
            return (name.decode() if isinstance(name, bytes) else str(name)).split(":")[0]
        return f"sm_{cp.cuda.Device().compute_capability}"
    except Exception:
        return None


__all__ = ["cupy_vendor", "device_arch", "device_name"]
