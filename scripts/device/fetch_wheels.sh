#!/usr/bin/env bash
# Recreate .whl/ (git-ignored) with the wheels listed in scripts/device/wheels.txt,
# for the offline GPU machine: CPython 3.12, manylinux x86_64, no dependencies resolved.
# Run here (with internet), from anywhere:  scripts/device/fetch_wheels.sh
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"
pip=${PIP:-.venv/bin/pip}
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
mkdir -p .whl
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux1_x86_64)
reqs=$(grep -Ev '^\s*(#|$)' scripts/device/wheels.txt)
# dace 2.0.0a6 is an sdist on PyPI: build a pure-Python wheel of it here, then drop
# dace/viewer/webclient/ (~4 MiB of JavaScript for the SDFG viewer, never used on the
# device) from the wheel and its RECORD, to keep what travels small.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
grep '^dace==' <<<"$reqs" | xargs -r "$pip" wheel -q --no-deps -w "$tmp"
for w in "$tmp"/dace-*.whl; do
    "$root/.venv/bin/python" - "$w" ".whl/$(basename "$w")" <<'PY'
import sys, zipfile
src, dst = sys.argv[1:]
drop = lambda n: n.startswith("dace/viewer/webclient/")
with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zo:
    for info in zi.infolist():
        if drop(info.filename):
            continue
        data = zi.read(info)
        if info.filename.endswith(".dist-info/RECORD"):
            data = b"".join(l for l in data.splitlines(True) if not drop(l.decode()))
        zo.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
PY
done
# Everything else: binary wheels only, for the device's Python and platform.
grep -v '^dace==' <<<"$reqs" | xargs "$pip" download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp "${plat[@]}" -d .whl
# MPICH (13 MB of the 64 MiB a call carries) only for run_ranks.sh on an image without an MPI: a
# folder of its own, carried by those calls alone (the images so far have Open MPI)
grep -qx '/.whl-mpich/' .git/info/exclude || echo /.whl-mpich/ >> .git/info/exclude
mkdir -p .whl-mpich && mv -f .whl/mpich-*.whl .whl-mpich/
ls -1 .whl .whl-mpich | sort
du -sh .whl .whl-mpich
