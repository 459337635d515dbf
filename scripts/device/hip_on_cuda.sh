#!/bin/bash
# The generated HIP source of every dycore program, run on the H200 through the HIP-on-CUDA header
# (icoforge/backend/codegen/hip_on_cuda.h, NVRTC) and verified against icoforge-cpu; one device
# call of at most 9 minutes:
#
#   run(carry=[".whl"], timeout_s=600, command="bash scripts/device/hip_on_cuda.sh")
#
# 1. `icoforge verify-all --backend icoforge-hip-on-cuda --reference icoforge-cpu` on R2B4 at 20
#    levels, seed 0, HIP's vendor default schedule (256x1): every output of every program, poisoned,
#    whole arrays, rtol 1e-10 -> $OUT/hip-on-cuda-verify.md, last line "78 of 78 passed (0 not run yet)."
# 2. If time is left: the same with an MI300-style HIP schedule that exercises the HIP-only code
#    (chiplet remap over 8 chiplets, amdgpu_waves_per_eu from max_registers, shared-memory staging
#    with its barrier, two levels per thread) -> $OUT/hip-on-cuda-verify-mi300.md. Passes, g++ and
#    inputs are shared with step 1 (same seed): only NVRTC and the runs are new.
# $OUT/hip-on-cuda.log: the progress lines; exit 1 unless step 1 says "78 of 78 passed".
# Knobs: GRID, LEVELS, JOBS (default 12 workers), END_S (default 540 s after the call's start),
# MI300_S (least time left to start step 2, default 100).

source scripts/device/setup.sh
source scripts/device/lib.sh
set -u -o pipefail
export PYTHONUNBUFFERED=1
GRID=${GRID:-R2B4} LEVELS=${LEVELS:-20} JOBS=${JOBS:-12} END_S=${END_S:-540} MI300_S=${MI300_S:-100}
MI300='{"default": {"block": [256, 1], "chiplet_remap": true, "chiplets": 8, "max_registers": 128, "smem_tables": ["*"], "k_per_thread": 2}}'
[ -d .devcache ] && cp -r .devcache/. "$ICOFORGE_CACHE"/ && echo "carried cache: $(ls .devcache/gt4py-passes | wc -l) pass results"
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/tmp/gt4py-cache
left() { echo $(( END_S - ($(date +%s) - ICF_T0) )); }
LOG=$OUT/hip-on-cuda.log
VA=(verify-all --backend icoforge-hip-on-cuda --reference icoforge-cpu --grid "$GRID" --levels "$LEVELS" --seed 0 --jobs "$JOBS")

stamp "grid $GRID/$LEVELS" | tee -a $LOG
python3 -c "from icoforge.grids import load_grid; load_grid('$GRID', levels=$LEVELS, show_progress=False)" 2>&1 | tail -3 | tee -a $LOG

stamp "1. HIP source (vendor default) on the GPU vs icoforge-cpu, $JOBS workers, $(left) s left" | tee -a $LOG
timeout $(( $(left) - 10 )) python3 -m icoforge "${VA[@]}" --out $OUT/hip-on-cuda-verify.md 2>&1 \
  | grep -v '^|' | tee -a $LOG | tail -5
stamp "$(tail -1 $OUT/hip-on-cuda-verify.md 2>/dev/null | grep -o '.*passed.*' || echo 'no result')" | tee -a $LOG

if [ "$(left)" -ge "$MI300_S" ]; then
  stamp "2. HIP source, MI300-style schedule, $(left) s left" | tee -a $LOG
  timeout $(( $(left) - 10 )) python3 -m icoforge "${VA[@]}" --schedule "$MI300" --out $OUT/hip-on-cuda-verify-mi300.md 2>&1 \
    | grep -v '^|' | tee -a $LOG | tail -5
  stamp "$(grep -o '.* of .* passed.*' $OUT/hip-on-cuda-verify-mi300.md 2>/dev/null || echo 'no result')" | tee -a $LOG
else
  stamp "2. skipped: $(left) s left" | tee -a $LOG
fi

if grep -q "^78 of 78 passed (0 not run yet)" $OUT/hip-on-cuda-verify.md 2>/dev/null; then
  stamp "HIP on CUDA: 78 of 78" | tee -a $LOG; exit 0
fi
stamp "HIP on CUDA: NOT 78 of 78 (see $OUT/hip-on-cuda-verify.md)" | tee -a $LOG; exit 1
