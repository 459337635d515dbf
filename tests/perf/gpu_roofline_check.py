"""Device check (not a pytest module): roofline of one program with icoforge-cuda."""
import os
import sys

from icoforge.grids import load_grid
from icoforge.perf.measure import measure, write_roofline

if __name__ == "__main__":
    g = load_grid(sys.argv[2], levels=int(sys.argv[3]), show_progress=False)
    m = measure(sys.argv[1], g, "icoforge-cuda", repeat=20, status=print)
    f = write_roofline(m, os.path.join(os.environ.get("OUT", "."), f"roofline_{sys.argv[1][:24]}.png"))
    print(open(f.markdown).read())
