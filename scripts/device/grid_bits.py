"""Which bits the R2B3 preset gets on this machine's CPU (icoforge/portable_numpy.py): prints the
CPU, numpy's AVX-512 dispatch, the SHA-256 of lat_cell_centre and of all floating-point variables
(icoforge/grids/digest.py). Run twice, with and without
NPY_DISABLE_CPU_FEATURES, to see whether the test grid here equals the references' grid."""

import os
import pathlib
import platform
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from icoforge.grids import generate, presets  # noqa: E402
from icoforge.portable_numpy import avx512_paths_on  # noqa: E402
from icoforge.grids.digest import R2B3_REFERENCES_SHA256, float_variables_sha256  # noqa: E402


def main() -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), platform.processor())
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "R2B3.nc"
        generate.run_generator(presets.lookup_preset("R2B3"), out)
        digest = float_variables_sha256(out)
    print(f"cpu {cpu} | NPY_DISABLE_CPU_FEATURES={os.environ.get('NPY_DISABLE_CPU_FEATURES', '')!r} | "
          f"numpy AVX-512 paths {'on' if avx512_paths_on() else 'off'} | grid {digest[:16]} "
          f"({'equals' if digest == R2B3_REFERENCES_SHA256 else 'differs from'} the references' grid)")


if __name__ == "__main__":
    main()
