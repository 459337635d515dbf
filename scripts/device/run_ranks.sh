#!/bin/bash
# Issue 23, item 2: ranks sharing the one H200. For each backend and each rank count, the dycore
# step decomposed over N MPI ranks (`icoforge greenline --ranks N`: icon4py's decomposition and
# halo exchanges, every rank on GPU 0), then a table: ranks x backend, step ms (slowest rank) and
# exchange ms per step.
#
#   run(carry=[".whl"], timeout_s=600, command="bash scripts/device/run_ranks.sh")            # icoforge-cuda: 1, 2 ranks
#   run(carry=[".whl"], timeout_s=600, command="RANKS=4 bash scripts/device/run_ranks.sh")    # 4 ranks: a call of its own
#   run(carry=[".whl"], timeout_s=600, command="BACKENDS=dace_gpu RANKS='1 2' VERIFY_RANKS= bash scripts/device/run_ranks.sh")
#   run(carry=[".whl"], timeout_s=600, command="BACKENDS=dace_gpu RANKS=4 VERIFY_RANKS= END_S=585 bash scripts/device/run_ranks.sh")  # twice, chained
# Every rank compiles its own programs (icon4py fixes the domain bounds at compile time, so each
# rank's are different), N ranks compile N times the programs of one rank on the same 16 cores.
# Session 11 (icoforge-cuda, R2B5/80, fresh machine): the static fields took 90 s, 1 rank 142 s
# to its first timing (fields included), 2 ranks with --verify 125 s; 4 ranks were stopped by the
# 560 s deadline while compiling (their log's last line, at 139 s: 13 of 20 programs). So
# 1 and 2 ranks in one call, 4 ranks in the next call (issue it right away: a warm machine keeps
# /tmp, so the static fields, the builds and the earlier reports are still there; the table takes
# every ranks-*.json found in $OUT/ranks and /tmp/ranks-runs). dace_gpu compiles for minutes per
# process: likewise. All ranks compiling at once cost far more than N times one rank (dace_gpu,
# R2B5/80: 1 rank 171 s, 2 ranks 370 s, 4 ranks over 1,500 s in session 27, cut three times), so
# the ranks now compile in turn (IN_TURN=1, --compile-in-turn): one rank at a time with all 16
# cores' workers, each rank's builds finished before the next begins (a deadline loses only the
# builds of the rank in turn).
#
# Needs in .whl (scripts/device/fetch_wheels.sh, from wheels.txt): mpi4py 4.1.2 and pymetis; the
# `mpich` wheel (MPICH 5.0.2, in .whl-mpich: carry it too) only where mpi4py finds no MPI library (the image of session 11 has
# Open MPI 4.1.6, which mpi4py loads). GHEX is not carried (a source build against one MPI; GPU
# buffers need GHEX_USE_GPU=ON and nvcc): the halo exchange is ours (`--exchange mpi`), GPU
# buffers packed on the device and staged through pinned host memory. The report splits each
# rank's exchange time into phases (pack, to_host, mpi_wait, to_device, unpack, other) from a
# second timing pass that waits for the device between phases.
#
# The grid: REGIONAL is a limited-area grid and icon4py 0.4.1 refuses to decompose those
# ("Limited-area grids are not supported in distributed runs"), so the default is R2B5 (81,920
# cells, the global preset nearest to REGIONAL's 44,528), 80 levels.
#
# Knobs (environment):
#   GRID, LEVELS     default R2B5, 80
#   BACKENDS         default "icoforge-cuda" (one mpiexec per backend and rank count)
#   RANKS            default "1 2" (4 in a call of its own, see above)
#   VERIFY_RANKS     rank counts also verified against one rank (rank 0 compiles the whole grid too; default "2")
#   STEPS            timed substeps per variant (default 5)
#   IN_TURN          1 (default): --compile-in-turn, the ranks build one after another with all 16
#                    cores' compile workers; 0: all ranks at once, cores/N workers each (sessions 11-27)
#   END_S            seconds after the command's start when everything stops (default 560)
# Everything lands in $OUT/ranks (tarred into $OUT/all.tgz every 20 s) and $OUT/ranks-table.txt.

source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
GRID=${GRID:-R2B5}; LEVELS=${LEVELS:-80}
BACKENDS=${BACKENDS:-"icoforge-cuda"}
RANKS=${RANKS:-"1 2"}
VERIFY_RANKS=${VERIFY_RANKS-"2"}  # empty: verify none
STEPS=${STEPS:-5}
IN_TURN=${IN_TURN:-1}
END_S=${END_S:-560}
W=$OUT/ranks; mkdir -p $W

# MPI: the library mpi4py loads. The image has Open MPI 4.1.6 (session 11: mpi4py loaded it, not
# the carried MPICH wheel); the MPICH wheel only when mpi4py finds no library, as its mpiexec
# would otherwise start ranks of a different MPI than the one mpi4py speaks
mpi_library() { python3 -c 'from mpi4py import MPI; print(MPI.Get_library_version().split("\0")[0].splitlines()[0])' 2>/dev/null; }
LIBMPI=$(mpi_library)
if [ -z "$LIBMPI" ] && ls .whl-mpich/mpich-*.whl >/dev/null 2>&1; then
  # pip --target drops the wheel's lib/, so it gets a prefix of its own
  python3 -m pip install -q --no-index --no-deps --no-compile --prefix /tmp/mpich .whl-mpich/mpich-*.whl \
    || { echo "run_ranks.sh: could not install the mpich wheel"; exit 1; }
  export PATH=/tmp/mpich/bin:$PATH LD_LIBRARY_PATH=/tmp/mpich/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  LIBMPI=$(mpi_library)
fi
[ -n "$LIBMPI" ] || { echo "run_ranks.sh: mpi4py cannot load an MPI library (the image has none here: carry .whl-mpich too, scripts/device/fetch_wheels.sh fills it)"; exit 1; }
command -v mpiexec >/dev/null || { echo "run_ranks.sh: no mpiexec"; exit 1; }
echo "run_ranks.sh: mpi4py $(python3 -c 'import mpi4py; print(mpi4py.__version__)') | $LIBMPI | $(command -v mpiexec): $(mpiexec --version 2>&1 | head -1)"
# the host's state, for comparing compile times between sessions (dace_gpu on 4 ranks compiled
# ~1.6x slower in session 27 than in session 26)
echo "run_ranks.sh: host $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
if mpiexec --version 2>&1 | grep -q -e "Open MPI" -e OpenRTE; then
  # Open MPI's mpiexec refuses to run as root without these, and 4 ranks need more slots than it
  # counts on a small host (icoforge's launcher passes --oversubscribe too; this is for the check below)
  [ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
fi
mpiexec -n 2 python3 -c 'from mpi4py import MPI; c = MPI.COMM_WORLD; assert c.Get_size() == 2, c.Get_size()' \
  || { echo "run_ranks.sh: mpiexec -n 2 did not give mpi4py two ranks"; exit 1; }
# NVLink multicast stays off (KINDS.md), also in the ranks' environment
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# GT4Py's builds (dace_gpu's, gtfn's) in /tmp, which a warm machine keeps between calls: a run cut by
# the deadline while compiling (dace_gpu on 4 ranks, ~4 x one rank's compile on the 16 cores) leaves
# what it built, and the same command again on the warm machine starts from there
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/tmp/gt4py-cache

snapshot_loop $W $OUT 20 & SNAP=$!
deadline $END_S "icoforge greenline" & DEAD=$!

# the static fields once (rank 0 of every run would compute them otherwise, inside its time)
static_fields "$GRID" "$LEVELS" $W/fields.txt

for b in $BACKENDS; do
  for n in $RANKS; do
    if [ $(( $(date +%s) - ICF_T0 )) -gt $(( END_S - 45 )) ]; then stamp "$b x $n: skipped (time)"; continue; fi
    v=""; for r in $VERIFY_RANKS; do [ "$r" = "$n" ] && v="--verify"; done
    stamp "$b on $n ranks $v"
    jobs=$(( $(nproc) / n )); turn=""
    [ "$IN_TURN" = 1 ] && [ "$n" -gt 1 ] && { jobs=$(nproc); turn="--compile-in-turn"; }
    OMP_NUM_THREADS=$(( $(nproc) / n )) GT4PY_BUILD_JOBS=$jobs python3 -m icoforge greenline --ranks $n --mpirun mpiexec --exchange mpi \
      --grid $GRID --levels $LEVELS --backend $b --steps $STEPS --warmup 1 --only-used-variants $v $turn \
      --json $W/ranks-$b-$n.json > $W/ranks-$b-$n.log 2>&1
    stamp "$b on $n ranks: rc $? $(grep -m1 -E 'dycore step' $W/ranks-$b-$n.log)"
    mkdir -p /tmp/ranks-runs && cp $W/ranks-$b-$n.json /tmp/ranks-runs/ 2>/dev/null
  done
done
stop_bg $DEAD

python3 - $W /tmp/ranks-runs > $OUT/ranks-table.txt <<'EOF'
import json, pathlib, sys
rows, seen, reports = [], set(), []
files = [f for d in sys.argv[1:] for f in sorted(pathlib.Path(d).glob("ranks-*.json"))]
for f in files:
    if f.name in seen:
        continue
    seen.add(f.name)
    r = json.loads(f.read_text())
    reports.append(r)
    for b in r["backends"]:
        ex = b["exchange_ms_per_step"]
        v = b["verification"]
        verdict = "-" if v is None else ("PASS" if v["passed"] else "FAIL") + f" {max(v['worst_rel'].values()):.1e}"
        # the slowest rank's construct + compile, and whether the ranks built in turn (reports before
        # session 27 have no build windows)
        windows = [x.get("build_window") for x in b["ranks"]]
        build = f"{max(w[1] - w[0] for w in windows):.0f}" if all(windows) else "-"
        build += " turn" if r["options"].get("compile_in_turn") else ""
        rows.append((b["backend"], r["ranks"], b["dycore_step_ms"], ex, ex / b["dycore_step_ms"], verdict,
                     max(x["points"]["cells"]["owned"] + x["points"]["cells"]["halo"] for x in b["ranks"]),
                     b["ranks"][0]["exchange"].split(" ")[0], build))
print(f"{'backend':<14} {'ranks':>5} {'step ms':>9} {'exch ms/step':>12} {'share':>6} {'cells/rank':>10} {'exchange':>8} {'build s':>9}  vs 1 rank")
for b, n, s, e, sh, v, c, x, bs in sorted(rows):
    print(f"{b:<14} {n:>5} {s:>9.2f} {e:>12.2f} {sh:>6.1%} {c:>10} {x:>8} {bs:>9}  {v}")
phase_rows = sorted((b["backend"], r["ranks"], x["rank"], x["exchange_phases_ms_per_step"]) for r in reports
                    for b in r["backends"] for x in b["ranks"] if x.get("exchange_phases_ms_per_step"))
if phase_rows:
    names = list(phase_rows[0][3])
    print("\nexchange phases, ms per step (a second pass that waits for the device between phases)")
    print(f"{'backend':<14} {'ranks':>5} {'rank':>4} " + " ".join(f"{k:>9}" for k in names))
    for b, n, rank, ph in phase_rows:
        print(f"{b:<14} {n:>5} {rank:>4} " + " ".join(f"{ph[k]:>9.2f}" for k in names))
EOF
stop_bg $SNAP
tar czf $OUT/all.tgz -C $W . 2>/dev/null; rm -f $OUT/.all.tgz.tmp
cat $OUT/ranks-table.txt
