"""Tuned kernel schedules shipped with the package: what `icoforge tune` found on a GPU, applied by
the default schedule where it was measured (issue 17, item 2).

The database (`tuned_schedules.json` beside this module) holds one entry per tuned kernel:

    {"kernel": "comp_adve_hori_mome_k0", "program": ..., "vendor": "cuda", "device": "NVIDIA H200",
     "dim_sizes": {"Cell": 327680, "Edge": 491520, ...}, "levels": 80, "fingerprint": "3f0c...",
     "schedule": {...}, "measured": "benchmarks/.../tune/....md: 199.8 -> 152.9 us",
     "static_values": {"end_index_of_damping_layer": "79"}}

(`static_values`, optional: the static scalars `icoforge tune --static-value` set, where the
variant tuned is not the suite's, e.g. the granule's.)

An entry applies to a kernel only where it was verified:
* the same vendor and GPU architecture (`arch`: "sm_90", "gfx942"; the main process reads the
  device's from CuPy when it makes the backend; compile workers see no GPU): an H200 tuning says
  nothing about an MI300, but holds on an H100 (both sm_90; REGIONAL/80 on an H100, session 39:
  the H200's entries took the step 15.979 -> 15.153 ms, bit-identical). The device's own entries
  come first, so where a kernel was tuned on this very device that entry wins; an entry without
  `arch` (older databases) holds on its device only. A schedule may name one device,
  `"tuned": "NVIDIA H200"`, to A/B that device's tuning alone;
* the kernel's code is the one tuned: `fingerprint` hashes the kernel IR (name, kind, levels,
  body, with the horizontal bounds left out), so a change of the lowering or of a static argument
  that changes the code drops the entry instead of applying a stale measurement (an entry carried
  over to new code by hand, without timing, says so in `measured`: four were, in session 15, for
  a change that reordered statements and merged branches but kept every load);
* the grid is of the same size class: every horizontal dimension the call's neighbour tables
  size is within a factor 2 of the tuned grid's (R2B6 entries do not apply to R2B5 or R2B7).
A kernel may have entries for several variants (size classes, levels, static values: R2B6/80,
R2B6/120 and REGIONAL/80 each tuned apart); the one of the call's size class whose fingerprint is
the kernel's applies (levels are in the fingerprint), and one decision per kernel says so or why not.
`levels` records what was tuned so that a new tune replaces only its own variant's entries
(icoforge/tune/database.py).
A schedule given by the user (`--schedule`, `$ICOFORGE_SCHEDULE`) gets no tuned entries unless it
says `"tuned": true` (`ProgramSchedule.use_tuned`); the entries never override a kernel's explicit
`per_kernel` schedule. Schedules do not change results:
the tuner checked each candidate bit for bit against the default before timing it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
from collections.abc import Mapping

from icoforge.backend.ir import ir
from icoforge.backend.schedule.schedule import ProgramSchedule, Schedule, ScheduleError

DATABASE = pathlib.Path(__file__).with_name("tuned_schedules.json")
SIZE_FACTOR = 2.0  # a dimension's size may differ this much from the tuned grid's


@dataclasses.dataclass(frozen=True)
class TunedKernel:
    kernel: str
    program: str
    vendor: str
    device: str
    dim_sizes: tuple[tuple[str, int], ...]
    fingerprint: str
    schedule: Schedule
    measured: str = ""
    # the static scalars the program was tuned with where they were not the suite's (`icoforge tune
    # --static-value`, e.g. a granule variant's): (NAME, text), to compute the fingerprint again
    static_values: tuple[tuple[str, str], ...] = ()
    levels: int | None = None  # the vertical levels tuned at (required in the database file)
    arch: str = ""  # the device's GPU architecture ("sm_90"); "": unknown, the device's name only

    @classmethod
    def from_json(cls, d: Mapping) -> "TunedKernel":
        keys = {f.name for f in dataclasses.fields(cls)}
        if missing := keys - {"measured", "static_values", "arch"} - set(d):
            raise ScheduleError(f"tuned schedule entry {d.get('kernel', '?')}: missing {sorted(missing)}")
        if unknown := set(d) - keys:
            raise ScheduleError(f"tuned schedule entry {d.get('kernel', '?')}: unknown keys {sorted(unknown)}")
        return cls(
            kernel=d["kernel"], program=d["program"], vendor=d["vendor"], device=d["device"],
            dim_sizes=tuple(sorted((str(k), int(v)) for k, v in d["dim_sizes"].items())),
            fingerprint=d["fingerprint"], schedule=Schedule.from_json(d["schedule"]), measured=d.get("measured", ""),
            static_values=tuple(sorted((str(k), str(v)) for k, v in d.get("static_values", {}).items())),
            levels=int(d["levels"]), arch=str(d.get("arch", "")),
        )  # fmt: skip

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["dim_sizes"] = dict(self.dim_sizes)
        d["schedule"] = self.schedule.to_json()
        d["static_values"] = dict(self.static_values)
        if not self.static_values:
            del d["static_values"]
        if not self.arch:
            del d["arch"]
        return d

    def fits(self, dim_sizes: Mapping[str, int]) -> bool:
        """Whether a call with these horizontal sizes is in the tuned grid's size class."""
        shared = [(n, dim_sizes[d]) for d, n in self.dim_sizes if d in dim_sizes]
        return bool(shared) and all(n / SIZE_FACTOR <= m <= n * SIZE_FACTOR for n, m in shared)


def kernel_fingerprint(kernel: ir.Kernel) -> str:
    """A hash of the kernel's code without its horizontal bounds (those are the size class's)."""
    d = kernel.domain
    text = str(dataclasses.replace(kernel, domain=dataclasses.replace(d, h_start=None, h_end=None)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load(path: pathlib.Path = DATABASE) -> tuple[TunedKernel, ...]:
    if not path.exists():
        return ()
    try:
        data = json.loads(path.read_text())
        return tuple(TunedKernel.from_json(e) for e in data["kernels"])
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # a broken file: say which, never guess
        raise ScheduleError(f"{path}: not a database of tuned schedules ({type(e).__name__}: {e})") from None


def for_device(vendor: str, device: str | None, entries: tuple[TunedKernel, ...] | None = None,
               arch: str | None = None) -> tuple[TunedKernel, ...]:
    """The entries measured on this vendor's `device`, then (with `arch`) those measured on other
    devices of the same architecture: `applied` takes the first that fits, so the device's own
    tuning wins where both exist. None for `device`: no device known, none apply."""
    if device is None:
        return ()
    entries = load() if entries is None else entries
    own = tuple(e for e in entries if e.vendor == vendor and e.device == device)
    siblings = tuple(e for e in entries if arch and e.vendor == vendor and e.device != device and e.arch == arch)
    return own + siblings


def for_schedule(vendor: str, this_device: str | None, use_tuned: bool | str,
                 entries: tuple[TunedKernel, ...] | None = None, arch: str | None = None) -> tuple[TunedKernel, ...]:
    """The entries a schedule's `"tuned"` asks for: true, this device's and its architecture's
    (`for_device`); a device's name, that device's alone (same vendor; an A/B of one GPU's
    tuning), refused with the names the database holds when it has none of that device."""
    if not use_tuned:
        return ()
    entries = load() if entries is None else entries
    if use_tuned is True:
        return for_device(vendor, this_device, entries, arch)
    found = for_device(vendor, use_tuned, entries)
    if not found:
        known = sorted({e.device for e in entries if e.vendor == vendor})
        raise ScheduleError(f"tuned: {use_tuned!r}: no {vendor} entries measured on that device; "
                            f"the database has: {', '.join(known) or 'none'}")
    return found


# What `applied` did with an entry in a program (`Decision.status`); NOT_FUSED: a fusion the
# schedule's column-count rule refused at the call's size (pipeline.fuse), logged the same way
APPLIED, CODE_CHANGED, OTHER_SIZES, NO_SUCH_KERNEL, NAMED_BY_SCHEDULE, NOT_FUSED = (
    "applied", "code changed", "size class", "no such kernel", "named by the schedule", "not fused",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Decision:
    """One tuned entry (or one refused fusion) in one compiled program: its status and, for the log, why."""

    kernel: str
    status: str  # APPLIED, CODE_CHANGED, OTHER_SIZES, NO_SUCH_KERNEL, NAMED_BY_SCHEDULE or NOT_FUSED
    why: str  # the log's words after the kernel's name

    def __str__(self) -> str:
        return f"{self.kernel}: {self.why}"


def applied(schedule: ProgramSchedule, program: ir.ProgramIR, dim_sizes: Mapping[str, int]) -> tuple[ProgramSchedule, tuple[Decision, ...]]:
    """`schedule` with its tuned entries that hold for `program`'s kernels (as scheduled: fused
    kernels have their own names) at these sizes made per-kernel schedules; and a decision per
    tuned kernel of this program: which entry applied, or why none did."""
    mine = [e for e in schedule.tuned if e.program == program.name]
    if not mine:
        return schedule, ()
    kernels = {k.name: k for k in program.kernels()}
    explicit = dict(schedule.per_kernel)
    out: list[Decision] = []
    for name in dict.fromkeys(e.kernel for e in mine):  # each tuned kernel once, in the database's order
        entries = [e for e in mine if e.kernel == name]
        k = kernels.get(name)
        if k is None:
            out.append(Decision(name, NO_SUCH_KERNEL, "not in the program as scheduled (fused or renamed): not applied"))
        elif name in explicit:
            out.append(Decision(name, NAMED_BY_SCHEDULE, "the schedule names it: not applied"))
        elif not (sized := [e for e in entries if e.fits(dim_sizes)]):
            tuned_on = " and ".join(dict.fromkeys(str(dict(e.dim_sizes)) for e in entries))
            out.append(Decision(name, OTHER_SIZES, f"tuned on {tuned_on}, this call has {dict(dim_sizes)}: not applied"))
        elif (hit := _same_code(sized, now := kernel_fingerprint(k))) is None:
            then = ", ".join(e.fingerprint for e in sized)
            why = f"its code changed since it was tuned (fingerprint {now}, tuned {then}): not applied"
            out.append(Decision(name, CODE_CHANGED, why))
        else:
            schedule = schedule.with_kernel(name, hit.schedule)
            out.append(Decision(name, APPLIED, f"tuned schedule applied ({hit.schedule.describe()}; tuned on {hit.device})"))
    return schedule, tuple(out)


def _same_code(entries: list[TunedKernel], fingerprint: str) -> TunedKernel | None:
    return next((e for e in entries if e.fingerprint == fingerprint), None)


def dim_sizes_of(offset_provider: Mapping) -> dict[str, int]:
    """Horizontal dimension sizes from a GT4Py offset provider: a neighbour table's rows are its
    source dimension's points."""
    sizes: dict[str, int] = {}
    for conn in offset_provider.values():
        domain = getattr(conn, "domain", None)
        shape = getattr(getattr(conn, "ndarray", None), "shape", None)
        if domain is None or not shape:
            continue
        sizes.setdefault(domain.dims[0].value, int(shape[0]))
    return sizes
