# Source at the start of every command on the (offline) GPU machine, from the repo root:
#     source scripts/device/setup.sh && python3 -m icoforge ...
# with `.whl` named in the run's `carry` (scripts/device/fetch_wheels.sh fills it here).
# Installs the carried wheels into /tmp/site, puts them and the repo on PYTHONPATH, and
# prints what the run will use. On failure it exits (ends the whole device command).

export ICF_T0=${ICF_T0:-$(date +%s)}  # the command's start, for lib.sh's stamps and deadlines
_icf_fail() { echo "setup.sh: $*" >&2; exit 1; }

[ -f pyproject.toml ] && [ -d icoforge ] || _icf_fail "run from the repository root"
ls .whl/*.whl >/dev/null 2>&1 || _icf_fail "no .whl/*.whl: name .whl in the run's carry"

# The wheels were fetched with --no-deps: everything else comes from the image.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || _icf_fail "pip install of .whl failed"

export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
# uxarray (icon4py's driver config imports it; its wheels do not fit a call): a stand-in, last on the
# path, only where the machine has none (scripts/device/stubs/uxarray)
python3 -c 'import uxarray' 2>/dev/null || export PYTHONPATH=$PYTHONPATH:$PWD/scripts/device/stubs
export ICOFORGE_CACHE=/tmp/icfcache   # grids and builds; the machine starts bare each time
export ICF_TREE=$(bash scripts/device/tree_id.sh)  # which sources this copy holds (tree_id.sh)
echo "tree $ICF_TREE (bash scripts/device/tree_id.sh here prints the same for the same files)"
mkdir -p "$ICOFORGE_CACHE"

# Versions; warn where a carried package's requirement is not met by the image.
python3 - <<'EOF' || _icf_fail "python check failed"
import sys, importlib.metadata as md
from packaging.requirements import Requirement
import gt4py
print("python", sys.version.split()[0], sys.executable, "| gt4py", gt4py.__version__,
      "| numpy", md.version("numpy"), "| networkx", md.version("networkx"))
try:
    import cupy
    print("cupy", cupy.__version__, "| CUDA runtime", cupy.cuda.runtime.runtimeGetVersion())
except Exception as e:  # icoforge's GPU target needs CuPy
    print("WARNING: cupy unusable:", e)
for d in md.distributions(path=["/tmp/site"]):
    for r in map(Requirement, d.requires or []):
        if r.marker and not r.marker.evaluate({"extra": ""}):
            continue
        try:
            v = md.version(r.name)
        except md.PackageNotFoundError:
            print(f"WARNING: {d.metadata['Name']} needs {r}: not installed"); continue
        if not r.specifier.contains(v, prereleases=True):
            print(f"WARNING: {d.metadata['Name']} needs {r}: found {v}")
EOF

nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv || _icf_fail "nvidia-smi failed"
unset -f _icf_fail
