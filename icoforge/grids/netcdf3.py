"""Size check for classic NetCDF (CDF-1/2/5) files.

The netCDF library opens a truncated classic file without complaint and returns zeros for
the missing tail, which would give a grid with zero orientations and areas. HDF5-based
NetCDF-4 files do not need this: the library refuses them. Reading the header (format:
https://docs.unidata.ucar.edu/netcdf-c/current/file_format_specifications.html) gives
where each variable's data ends, so the file must be at least that long.
"""

from __future__ import annotations

import pathlib

_NC_DIMENSION, _NC_VARIABLE, _NC_ATTRIBUTE = 0x0A, 0x0B, 0x0C
# nc_type -> bytes per value: byte, char, short, int, float, double, ubyte, ushort, uint, int64, uint64
_TYPE_SIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 4, 6: 8, 7: 1, 8: 2, 9: 4, 10: 8, 11: 8}


class _Reader:
    def __init__(self, data: bytes, version: int):
        self.data, self.pos = data, 4
        self.count_size = 8 if version == 5 else 4  # NON_NEG counts
        self.offset_size = 4 if version == 1 else 8  # variable begin offsets

    def _unpack(self, size: int) -> int:
        if self.pos + size > len(self.data):
            raise EOFError
        value = int.from_bytes(self.data[self.pos : self.pos + size], "big")
        self.pos += size
        return value

    def count(self) -> int:
        return self._unpack(self.count_size)

    def tag(self) -> int:
        return self._unpack(4)

    def skip(self, nbytes: int) -> None:
        self.pos += (nbytes + 3) // 4 * 4  # padded to 4 bytes
        if self.pos > len(self.data):
            raise EOFError

    def name(self) -> None:
        self.skip(self.count())

    def attributes(self) -> None:
        tag, n = self.tag(), self.count()
        if tag not in (0, _NC_ATTRIBUTE):
            raise ValueError("bad attribute list")
        for _ in range(n):
            self.name()
            nc_type = self.tag()
            self.skip(self.count() * _TYPE_SIZE[nc_type])


def classic_data_end(path: pathlib.Path, header_bytes: int = 1 << 20) -> int | None:
    """Bytes a complete classic NetCDF file must have, or None for other formats (NetCDF-4)."""
    with open(path, "rb") as f:
        data = f.read(header_bytes)
    if data[:3] != b"CDF" or len(data) < 4 or data[3] not in (1, 2, 5):
        return None
    try:
        return _data_end(_Reader(data, data[3]))
    except EOFError:
        if len(data) == header_bytes:  # a header larger than what we read: try once with all
            return classic_data_end(path, header_bytes=path.stat().st_size)
        return len(data) + 1  # the header itself is cut off
    except (ValueError, KeyError):
        return None  # not a header we understand; leave the judgement to the library


def _data_end(r: _Reader) -> int:
    numrecs = r.count()
    if numrecs == (1 << (8 * r.count_size)) - 1:  # STREAMING: record count unknown
        numrecs = 0
    tag, n = r.tag(), r.count()
    dims = []
    for _ in range(n if tag == _NC_DIMENSION else 0):
        r.name()
        dims.append(r.count())  # 0: the record dimension
    r.attributes()
    tag, n = r.tag(), r.count()
    fixed_end, records = 0, []  # records: (begin, unpadded size of one record, vsize)
    for _ in range(n if tag == _NC_VARIABLE else 0):
        r.name()
        dimids = [r.count() for _ in range(r.count())]
        r.attributes()
        nbytes = _TYPE_SIZE[r.tag()]
        vsize, begin = r.count(), r._unpack(r.offset_size)
        is_record = bool(dimids) and dims[dimids[0]] == 0
        for d in dimids[1:] if is_record else dimids:
            nbytes *= dims[d]
        if is_record:
            records.append((begin, nbytes, vsize))
        else:
            fixed_end = max(fixed_end, begin + nbytes)
    if records and numrecs:
        recsize = records[0][1] if len(records) == 1 else sum(v for _, _, v in records)
        fixed_end = max(fixed_end, *(b + (numrecs - 1) * recsize + s for b, s, _ in records))
    return fixed_end
