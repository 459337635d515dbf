"""The one table of element types: GT4Py's scalar kind names (lower case) -> what every stage
needs to know of them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    """What every stage needs to know of a dtype: bytes per element, the host C++ type (<cstdint>)
    and the device type (NVRTC and hiprtc have no standard headers by default)."""

    itemsize: int
    c: str
    device: str

    def numpy(self, name: str) -> str:
        """The NumPy scalar type, as generated Python names it."""
        return "np.bool_" if name == "bool" else f"np.{name}"


DTYPES = {
    "float64": DType(8, "double", "double"),
    "float32": DType(4, "float", "float"),
    "int8": DType(1, "int8_t", "signed char"),
    "uint8": DType(1, "uint8_t", "unsigned char"),
    "int16": DType(2, "int16_t", "short"),
    "uint16": DType(2, "uint16_t", "unsigned short"),
    "int32": DType(4, "int32_t", "int"),
    "uint32": DType(4, "uint32_t", "unsigned int"),
    "int64": DType(8, "int64_t", "long long"),
    "uint64": DType(8, "uint64_t", "unsigned long long"),
    "bool": DType(1, "bool", "bool"),
}
ITEMSIZE = {name: d.itemsize for name, d in DTYPES.items()}
