#!/bin/bash
# One device call (issue 20: "a single big program, the predictor solver, cold in under 5 s on the
# H200 host"): each program compiled alone, nothing else compiling, every cache empty (icoforge's
# translation and build cache, CuPy's NVRTC cache), one after the other. The granule's cold compile
# (run_cold_compile.sh) only shows a program's job translated beside 19 others on the 16 cores.
#
#   run(carry=[".whl"], timeout_s=600, command="bash scripts/device/run_cold_program.sh")
#
# Per run: GT4Py's passes and our lowering (ICOFORGE_TRACE's line), and `icoforge run`'s "compiled
# in" (translation + code generation + NVRTC + loading; what a user waits for), in a table at the end.
# Knobs: PROGRAMS (the two solvers and rho_theta), GRID (R2B4), LEVELS (80), BACKEND (icoforge-cuda),
#        ROUNDS (2: each program cold this many times, interleaved), RUN_ARGS (more `icoforge run`
#        options, e.g. --in-worker: the compile in a GT4Py worker as before 2026-12-03), SETUP (1; 0: no setup.sh, e.g.
#        BACKEND=icoforge-cpu SETUP=0 OUT=/tmp/o PY=.venv/bin/python on a workstation).
[ "${SETUP:-1}" = 1 ] && source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
PY=${PY:-python3}
GRID=${GRID:-R2B4}; LEVELS=${LEVELS:-80}; BACKEND=${BACKEND:-icoforge-cuda}
PROGRAMS=${PROGRAMS:-"vertically_implicit_solver_at_predictor_step vertically_implicit_solver_at_corrector_step compute_rho_theta_pgrad_and_update_vn"}
export PYTHONUNBUFFERED=1 PYTHONOPTIMIZE=1  # -O as the granule runs
BASE=${ICOFORGE_CACHE:-$HOME/.cache/icoforge}; mkdir -p "$BASE" "$OUT"

# the grid once, into the shared cache; each cold run then links it into its empty cache
stamp "grid $GRID/$LEVELS"
$PY -m icoforge grid make $GRID > $OUT/grid.log 2>&1

for round in $(seq 1 ${ROUNDS:-2}); do
  for p in $PROGRAMS; do
    cold=$(mktemp -d /tmp/icf-cold-XXXX); mkdir -p $cold/grids; cp -al "$BASE"/grids/. $cold/grids/ 2>/dev/null
    stamp "cold $p (round $round)"
    env ICOFORGE_CACHE=$cold ICOFORGE_TRACE=$cold/trace CUPY_CACHE_DIR=$(mktemp -d /tmp/cupy-cold-XXXX) \
      timeout 200 $PY -m icoforge run $p --grid $GRID --levels $LEVELS --backend $BACKEND --repeat 3 ${RUN_ARGS:-} \
      > $OUT/cold-$p-$round.log 2>&1
    stamp "done (rc $?)"
    rm -rf $cold
  done
done

$PY - $OUT <<'EOF' | tee $OUT/summary.txt
import pathlib, re, sys
out = pathlib.Path(sys.argv[1])
print(f"{'program':<50} {'round':>5} {'GT4Py passes s':>14} {'lowered s':>9} {'NVRTC+load s':>12} {'compiled in s':>13}")
for f in sorted(out.glob("cold-*.log"), key=lambda f: (f.stem.rsplit("-", 1)[1], f.stem)):
    text = f.read_text()
    name, rnd = f.stem[5:].rsplit("-", 1)
    passes = re.search(r"passes computed in ([\d.]+) s, lowered in ([\d.]+) s", text)
    loaded = re.search(r"kernels loaded \(NVRTC or CuPy's disk cache\) in ([\d.]+) s", text)
    total = re.search(r"compiled in ([\d.]+) s", text)
    cells = [passes.group(1) if passes else "-", passes.group(2) if passes else "-",
             loaded.group(1) if loaded else "-", total.group(1) if total else "failed"]
    print(f"{name:<50} {rnd:>5} {cells[0]:>14} {cells[1]:>9} {cells[2]:>12} {cells[3]:>13}")
EOF
