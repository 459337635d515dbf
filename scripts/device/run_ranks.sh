#!/bin/bash
# Issue 23, item 2: ranks sharing the one H200. For each backend and each rank count, the dycore
# step decomposed over N MPI ranks (`icoforge greenline --ranks N`: icon4py's decomposition and
# halo exchanges, every rank on GPU 0), then a table: ranks x backend, step ms (slowest rank) and
# exchange ms per step.
#
#   run(carry=[".whl"], timeout_s=600, command="bash scripts/device/run_ranks.sh")            # icoforge-cuda: 1, 2, 4 ranks
#   run(carry=[".whl"], timeout_s=600, command="BACKENDS=dace_gpu RANKS='1 2' VERIFY_RANKS= bash scripts/device/run_ranks.sh")
#   run(carry=[".whl"], timeout_s=600, command="BACKENDS=dace_gpu RANKS=4 bash scripts/device/run_ranks.sh")
# (dace_gpu compiles for minutes per process and every rank compiles its own programs: one call
# for all three rank counts would not fit. Issue the next call right away: a warm machine keeps
# /tmp, so the static fields and earlier reports are still there; the table takes every
# ranks-*.json found in $OUT/ranks and /tmp/ranks-runs.)
#
# Needs in .whl (scripts/device/fetch_wheels.sh, from wheels.txt): mpi4py 4.1.2, pymetis and the
# `mpich` wheel (MPICH 5.0.2: libmpi.so.12 and mpiexec/hydra; the image has mpi4py but no MPI
# library). GHEX is not carried (a source build against one MPI; GPU buffers need
# GHEX_USE_GPU=ON and nvcc): the halo exchange is ours (`--exchange mpi`), GPU buffers packed on
# the device and staged through host memory.
#
# The grid: REGIONAL is a limited-area grid and icon4py 0.4.1 refuses to decompose those
# ("Limited-area grids are not supported in distributed runs"), so the default is R2B5 (81,920
# cells, the global preset nearest to REGIONAL's 44,528), 80 levels.
#
# Knobs (environment):
#   GRID, LEVELS     default R2B5, 80
#   BACKENDS         default "icoforge-cuda" (one mpiexec per backend and rank count)
#   RANKS            default "1 2 4"
#   VERIFY_RANKS     rank counts also verified against one rank (rank 0 compiles the whole grid too; default "2")
#   STEPS            timed substeps per variant (default 5)
#   END_S            seconds after the command's start when everything stops (default 560)
# Everything lands in $OUT/ranks (tarred into $OUT/all.tgz every 20 s) and $OUT/ranks-table.txt.

source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
GRID=${GRID:-R2B5}; LEVELS=${LEVELS:-80}
BACKENDS=${BACKENDS:-"icoforge-cuda"}
RANKS=${RANKS:-"1 2 4"}
VERIFY_RANKS=${VERIFY_RANKS:-"2"}
STEPS=${STEPS:-5}
END_S=${END_S:-560}
W=$OUT/ranks; mkdir -p $W

# MPI: the carried MPICH wheel (pip --target drops its lib/, so it gets a prefix of its own)
if ls .whl/mpich-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --prefix /tmp/mpich .whl/mpich-*.whl \
    || { echo "run_ranks.sh: could not install the mpich wheel"; exit 1; }
  export PATH=/tmp/mpich/bin:$PATH LD_LIBRARY_PATH=/tmp/mpich/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
command -v mpiexec >/dev/null || { echo "run_ranks.sh: no mpiexec (carry the mpich wheel: wheels.txt)"; exit 1; }
python3 -c 'from mpi4py import MPI; import mpi4py; print("mpi4py", mpi4py.__version__, "|", MPI.Get_library_version().splitlines()[0])' \
  || { echo "run_ranks.sh: mpi4py cannot load an MPI library"; exit 1; }
mpiexec -n 2 python3 -c 'from mpi4py import MPI; c = MPI.COMM_WORLD; assert c.Get_size() == 2, c.Get_size()' \
  || { echo "run_ranks.sh: mpiexec -n 2 did not give mpi4py two ranks"; exit 1; }
# NVLink multicast stays off (KINDS.md), also in the ranks' environment
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

snapshot_loop $W $OUT 20 & SNAP=$!
deadline $END_S "icoforge greenline" & DEAD=$!

# the static fields once (rank 0 of every run would compute them otherwise, inside its time)
stamp "static fields $GRID/$LEVELS"
# `python3 -c`, not a here-document: the fields are computed in a spawned child, and spawn
# re-runs the parent's main module from its path ('<stdin>' does not exist; session 11)
python3 -c '
import sys
from icoforge.granule.fields import build_static_fields
from icoforge.granule.greenline import DEFAULT_FACTORY_BACKEND
from icoforge.grids import load_grid
g = load_grid(sys.argv[1], levels=int(sys.argv[2]), show_progress=False)
f = build_static_fields(g, DEFAULT_FACTORY_BACKEND, in_child=True)
print(g, "cached" if f.cached else f"computed {f.timings}")
' "$GRID" "$LEVELS" > $W/fields.txt 2>&1
stamp "fields: $(tail -1 $W/fields.txt)"

for b in $BACKENDS; do
  for n in $RANKS; do
    if [ $(( $(date +%s) - ICF_T0 )) -gt $(( END_S - 45 )) ]; then stamp "$b x $n: skipped (time)"; continue; fi
    v=""; for r in $VERIFY_RANKS; do [ "$r" = "$n" ] && v="--verify"; done
    stamp "$b on $n ranks $v"
    OMP_NUM_THREADS=$(( $(nproc) / n )) python3 -m icoforge greenline --ranks $n --mpirun mpiexec --exchange mpi \
      --grid $GRID --levels $LEVELS --backend $b --steps $STEPS --warmup 1 --only-used-variants $v \
      --json $W/ranks-$b-$n.json > $W/ranks-$b-$n.log 2>&1
    stamp "$b on $n ranks: rc $? $(grep -m1 -E 'dycore step' $W/ranks-$b-$n.log)"
    mkdir -p /tmp/ranks-runs && cp $W/ranks-$b-$n.json /tmp/ranks-runs/ 2>/dev/null
  done
done
stop_bg $DEAD

python3 - $W /tmp/ranks-runs > $OUT/ranks-table.txt <<'EOF'
import json, pathlib, sys
rows, seen = [], set()
files = [f for d in sys.argv[1:] for f in sorted(pathlib.Path(d).glob("ranks-*.json"))]
for f in files:
    if f.name in seen:
        continue
    seen.add(f.name)
    r = json.loads(f.read_text())
    for b in r["backends"]:
        ex = b["exchange_ms_per_step"]
        v = b["verification"]
        verdict = "-" if v is None else ("PASS" if v["passed"] else "FAIL") + f" {max(v['worst_rel'].values()):.1e}"
        rows.append((b["backend"], r["ranks"], b["dycore_step_ms"], ex, ex / b["dycore_step_ms"], verdict,
                     max(x["points"]["cells"]["owned"] + x["points"]["cells"]["halo"] for x in b["ranks"]),
                     b["ranks"][0]["exchange"].split(" ")[0]))
print(f"{'backend':<14} {'ranks':>5} {'step ms':>9} {'exch ms/step':>12} {'share':>6} {'cells/rank':>10} {'exchange':>8}  vs 1 rank")
for b, n, s, e, sh, v, c, x in sorted(rows):
    print(f"{b:<14} {n:>5} {s:>9.2f} {e:>12.2f} {sh:>6.1%} {c:>10} {x:>8}  {v}")
EOF
stop_bg $SNAP
tar czf $OUT/all.tgz -C $W .
cat $OUT/ranks-table.txt
