#!/bin/bash
# Copies what icon4py's dycore benchmark needs of icon4py 0.4.1's tests (../shared/icon4py-0.4.1-tests:
# the root pyproject.toml with icon4py's pytest settings, the LICENSE, the dycore tests) into
# .icon4py-tests/, git-ignored, for a device call to carry; with ALL=1 every package's tests. Never committed: they are icon4py's code.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=${ICON4PY_TESTS:-../shared/icon4py-0.4.1-tests}
rm -rf .icon4py-tests && mkdir -p .icon4py-tests/model/atmosphere/dycore
cp "$SRC/pyproject.toml" "$SRC/LICENSE" .icon4py-tests/
if [ "${ALL:-0}" = 1 ]; then  # every package's tests (run_icon4py_suite.sh: the stencil tests of six packages)
  cp -r "$SRC/model" .icon4py-tests/
else
  cp -r "$SRC/model/atmosphere/dycore/tests" .icon4py-tests/model/atmosphere/dycore/
fi
grep -qx '/.icon4py-tests/' .git/info/exclude 2>/dev/null || echo /.icon4py-tests/ >> .git/info/exclude
du -sh .icon4py-tests
