#!/bin/bash
# The id of the source tree a device call ran: a hash of the package's, the scripts' and the checks'
# source files (paths and contents; git-ignored run outputs such as ReFrame's stage/ left out),
# computed the same way on the device machine (whose copy has no .git) and here. Run it here before
# a call: the id the call prints (setup.sh, run_modes.sh's granule-latest.json) must match, else the
# copy held other files than the commit (e.g. a helper's uncommitted work, as in session 23).
#     bash scripts/device/tree_id.sh        # -> 12 hex digits
cd "$(dirname "$0")/../.." || exit 1
find icoforge scripts hpc pyproject.toml -type f \
    \( -name '*.py' -o -name '*.json' -o -name '*.sh' -o -name '*.toml' \) \
    ! -path '*__pycache__*' ! -path '*/stage/*' ! -path '*/output/*' ! -path '*/perflogs/*' \
    ! -path '*/.icoforge-cache/*' ! -path '*/.gt4py_cache/*' -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12
