"""Schedules: how a kernel runs, as plain data (the algorithm is the GT4Py program).

A `Schedule` never changes what a kernel computes, only how the work is laid out on the GPU.
`ProgramSchedule` holds a default plus per-program and per-kernel overrides (by short kernel name).
Knobs that do not apply to a kernel (levels per thread of a scan, points per thread of a purely
vertical kernel, ...) are ignored for it; the comment line above each generated kernel states
the schedule it really got.

Checks come in two steps: `Schedule.validate()` needs nothing but the schedule (block shape,
ranges); `check_kernel()` / `resolve()` need the kernel IR and the vendor (shared memory of the
staged neighbour tables against the device limit, tables the kernel does not read by its own
row, register budget of a block). Both raise `ScheduleError` before any code is compiled.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from icoforge.backend.ir import ir
from icoforge.backend.ir.dtypes import ITEMSIZE
from icoforge.backend.passes.sweeps import COLUMNS_PER_BLOCK
from icoforge.backend.passes.inline import POLICIES as INLINE_POLICIES
from icoforge.errors import IcoforgeError, UnknownNameError

MAX_THREADS_PER_BLOCK = 1024
INDEX_BITS = (32, 64, "auto")  # "auto": 32-bit kernels, and 64-bit twins for calls that need them
# Static shared memory per block: CUDA caps it at 48 KiB (more needs dynamic shared memory and an
# opt-in attribute); AMD's LDS is 64 KiB per work-group.
SMEM_LIMIT_BYTES = {"cuda": 48 * 1024, "hip": 64 * 1024}
REGISTERS_PER_SM = {"cuda": 65536}  # 32-bit registers per SM (every NVIDIA GPU since Kepler)
VGPRS_PER_LANE_AMD = 512  # CDNA2/3 (gfx90a, gfx942): unified VGPR+AGPR file per SIMD lane
MAX_WAVES_PER_EU_AMD = 8
ALL_TABLES = "*"  # smem_tables = ("*",): every table the kernel reads by its own row
ALL_PROGRAMS = "*"  # fuse = ("*",): every program


class ScheduleError(IcoforgeError):
    pass


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


@dataclass(frozen=True)
class Schedule:
    block: tuple[int, int] = (128, 1)  # threads along (horizontal, vertical)
    k_per_thread: int = 1  # "kloop": consecutive levels computed by one thread (maps)
    k_unroll: int = 1  # unroll factor of the level loop (kloop chunk, or a scan's column)
    h_per_thread: int = 1  # horizontal points per thread, strided by the grid's x threads
    smem_tables: tuple[str, ...] = ()  # neighbour tables staged in shared memory ("*": all)
    max_registers: int | None = None  # register cap per thread (CUDA __maxnreg__, HIP waves/EU)
    min_blocks_per_sm: int | None = None  # CUDA: __launch_bounds__(threads, N); HIP: waves/EU
    index_bits: int | str = 64  # index arithmetic: 32 (int), 64 (long long), or "auto" (32 where the call fits)
    chiplet_remap: bool = False  # consecutive blocks on one chiplet (XCD) of MI300
    chiplets: int = 8  # chiplets the hardware deals blocks to round-robin (MI300A/X: 8)
    # kernel arguments: one set of strides per group of arrays of the same dims and dtype (or
    # temporaries of one range), the contiguous stride 1 left out, instead of every stride of
    # every array (codegen/cuda.py `stride_sets`). Fewer arguments: AMD loads them all into SGPRs
    # (rho_theta k7: 71 -> 40 arguments, SGPR spills 40/36 -> 0 on gfx90a/gfx942); on sm_90 nvcc
    # kept more registers (41 kernels). A call whose fields are laid out otherwise runs the
    # program's per-field-strides variant, built at the first such call (gpu.bind_program).
    stride_sets: bool = False

    def __post_init__(self) -> None:
        # accept lists (JSON, CLI) for the tuple fields; keep the dataclass hashable
        object.__setattr__(self, "block", tuple(self.block))
        if isinstance(self.smem_tables, str):
            object.__setattr__(self, "smem_tables", (self.smem_tables,) if self.smem_tables else ())
        object.__setattr__(self, "smem_tables", tuple(self.smem_tables))

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1]

    def validate(self, where: str = "schedule") -> "Schedule":
        """Checks that need nothing but the schedule. Returns self."""
        if len(self.block) != 2 or not all(isinstance(b, int) for b in self.block):
            raise ScheduleError(f"{where}: block must be two integers (x, y), got {self.block}")
        bx, by = self.block
        if bx < 1 or by < 1:
            raise ScheduleError(f"{where}: block {bx}x{by} must be positive")
        if bx * by > MAX_THREADS_PER_BLOCK:
            raise ScheduleError(f"{where}: block {bx}x{by} = {bx * by} threads exceeds {MAX_THREADS_PER_BLOCK}")
        for name in ("k_per_thread", "k_unroll", "h_per_thread", "chiplets"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ScheduleError(f"{where}: {name} must be an integer >= 1, got {v!r}")
        if self.index_bits not in INDEX_BITS:
            raise ScheduleError(f"{where}: index_bits must be 32, 64 or 'auto', got {self.index_bits!r}")
        if self.max_registers is not None and not 16 <= self.max_registers <= 255:
            raise ScheduleError(f"{where}: max_registers must be in [16, 255], got {self.max_registers}")
        if self.min_blocks_per_sm is not None and self.min_blocks_per_sm < 1:
            raise ScheduleError(f"{where}: min_blocks_per_sm must be >= 1, got {self.min_blocks_per_sm}")
        for name in ("chiplet_remap", "stride_sets"):
            if not isinstance(getattr(self, name), bool):
                raise ScheduleError(f"{where}: {name} must be true or false, got {getattr(self, name)!r}")
        for t in self.smem_tables:
            if not isinstance(t, str) or not (t == ALL_TABLES or re.fullmatch(r"\w+", t)):
                raise ScheduleError(f"{where}: smem_tables entries are table names or '*', got {t!r}")
        if ALL_TABLES in self.smem_tables and len(self.smem_tables) > 1:
            raise ScheduleError(f"{where}: smem_tables '*' already names every table; got {self.smem_tables}")
        if len(set(self.smem_tables)) != len(self.smem_tables):
            raise ScheduleError(f"{where}: smem_tables names a table twice: {self.smem_tables}")
        return self

    def replace(self, **changes: Any) -> "Schedule":
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["block"] = list(self.block)
        d["smem_tables"] = list(self.smem_tables)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Schedule":
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ScheduleError(f"unknown schedule parameters {sorted(unknown)}; known: {field_names()}")
        return cls(**d).validate()

    def with_settings(self, settings: Iterable[str]) -> "Schedule":
        """Apply `NAME=VALUE` strings (the CLI's --set): `block=256,1`, `smem_tables=C2E,E2C`."""
        changes: dict[str, Any] = {}
        for s in settings:
            name, sep, value = s.partition("=")
            name = name.strip()
            if not sep:
                raise ScheduleError(f"schedule setting {s!r}: expected NAME=VALUE")
            changes[name] = parse_value(name, value.strip())
        return self.replace(**changes).validate()

    def describe(self) -> str:
        parts = [f"block {self.block[0]}x{self.block[1]}", f"k_per_thread {self.k_per_thread}",
                 f"k_unroll {self.k_unroll}", f"h_per_thread {self.h_per_thread}",
                 f"smem_tables {','.join(self.smem_tables) or '-'}", f"index_bits {self.index_bits}"]  # fmt: skip
        if self.max_registers is not None:
            parts.append(f"max_registers {self.max_registers}")
        if self.min_blocks_per_sm is not None:
            parts.append(f"min_blocks_per_sm {self.min_blocks_per_sm}")
        parts.append(f"chiplet_remap {self.chiplets if self.chiplet_remap else 'off'}")
        if self.stride_sets:  # said only when on: the comment line of a kernel without is as before the knob
            parts.append("stride_sets on")
        return ", ".join(parts)


def field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(Schedule)]


def parse_value(name: str, value: str) -> Any:
    """A CLI value for schedule field `name`."""
    if name not in field_names():
        raise UnknownNameError("schedule parameter", name, field_names())
    try:
        if name == "block":
            parts = [int(x) for x in re.split(r"[,x]", value) if x]
            if len(parts) == 1:
                parts.append(1)
            return tuple(parts)
        if name == "smem_tables":
            return tuple(x for x in value.split(",") if x and x != "-")
        if name in ("max_registers", "min_blocks_per_sm"):
            return None if value.lower() in ("", "none", "-") else int(value)
        if name == "index_bits" and value.lower() == "auto":
            return "auto"
        if name in ("chiplet_remap", "stride_sets"):
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        return int(value)
    except ValueError:
        raise ScheduleError(f"schedule parameter {name}: cannot read {value!r}") from None


@dataclass(frozen=True)
class ProgramSchedule:
    """Schedules of a program's kernels (or of every program a backend compiles).

    Lookup order for a kernel: `per_kernel[name]`, then `per_program[program]`, then `default`.
    Kernel names are unique across programs (program-name prefix), so one ProgramSchedule can
    carry overrides for several programs. `smem_limit_bytes` (None: the vendor's static limit)
    is the device's shared memory per block that staged tables may use.
    """

    default: Schedule = Schedule()
    per_kernel: tuple[tuple[str, Schedule], ...] = field(default=())
    per_program: tuple[tuple[str, Schedule], ...] = field(default=())
    smem_limit_bytes: int | None = None
    # programs whose neighbouring kernels are fused (icoforge.backend.passes.fuse: maps over one domain, a
    # map into the scan before it); "*": every program. Per-kernel entries then name the fused
    # kernels (`..._k3to5`).
    fuse: tuple[str, ...] = ()
    # with `fuse`: a map that reads another map's outputs in its own column one level up or down
    # runs with it as one column walk (a thread per column, values in registers; fuse.py)
    fuse_columns: bool = False
    # with `fuse`: a map joins a scan (or becomes a column walk) only where the call's grid has at
    # least this many columns (0: at any size). Those fusions run the map's levels one after the
    # other in one thread per column, so a grid with fewer columns than the GPU holds threads
    # leaves it underfilled (fuse.py; the default's value: VENDOR_SCAN_MIN_COLUMNS)
    fuse_scan_min_columns: int = 0
    # programs whose scans hand values to the scan after them, one launch walking both per column,
    # those values in shared memory (the solvers' sweeps; passes/sweeps.py); "*": all; not `fuse`'s
    fuse_sweeps: tuple[str, ...] = ()
    # floating-point contraction (a*b + c as one fused multiply-add, CUDA's --fmad=true, HIP's
    # -ffp-contract=fast), as nvcc's and DaCe's builds do by default. Off by default: without it
    # the GPU code agrees with the CPU target and gtfn_cpu to the last bit on most programs; on it
    # results differ by rounding (the solvers up to ~2e-6 relative on random inputs, gpu.py), so a
    # timing A/B only: a run with it on is not verified bit for bit (the CPU emulator keeps rounding
    # as written)
    fp_contract: bool = False
    # temporaries recomputed in their readers (icoforge.backend.passes.inline, every target): "auto" (where
    # the byte model says it moves fewer bytes), "all" (wherever legal) or "off"
    inline: str = "auto"
    # tuned kernel schedules from the package's database (icoforge.backend.schedule.tuned.TunedKernel): the
    # default schedule of a backend on a known device carries them, and a given schedule with
    # `use_tuned` ("tuned": true in JSON: an A/B that changes one thing against the default keeps
    # them; "tuned": "NVIDIA H200", a device's name: the entries measured on that device of the same
    # vendor, an A/B of a sibling GPU's tuning, e.g. on an H100); each applies where its kernel's
    # code, device and size class match (`tuned.applied`). The entries are not part of the JSON
    # form, the flag is.
    tuned: tuple[Any, ...] = ()
    use_tuned: bool | str = False

    def __post_init__(self) -> None:
        if self.inline not in INLINE_POLICIES:
            raise ScheduleError(f"inline: one of {', '.join(INLINE_POLICIES)}, got {self.inline!r}")
        for name in ("per_kernel", "per_program"):
            v = getattr(self, name)
            object.__setattr__(self, name, tuple(sorted((v.items() if isinstance(v, dict) else v))))
        fuse = (self.fuse,) if isinstance(self.fuse, str) else self.fuse
        if not isinstance(fuse, (list, tuple)) or not all(isinstance(p, str) and p for p in fuse):
            raise ScheduleError(f"fuse: a list of program names (or \"*\"), got {self.fuse!r}")
        object.__setattr__(self, "fuse", tuple(sorted(set(fuse))))
        sweeps = (self.fuse_sweeps,) if isinstance(self.fuse_sweeps, str) else self.fuse_sweeps
        if not isinstance(sweeps, (list, tuple)) or not all(isinstance(p, str) and p for p in sweeps):
            raise ScheduleError(f"fuse_sweeps: a list of program names (or \"*\"), got {self.fuse_sweeps!r}")
        object.__setattr__(self, "fuse_sweeps", tuple(sorted(set(sweeps))))
        if not isinstance(self.fuse_columns, bool):
            raise ScheduleError(f"fuse_columns: true or false, got {self.fuse_columns!r}")
        if not isinstance(self.fp_contract, bool):
            raise ScheduleError(f"fp_contract: true or false, got {self.fp_contract!r}")
        n = self.fuse_scan_min_columns
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ScheduleError(f"fuse_scan_min_columns: a column count >= 0 (0: any size), got {n!r}")
        if not isinstance(self.use_tuned, bool) and not (isinstance(self.use_tuned, str) and self.use_tuned.strip()):
            raise ScheduleError(f"tuned: true, false or a device's name (\"NVIDIA H200\"), got {self.use_tuned!r}")

    def fuses(self, program: str) -> bool:
        return ALL_PROGRAMS in self.fuse or program in self.fuse

    def fuses_sweeps(self, program: str) -> bool:
        return ALL_PROGRAMS in self.fuse_sweeps or program in self.fuse_sweeps

    def for_kernel(self, name: str, program: str | None = None) -> Schedule:
        found = dict(self.per_kernel).get(name)
        if found is None and program is not None:
            found = dict(self.per_program).get(program)
        return found if found is not None else self.default

    def with_kernel(self, name: str, schedule: Schedule) -> "ProgramSchedule":
        return dataclasses.replace(self, per_kernel={**dict(self.per_kernel), name: schedule})

    def with_program(self, name: str, schedule: Schedule) -> "ProgramSchedule":
        return dataclasses.replace(self, per_program={**dict(self.per_program), name: schedule})

    def smem_limit(self, vendor: str) -> int:
        return self.smem_limit_bytes if self.smem_limit_bytes is not None else SMEM_LIMIT_BYTES[vendor]

    def to_json(self) -> dict:
        d: dict[str, Any] = {"default": self.default.to_json()}
        if self.per_kernel:
            d["per_kernel"] = {k: s.to_json() for k, s in self.per_kernel}
        if self.per_program:
            d["per_program"] = {k: s.to_json() for k, s in self.per_program}
        if self.smem_limit_bytes is not None:
            d["smem_limit_bytes"] = self.smem_limit_bytes
        if self.fuse:
            d["fuse"] = list(self.fuse)
        if self.fuse_columns:
            d["fuse_columns"] = True
        if self.fuse_scan_min_columns:
            d["fuse_scan_min_columns"] = self.fuse_scan_min_columns
        if self.fuse_sweeps:
            d["fuse_sweeps"] = list(self.fuse_sweeps)
        if self.fp_contract:
            d["fp_contract"] = True
        if self.inline != "auto":
            d["inline"] = self.inline
        if self.use_tuned:
            d["tuned"] = self.use_tuned
        return d

    @classmethod
    def from_json(cls, d: dict) -> "ProgramSchedule":
        keys = ("default", "per_kernel", "per_program", "smem_limit_bytes", "fuse", "fuse_columns", "fuse_scan_min_columns",
                "fuse_sweeps", "fp_contract", "inline", "tuned")
        if unknown := set(d) - set(keys):
            raise ScheduleError(f"unknown program-schedule keys {sorted(unknown)}; valid: {', '.join(keys)}")
        return cls(
            default=Schedule.from_json(d.get("default", {})),
            per_kernel={k: Schedule.from_json(s) for k, s in d.get("per_kernel", {}).items()},
            per_program={k: Schedule.from_json(s) for k, s in d.get("per_program", {}).items()},
            smem_limit_bytes=d.get("smem_limit_bytes"),
            fuse=d.get("fuse", ()),
            fuse_columns=d.get("fuse_columns", False),
            fuse_scan_min_columns=d.get("fuse_scan_min_columns", 0),
            fuse_sweeps=d.get("fuse_sweeps", ()),
            fp_contract=d.get("fp_contract", False),
            inline=d.get("inline", "auto"),
            use_tuned=d.get("tuned", False),
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def loads(cls, text: str) -> "ProgramSchedule":
        return cls.from_json(json.loads(text))

    def key(self) -> str:
        return self.dumps()


def schedule_from_text(text: str, vendor: str, where: str = "schedule") -> ProgramSchedule:
    """A ProgramSchedule from JSON or the path of a JSON file (what `--schedule` and
    `$ICOFORGE_SCHEDULE` hold); "" is the vendor default. A JSON without "default" keeps the
    vendor default for unlisted kernels. Errors name `where`."""
    text = text.strip()
    if not text:
        return default_program_schedule(vendor)
    if not text.startswith("{"):
        try:
            text = open(text).read()
        except OSError as e:
            raise ScheduleError(f"{where}: neither JSON nor a readable file ({e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ScheduleError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ScheduleError(f"{where}: a JSON object is needed, got {type(data).__name__}")
    data.setdefault("default", VENDOR_DEFAULTS[vendor].to_json())
    try:
        return ProgramSchedule.from_json(data)
    except (TypeError, ValueError, AttributeError) as e:  # e.g. "default": 5
        raise ScheduleError(f"{where}: not a schedule ({e})") from None


VENDOR_DEFAULTS = {
    # 32x8 (levels on y for 2-D maps; 256 threads along x for scans and horizontal-only kernels)
    # with 32-bit index arithmetic wherever the call's fields fit ("auto": a 64-bit twin of every
    # kernel is launched instead when they do not, so a huge grid never gets a wrong index).
    # The sweeps' best schedule of all four big programs (benchmarks/h200/2026-11-30-s4: 1.05-1.16x
    # against 32x4 with 64-bit indices); the whole dycore step on R2B6/80: 93.3 -> 89.7 ms
    # (1.04x, benchmarks/h200/2026-12-01-s9). 32x4 beat the older 128x1 by 1.12-1.29x (-s2, -s3).
    "cuda": Schedule(block=(32, 8), index_bits="auto"),
    # 256x1 beat 32x8 on MI300A in icon4py's AMD work. Stride sets on: without them the big
    # gather kernels spilt SGPRs into VGPR lanes (rho_theta k7: 40 on gfx90a, 36 on gfx942; with
    # them 0, benchmarks/amd-resources-gfx90a-gfx942.md); not timed on an AMD GPU. CUDA keeps
    # per-field strides: with stride sets 41 kernels took more registers on sm_90 (e.g.
    # comp_adve_hori_mome_k2_w 45 -> 72), untimed on a GPU.
    "hip": Schedule(block=(256, 1), stride_sets=True),
}

# Programs fused by the default schedule (no --schedule; a schedule given as JSON fuses only what
# it names). CUDA: the perturbed quantities, 8 -> 2 kernels, 1.62 -> 1.39 and 1.66 -> 1.42 ms
# per call on R2B6/80 in two H200 runs (benchmarks/h200/2026-12-02-s13, -s14), dace_gpu 1.44;
# the predictor's vertically implicit solver, 8 -> 4 kernels, 3.017 -> 2.890 (-s13, with every
# program fused) and 3.017 -> 2.858 ms per call (-s17, alone; bit-identical); the corrector's
# solver was 5 % slower fused (-s13), the other programs within the noise. HIP: nothing measured.
VENDOR_FUSE: dict[str, tuple[str, ...]] = {
    "cuda": ("compute_perturbed_quantities_and_interpolation", "vertically_implicit_solver_at_predictor_step"),
    "hip": (),
}

# The default's fuse_scan_min_columns. The predictor solver fused runs its largest map inside the
# backward sweep, one thread per column. On REGIONAL/80 (44,640 columns) the step was 1.3 % faster
# with the predictor not fused at all (benchmarks/h200/2026-12-04-s25, one run, bit-identical); the
# corrector fused the same way lost 17 % per call there and 5 % on R2B6/120 (-s23). On R2B6/80
# (327,680 columns) the predictor's fusion saved 0.79 ms per step (-s17). Below the threshold the
# default keeps the predictor's map fusions (k0to1, k2to5: a thread per point still) and refuses
# only the walk (k7to9). Timed once in that form (-s26): its middle and last substeps equal the walk
# fused, the predictor unfused 2 % faster than both; not decided (its profile ran in a slow machine
# state, its first substep +6 %). The threshold is about the H200's
# resident threads (132 SMs x 2,048 = 270,336): grids between 44,640 and 327,680 columns are not
# measured. HIP: nothing fused by default.
VENDOR_SCAN_MIN_COLUMNS: dict[str, int] = {"cuda": 262_144, "hip": 0}


def default_program_schedule(vendor: str) -> "ProgramSchedule":
    """The schedule a program gets when none is given: the vendor's block shape and fusions."""
    if vendor not in VENDOR_DEFAULTS:
        raise ScheduleError(f"unknown GPU vendor {vendor!r}: {' or '.join(VENDOR_DEFAULTS)}")
    return ProgramSchedule(default=VENDOR_DEFAULTS[vendor], fuse=VENDOR_FUSE[vendor], fuse_scan_min_columns=VENDOR_SCAN_MIN_COLUMNS[vendor])


# ---------------------------------------------------------------------------------------------
# What a schedule means for one kernel


def own_row_tables(kernel: ir.Kernel) -> tuple[str, ...]:
    """Tables the kernel reads at its own horizontal point (`E2C[i, c]`): the ones a block can
    stage in shared memory (lookups through another table's entries cannot be)."""
    return tuple(dict.fromkeys(e.table for e in kernel.exprs() if isinstance(e, ir.Table) and isinstance(e.row, ir.HIndex)))


@dataclass(frozen=True)
class KernelLaunch:
    """The effective schedule of one kernel: what the code generator and host plan use."""

    schedule: Schedule  # as given
    kind: str  # "map2d" (horizontal x levels), "vmap" (levels only), "hmap" (no levels), "scan", "single"
    block: tuple[int, int]  # threads actually launched per block (x, y)
    k_per_thread: int  # 1 where not applicable
    k_unroll: int  # 1 where not applicable
    h_per_thread: int  # 1 where not applicable
    smem: tuple[tuple[str, int, int], ...]  # (table, columns, bytes per entry) staged in shared memory
    column_bytes: int = 0  # a sweep-fused kernel's on-chip values per column (passes/sweeps.py)

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1]

    @property
    def smem_bytes(self) -> int:
        bx = self.block[0]
        return sum(self.h_per_thread * bx * cols * size for _, cols, size in self.smem) + bx * self.column_bytes

    def describe(self) -> str:
        s = self.schedule
        eff = dataclasses.replace(
            s, block=self.block, k_per_thread=self.k_per_thread, k_unroll=self.k_unroll,
            h_per_thread=self.h_per_thread, smem_tables=tuple(t for t, _, _ in self.smem),
        )  # fmt: skip
        text = eff.describe()
        if self.smem or self.column_bytes:
            text += f" ({self.smem_bytes} B shared)"
        return text


def kernel_kind(kernel: ir.Kernel) -> str:
    has_h, has_k = kernel.domain.hdim is not None, kernel.domain.k_start is not None
    if kernel.is_scan:
        return "scan" if has_h else "single"
    if has_h and has_k:
        return "map2d"
    if has_k:
        return "vmap"
    return "hmap" if has_h else "single"


def _sweep_fit(kernel: ir.Kernel, block: tuple[int, int], hpt: int, limit: int, vendor: str) -> tuple[tuple[int, int], int]:
    """(block, h_per_thread): a sweep-fused kernel walks a column per thread, as many per block as
    their on-chip values fit in `limit` bytes (whole warps: the sweep pass made sure one does)."""
    if not (column_bytes := kernel.column_bytes()):
        return block, hpt
    warp = COLUMNS_PER_BLOCK[vendor]
    return (min(block[0], max(warp, (limit // column_bytes) // warp * warp)), 1), 1


def check_kernel(
    kernel: ir.Kernel, program: ir.ProgramIR, s: Schedule, vendor: str, smem_limit: int | None = None, *, strict_tables: bool = True
) -> KernelLaunch:
    """The effective launch of `kernel` under `s` for `vendor`, or ScheduleError.

    strict_tables: every table in `s.smem_tables` must be one the kernel reads by its own row
    (a per-kernel schedule); otherwise (a program default) tables the kernel lacks are skipped.
    """
    where = f"schedule of {kernel.name}"
    s.validate(where)
    if vendor not in SMEM_LIMIT_BYTES:
        raise ScheduleError(f"unknown GPU vendor {vendor!r}: cuda or hip")
    kind = kernel_kind(kernel)
    bx, by = s.block
    has_h = kind in ("map2d", "hmap", "scan")
    # levels on y only for 2-D maps; other kernels keep the block's thread count along x (a
    # 32x4 block must not leave a scan 32 threads per block)
    block = (bx, by) if kind == "map2d" else (bx * by, 1)
    if kind == "single":
        block = (1, 1)
    kpt = s.k_per_thread if kind in ("map2d", "vmap") else 1
    if kind in ("map2d", "vmap"):
        unroll = s.k_unroll if kpt > 1 else 1  # a chunk of one level has nothing to unroll
    else:  # a scan walks its column; a kernel without levels has no level loop
        unroll = s.k_unroll if kernel.is_scan and kernel.domain.k_start is not None else 1
    block, hpt = _sweep_fit(kernel, block, s.h_per_thread if has_h else 1, smem_limit if smem_limit is not None else SMEM_LIMIT_BYTES[vendor], vendor)
    own = own_row_tables(kernel) if has_h else ()
    if ALL_TABLES in s.smem_tables:
        staged = own
    else:
        staged = []
        for t in s.smem_tables:
            if t in own:
                staged.append(t)
            elif strict_tables:
                used = kernel.tables_used()
                why = (
                    "reads it only through another table's entries (rows not its own points)"
                    if t in used else f"does not use it (tables read by own row: {', '.join(own) or 'none'})"
                )  # fmt: skip
                raise ScheduleError(f"{where}: smem_tables names {t!r}, but the kernel {why}")
        staged = tuple(staged)
    infos = {t.name: t for t in program.tables}
    smem = tuple((t, infos[t].max_neighbors, ITEMSIZE[infos[t].dtype]) for t in staged)
    launch = KernelLaunch(s, kind, block, kpt, unroll, hpt, smem, kernel.column_bytes())

    limit = smem_limit if smem_limit is not None else SMEM_LIMIT_BYTES[vendor]
    if vendor == "cuda" and limit > SMEM_LIMIT_BYTES["cuda"]:
        raise ScheduleError(
            f"{where}: shared memory limit {limit} B: CUDA static shared memory is at most "
            f"{SMEM_LIMIT_BYTES['cuda']} B per block (dynamic shared memory is not implemented)"
        )
    if launch.smem_bytes > limit:
        detail = " + ".join([*(f"{t}: {hpt}x{block[0]} rows x {c} x {b} B" for t, c, b in smem), *([f"on-chip values: {block[0]} columns x {launch.column_bytes} B"] if launch.column_bytes else [])])  # fmt: skip
        raise ScheduleError(
            f"{where}: staged tables need {launch.smem_bytes} B of shared memory ({detail}), "
            f"beyond the limit of {limit} B per block; use fewer tables, a smaller block or h_per_thread"
        )
    if vendor == "cuda" and s.max_registers is not None:
        if s.min_blocks_per_sm is not None:
            raise ScheduleError(
                f"{where}: max_registers (__maxnreg__) and min_blocks_per_sm (__launch_bounds__) cannot be "
                "combined on one CUDA kernel (nvcc refuses both qualifiers); set one of them"
            )
        # registers are allocated per warp in units of 256 (8 per thread)
        need = _ceil_to(s.max_registers, 8) * _ceil_to(launch.threads, 32)
        if need > REGISTERS_PER_SM["cuda"]:
            raise ScheduleError(
                f"{where}: max_registers {s.max_registers} x {launch.threads} threads needs {need} registers "
                f"per block, more than the {REGISTERS_PER_SM['cuda']} of an SM: the launch would fail"
            )
    if vendor == "cuda" and s.min_blocks_per_sm is not None:
        if s.min_blocks_per_sm * launch.threads > 2048:
            raise ScheduleError(
                f"{where}: min_blocks_per_sm {s.min_blocks_per_sm} x {launch.threads} threads exceeds the "
                "2048 resident threads of an SM"
            )
    return launch


def amd_waves_per_eu(launch: KernelLaunch) -> int | None:
    """HIP's stand-in for the register cap and the blocks-per-SM hint: the minimum number of waves
    per execution unit (SIMD) the compiler must make room for (it then limits VGPRs to
    512 / waves on CDNA2/3). None: no hint."""
    s = launch.schedule
    waves = []
    if s.max_registers is not None:
        waves.append(max(1, VGPRS_PER_LANE_AMD // s.max_registers))
    if s.min_blocks_per_sm is not None:
        waves_per_block = -(-launch.threads // 64)
        waves.append(-(-s.min_blocks_per_sm * waves_per_block // 4))  # 4 SIMDs per CU
    if not waves:
        return None
    return min(max(waves), MAX_WAVES_PER_EU_AMD)


_KERNEL_SUFFIX = re.compile(r"_k\d+$")


def resolve(program: ir.ProgramIR, schedule: ProgramSchedule, vendor: str) -> dict[str, KernelLaunch]:
    """Every kernel's effective launch, checked; ScheduleError names the first problem.

    Tables in `smem_tables`: a per-kernel schedule must name tables that kernel reads by its own
    row; a per-program schedule tables that at least one of the kernels it applies to stages;
    the default (which may serve many programs) stages what each kernel can and ignores the rest.
    A per-kernel entry that looks like one of this program's kernels (same name prefix) but is
    none is refused (a typo); entries of other programs' kernels are ignored.
    """
    kernels = program.kernels()
    names = [k.name for k in kernels]
    prefixes = {_KERNEL_SUFFIX.sub("", n) for n in names}
    for name, _ in schedule.per_kernel:
        if name not in names and _KERNEL_SUFFIX.sub("", name) in prefixes:
            raise ScheduleError(f"schedule names kernel {name!r}, which {program.name} lacks; its kernels: {', '.join(names)}")
    limit = schedule.smem_limit(vendor)
    out: dict[str, KernelLaunch] = {}
    for k in kernels:
        own = k.name in dict(schedule.per_kernel)
        out[k.name] = check_kernel(k, program, schedule.for_kernel(k.name, program.name), vendor, limit, strict_tables=own)
    mine = dict(schedule.per_program).get(program.name)
    if mine is not None:
        users = [n for n in names if n not in dict(schedule.per_kernel)]
        staged = {t for n in users for t, _, _ in out[n].smem}
        for t in mine.smem_tables:
            if users and t != ALL_TABLES and t not in staged:
                who = f"kernels {', '.join(users)}" if len(users) <= 3 else f"{len(users)} kernels"
                raise ScheduleError(
                    f"schedule of {program.name}: smem_tables names {t!r}, which none of its {who} "
                    "reads by its own row (tables of the program: "
                    f"{', '.join(tb.name for tb in program.tables) or 'none'})"
                )
    return out
