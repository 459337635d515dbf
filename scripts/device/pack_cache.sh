#!/bin/bash
# Copy this machine's GT4Py-passes cache into .devcache/ (git-ignored) for a device run to carry:
# the passes are the slow part of compiling (minutes for the big programs) and their results do
# not depend on the machine. Fill the cache first by running the same programs here (same grid,
# same static scalars: e.g. the big four on R2B6 with seed 7, a greenline run with the same flags).
#   scripts/device/pack_cache.sh && run(carry=[".whl", ".devcache"], ...)
set -e
src="${ICOFORGE_CACHE:-$HOME/.cache/icoforge}/gt4py-passes"
[ -d "$src" ] || { echo "no passes cache at $src"; exit 1; }
rm -rf .devcache && mkdir -p .devcache/gt4py-passes
cp "$src"/*.pkl .devcache/gt4py-passes/
echo ".devcache: $(ls .devcache/gt4py-passes | wc -l) entries, $(du -sh .devcache | cut -f1)"
