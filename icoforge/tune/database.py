"""Add what `icoforge tune` found to the package's database of tuned schedules
(icoforge/backend/schedule/tuned_schedules.json; how entries apply: icoforge/backend/schedule/tuned.py).

    python -m icoforge.tune.database TUNE.json [TUNE.json ...] --measured "benchmarks/.../tune"

TUNE.json is `icoforge tune --json` output from a GPU (not the emulation). A kernel enters the
database when the tuner picked a candidate other than the default for it and the picks together
were faster than the default as a whole call (`kept_default` false). A program's tune replaces
the entries of the variant it tuned (device, size class, levels, static values), also where it
now keeps the default: the newest tune of a variant is what holds, and the entries of the
program's other variants (REGIONAL/80 beside R2B6/80 and R2B6/120) stay. `--fingerprints FILE` gives
the kernels' fingerprints where the tuner's JSON lacks them (tunes from before the tuner
recorded them): {program: {kernel: fingerprint}}, computed with the code that was tuned.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
from collections.abc import Mapping
from typing import Any

from icoforge.backend.schedule import tuned
from icoforge.errors import IcoforgeError


@dataclasses.dataclass(frozen=True)
class Variant:
    """What one program tune measured: the entries it replaces are this variant's."""

    program: str
    vendor: str
    device: str
    levels: int
    static_values: tuple[tuple[str, str], ...]
    dim_sizes: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, result: Mapping[str, Any]) -> "Variant":
        if not result.get("dim_sizes"):
            raise IcoforgeError(f"{result['program']}: the tune result has no dim_sizes (pass a newer tune JSON)")
        statics = tuple(sorted((str(k), str(v)) for k, v in (result.get("static_values") or {}).items()))
        sizes = tuple(sorted((str(k), int(v)) for k, v in result["dim_sizes"].items()))
        return cls(result["program"], result["vendor"], result["device"], int(result["levels"]), statics, sizes)

    def holds(self, e: tuned.TunedKernel) -> bool:
        same = (e.program, e.vendor, e.device, e.levels, e.static_values)
        return same == (self.program, self.vendor, self.device, self.levels, self.static_values) and e.fits(dict(self.dim_sizes))


def entries(result: Mapping[str, Any], measured: str, fingerprints: Mapping[str, str] | None = None) -> list[tuned.TunedKernel]:
    """The database entries of one program's tune result."""
    if result.get("emulated"):
        raise IcoforgeError(f"{result['program']}: tuned on the CPU emulation; its times mean nothing")
    if result.get("kept_default"):
        return []
    prints = dict(result.get("fingerprints") or fingerprints or {})
    variant = Variant.of(result)  # no dim_sizes: an error
    out = []
    for p in result["picks"]:
        if p["best"] == "default":
            continue
        if p["kernel"] not in prints:
            raise IcoforgeError(f"{p['kernel']}: no fingerprint (the tune JSON lacks them: pass --fingerprints)")
        out.append(tuned.TunedKernel.from_json({
            "kernel": p["kernel"], "program": result["program"], "vendor": result["vendor"], "device": result["device"],
            "dim_sizes": dict(variant.dim_sizes), "fingerprint": prints[p["kernel"]], "schedule": p["schedule"],
            "static_values": dict(variant.static_values), "levels": variant.levels, "arch": result.get("arch", ""),
            "measured": f"{measured}: {result['grid']}/{result['levels']}, {p['best']}, "
                        f"{p['default_s'] * 1e6:.1f} -> {p['best_s'] * 1e6:.1f} us; whole call "
                        f"{result['default_whole_s'] * 1e6:.1f} -> {result['tuned_whole_s'] * 1e6:.1f} us",
        }))  # fmt: skip
    return out


def merged(old: list[tuned.TunedKernel], new: list[tuned.TunedKernel], tuned_variants: set[Variant]) -> list[tuned.TunedKernel]:
    """`old` without the entries of the variants tuned anew, plus `new`."""
    kept = [e for e in old if not any(v.holds(e) for v in tuned_variants)]
    return sorted(kept + new, key=lambda e: (e.vendor, e.device, e.program, e.kernel, e.levels or 0, e.dim_sizes))


def write(kernels: list[tuned.TunedKernel], path: pathlib.Path = tuned.DATABASE) -> None:
    doc = {
        "about": "tuned kernel schedules applied by the default schedule where they hold (icoforge/backend/schedule/tuned.py); "
                 "add with `python -m icoforge.tune.database`",
        "kernels": [e.to_json() for e in kernels],
    }  # fmt: skip
    path.write_text(json.dumps(doc, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tune_json", nargs="+", help="`icoforge tune --json` output from a GPU")
    p.add_argument("--measured", required=True, help="where the measurement is recorded (a benchmarks/ path)")
    p.add_argument("--fingerprints", help="JSON {program: {kernel: fingerprint}} for tune results without them")
    p.add_argument("--database", default=str(tuned.DATABASE), help="database file (default: the package's)")
    args = p.parse_args(argv)
    prints = json.loads(pathlib.Path(args.fingerprints).read_text()) if args.fingerprints else {}
    new: list[tuned.TunedKernel] = []
    variants: set[Variant] = set()
    for f in args.tune_json:
        for result in json.loads(pathlib.Path(f).read_text())["results"]:
            new += entries(result, args.measured, prints.get(result["program"]))
            variants.add(Variant.of(result))
    path = pathlib.Path(args.database)
    old = list(tuned.load(path))
    kept = merged(old, new, variants)
    dropped = len(old) + len(new) - len(kept)
    write(kept, path)
    print(f"{path}: {len(new)} kernel schedule(s) from {len(variants)} program tune(s); "
          f"{dropped} older entries of those variants replaced or dropped; {len(kept)} in all")


if __name__ == "__main__":
    main()
