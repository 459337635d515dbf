"""The package's database of tuned schedules (icoforge.backend.schedule.tuned): an entry applies to a kernel
only on its device, for the code it was tuned on, at grid sizes of its class, and never over a
schedule the user gave; the shipped database is well-formed, and (slow) its fingerprints match
the code the programs lower to today on the grid they were tuned on."""

from __future__ import annotations

import dataclasses
import json

import pytest

from icoforge.backend.runtime import gpu
from icoforge.backend.ir import ir
from icoforge.backend.schedule import pipeline, tuned
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, Schedule, ScheduleError
from icoforge.tune import database

DOM = ir.Domain("Cell", ir.Const(0, "int32"), ir.Const(8, "int32"), ir.Const(0, "int32"), ir.Const(4, "int32"))
SIZES = {"Cell": 1000, "Edge": 1500}


def one_kernel_program(value: float = 1.0, h_end: int = 8) -> ir.ProgramIR:
    dom = dataclasses.replace(DOM, h_end=ir.Const(h_end, "int32"))
    k = ir.Kernel("p_k0", dom, (ir.Store("out", ir.Const(value, "float64")),))
    params = (ir.FieldParam("out", ("Cell", "K"), "float64"),)
    return ir.ProgramIR("p", params, (), (), (k,), dim_kinds=(("Cell", "horizontal"), ("K", "vertical")))


def entry(program: ir.ProgramIR, **changes) -> tuned.TunedKernel:
    e = tuned.TunedKernel(
        kernel="p_k0", program="p", vendor="cuda", device="NVIDIA H200", dim_sizes=tuple(SIZES.items()),
        fingerprint=tuned.kernel_fingerprint(program.kernels()[0]), schedule=Schedule(block=(128, 1), k_per_thread=4),
        levels=4,
    )  # fmt: skip
    return dataclasses.replace(e, **changes)


def launched_block(program: ir.ProgramIR, schedule: ProgramSchedule, sizes) -> tuple[int, int]:
    _, _, launches = pipeline.gpu_passes(program, schedule, "cuda", sizes)
    return launches["p_k0"].block


def default_with(*entries) -> ProgramSchedule:
    return ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], tuned=entries)


def test_an_entry_applies_to_its_kernel_at_sizes_of_its_class_whatever_the_horizontal_bounds():
    p = one_kernel_program()
    e = entry(p)
    assert launched_block(p, default_with(e), SIZES) == (128, 1)
    # the horizontal bounds are the size class's business, not the fingerprint's
    assert tuned.kernel_fingerprint(one_kernel_program(h_end=1000).kernels()[0]) == e.fingerprint
    assert launched_block(p, default_with(e), {"Cell": 1900, "Edge": 800}) == (128, 1)


def test_an_entry_does_not_apply_to_changed_code_other_sizes_or_over_the_users_schedule():
    p = one_kernel_program()
    e = entry(p)
    changed = one_kernel_program(value=2.0)
    assert launched_block(changed, default_with(e), SIZES) == VENDOR_DEFAULTS["cuda"].block
    assert launched_block(p, default_with(e), {"Cell": 2001}) == VENDOR_DEFAULTS["cuda"].block
    assert launched_block(p, default_with(e), {"Vertex": 1000}) == VENDOR_DEFAULTS["cuda"].block  # no shared dimension
    mine = default_with(e).with_kernel("p_k0", Schedule(block=(64, 2)))
    assert launched_block(p, mine, SIZES) == (64, 2)
    decisions: list[tuned.Decision] = []
    pipeline.gpu_passes(changed, default_with(e), "cuda", SIZES, decisions)
    now, then = tuned.kernel_fingerprint(changed.kernels()[0]), e.fingerprint
    assert [d.status for d in decisions] == [tuned.CODE_CHANGED]
    assert [str(d) for d in decisions] == [f"p_k0: its code changed since it was tuned (fingerprint {now}, tuned {then}): not applied"]
    statuses = []
    for schedule, program, sizes in ((default_with(e), p, SIZES), (default_with(e), p, {"Cell": 2001}), (mine, p, SIZES),
                                     (default_with(dataclasses.replace(e, kernel="p_k9")), p, SIZES)):  # fmt: skip
        decisions = []
        pipeline.gpu_passes(program, schedule, "cuda", sizes, decisions)
        statuses += [d.status for d in decisions]
    assert statuses == [tuned.APPLIED, tuned.OTHER_SIZES, tuned.NAMED_BY_SCHEDULE, tuned.NO_SUCH_KERNEL]


def test_a_kernel_tuned_in_several_variants_gets_the_entry_of_the_calls_size_class_and_code():
    p, other_code = one_kernel_program(), one_kernel_program(value=2.0)
    small = entry(p)  # SIZES, this code
    big = entry(p, dim_sizes=(("Cell", 8000), ("Edge", 12000)), schedule=Schedule(block=(256, 1)))
    other_levels = entry(p, fingerprint=tuned.kernel_fingerprint(other_code.kernels()[0]), schedule=Schedule(block=(32, 8)), levels=6)
    both = default_with(big, other_levels, small)
    assert launched_block(p, both, SIZES) == (128, 1)
    assert launched_block(p, both, {"Cell": 9000, "Edge": 11000}) == (256, 1)
    assert launched_block(other_code, both, SIZES) == (32, 8)
    decisions: list[tuned.Decision] = []
    pipeline.gpu_passes(p, both, "cuda", {"Cell": 100_000}, decisions)  # one decision per kernel, naming both classes
    assert [d.status for d in decisions] == [tuned.OTHER_SIZES]
    assert "{'Cell': 8000, 'Edge': 12000} and {'Cell': 1000, 'Edge': 1500}" in str(decisions[0])
    decisions = []
    pipeline.gpu_passes(one_kernel_program(value=3.0), both, "cuda", SIZES, decisions)
    assert [d.status for d in decisions] == [tuned.CODE_CHANGED]
    assert f"tuned {other_levels.fingerprint}, {small.fingerprint})" in str(decisions[0])


def test_the_static_arguments_of_a_variant_are_printed_as_tune_takes_them():
    import types

    from gt4py.next.otf import arguments

    statics = {"nflatlev": arguments.StaticArg(value=5), "limited_area": arguments.StaticArg(value=False), "x": None}
    inp = types.SimpleNamespace(args=types.SimpleNamespace(argument_descriptor_contexts={arguments.StaticArg: statics}))
    assert gpu._static_arguments(inp) == "limited_area=False nflatlev=5"


def test_entries_are_for_their_device_only_and_none_without_a_device():
    p = one_kernel_program()
    e = entry(p)
    assert tuned.for_device("cuda", "NVIDIA H200", (e,)) == (e,)
    assert tuned.for_device("cuda", "NVIDIA A100-SXM4-80GB", (e,)) == ()
    assert tuned.for_device("hip", "NVIDIA H200", (e,)) == ()
    assert tuned.for_device("cuda", None, (e,)) == ()


def test_entries_of_the_same_architecture_hold_on_a_sibling_device_its_own_first():
    """An H200's entry holds on an H100 (both sm_90), not on another architecture, and not where the
    entry names no architecture; where the device has its own entry for the kernel, that one applies."""
    p = one_kernel_program()
    h200 = entry(p, arch="sm_90")
    h100 = entry(p, device="NVIDIA H100 80GB HBM3", arch="sm_90", schedule=Schedule(block=(64, 2)))
    a100 = entry(p, device="NVIDIA A100-SXM4-80GB", arch="sm_80")
    old = entry(p, device="NVIDIA GH200 480GB")  # no arch recorded: its device only
    db = (h200, a100, old)
    assert tuned.for_device("cuda", "NVIDIA H100 80GB HBM3", db, arch="sm_90") == (h200,)
    assert tuned.for_device("cuda", "NVIDIA H100 80GB HBM3", db) == ()  # no architecture known
    assert tuned.for_device("cuda", "NVIDIA L40S", db, arch="sm_89") == ()
    assert tuned.for_device("hip", "AMD Instinct MI300A", db, arch="sm_90") == ()
    assert tuned.for_device("cuda", "NVIDIA GH200 480GB", db, arch="sm_90") == (old, h200)
    # the device's own entry first: `applied` takes it
    carried = tuned.for_device("cuda", "NVIDIA H100 80GB HBM3", (h200, h100), arch="sm_90")
    assert carried == (h100, h200)
    _, decisions = tuned.applied(dataclasses.replace(default_with(), tuned=carried), p, SIZES)
    assert [d.status for d in decisions] == [tuned.APPLIED] and "tuned on NVIDIA H100 80GB HBM3" in str(decisions[0])
    assert launched_block(p, dataclasses.replace(default_with(), tuned=carried), SIZES) == (64, 2)
    # a schedule naming a device gets that device's entries alone
    assert tuned.for_schedule("cuda", "NVIDIA H100 80GB HBM3", "NVIDIA H200", (h200, h100), arch="sm_90") == (h200,)
    # the database's entries say their architecture, and it survives the JSON round trip
    assert tuned.TunedKernel.from_json(h200.to_json()) == h200 and "arch" not in old.to_json()
    assert all(e.arch for e in tuned.load())


def test_the_default_gpu_backend_carries_the_entries_of_its_device(monkeypatch):
    monkeypatch.setattr(gpu, "device_arch", lambda: "sm_90")
    monkeypatch.setattr(gpu, "device_name", lambda: "NVIDIA H200")
    carried = gpu.make_gpu_backend("cuda").executor.schedule.tuned
    assert carried and {e.device for e in carried} == {"NVIDIA H200"}
    given = ProgramSchedule(default=VENDOR_DEFAULTS["cuda"])
    assert gpu.make_gpu_backend("cuda", given).executor.schedule.tuned == ()
    # a given schedule with "tuned": true (an A/B against the default that changes one thing) has them too
    asked = ProgramSchedule.loads('{"fuse": ["p"], "tuned": true}')
    assert asked.use_tuned and asked.to_json()["tuned"] is True and ProgramSchedule.loads(asked.dumps()) == asked
    assert gpu.make_gpu_backend("cuda", asked).executor.schedule.tuned == carried
    monkeypatch.setattr(gpu, "device_name", lambda: None)
    assert gpu.make_gpu_backend("cuda").executor.schedule.tuned == ()
    assert gpu.make_gpu_backend("cuda", asked).executor.schedule.tuned == ()


def test_a_schedule_may_name_the_device_whose_entries_it_takes(monkeypatch):
    """"tuned": "NVIDIA H200" on another GPU (an H100) carries the H200's entries: an A/B of a
    sibling's tuning. A name the database has no entries of is refused with the names it has."""
    monkeypatch.setattr(gpu, "device_name", lambda: "NVIDIA H100 80GB HBM3")
    assert gpu.make_gpu_backend("cuda").executor.schedule.tuned == ()  # the default: this device's, none
    asked = ProgramSchedule.loads('{"tuned": "NVIDIA H200"}')
    assert asked.to_json()["tuned"] == "NVIDIA H200" and ProgramSchedule.loads(asked.dumps()) == asked
    carried = gpu.make_gpu_backend("cuda", asked).executor.schedule.tuned
    assert carried and {e.device for e in carried} == {"NVIDIA H200"}
    with pytest.raises(ScheduleError, match="no cuda entries measured on that device; the database has: NVIDIA H200"):
        gpu.make_gpu_backend("cuda", ProgramSchedule.loads('{"tuned": "NVIDIA H100 80GB HBM3"}'))
    for bad in ('""', "3"):
        with pytest.raises(ScheduleError, match="tuned: true, false or a device's name"):
            ProgramSchedule.loads('{"tuned": %s}' % bad)


def test_the_database_tool_takes_picks_of_gpu_tunes_only(tmp_path):
    result = {
        "program": "p", "grid": "G", "levels": 4, "vendor": "cuda", "device": "NVIDIA H200", "emulated": False,
        "kept_default": False, "default_whole_s": 2e-3, "tuned_whole_s": 1e-3, "dim_sizes": SIZES,
        "fingerprints": {"p_k0": "abc", "p_k1": "def"},
        "picks": [{"kernel": "p_k0", "default_s": 1e-3, "best_s": 5e-4, "best": "kpt4", "schedule": Schedule(k_per_thread=4).to_json()},
                  {"kernel": "p_k1", "default_s": 1e-3, "best_s": 1e-3, "best": "default", "schedule": Schedule().to_json()}],
    }  # fmt: skip
    got = database.entries(result, "here")
    assert [(e.kernel, e.schedule.k_per_thread, e.fingerprint) for e in got] == [("p_k0", 4, "abc")]
    assert database.entries({**result, "kept_default": True}, "here") == []
    with pytest.raises(Exception, match="emulation"):
        database.entries({**result, "emulated": True}, "here")
    path = tmp_path / "db.json"
    p_here = {database.Variant.of(result)}
    database.write(database.merged([], got, p_here), path)
    database.write(database.merged(list(tuned.load(path)), got, p_here), path)  # a second add replaces
    assert len(tuned.load(path)) == 1 and tuned.load(path)[0].levels == 4
    # a tune of p's variant where nothing beats the default drops that variant's older entries ...
    assert database.merged(list(tuned.load(path)), [], p_here) == []
    assert len(database.merged(list(tuned.load(path)), [], {database.Variant.of({**result, "program": "q"})})) == 1
    # ... and only that variant's: other levels, another size class or other static values stay
    for other in ({"levels": 6}, {"dim_sizes": {"Cell": 8000, "Edge": 12000}}, {"static_values": {"nflatlev": "3"}}):
        assert len(database.merged(list(tuned.load(path)), [], {database.Variant.of({**result, **other})})) == 1, other
    # the static values it was tuned with travel into the entry and back from the file
    variant = database.entries({**result, "static_values": {"nflatlev": "16"}}, "here")
    database.write(variant, path)
    assert [e.static_values for e in tuned.load(path)] == [(("nflatlev", "16"),)]


def test_a_broken_database_file_is_named_in_the_error(tmp_path):
    path = tmp_path / "db.json"
    path.write_text('{"kernels": [{"kernel": "p_k0"')
    with pytest.raises(ScheduleError, match="db.json: not a database"):
        tuned.load(path)
    path.write_text('{"kernels": [{"kernel": "p_k0"}]}')
    with pytest.raises(ScheduleError, match="missing"):
        tuned.load(path)


def test_the_shipped_database_is_well_formed():
    doc = json.loads(tuned.DATABASE.read_text())
    entries = tuned.load()
    assert len(entries) == len(doc["kernels"]) > 0
    from icoforge.suite import get_program

    for e in entries:
        get_program(e.program)  # a program of the suite
        assert e.measured.startswith("benchmarks/"), e.measured
        assert dict(e.dim_sizes) and len(e.fingerprint) == 16


@pytest.mark.slow
def test_the_shipped_fingerprints_match_todays_code_at_the_levels_they_were_tuned_at():
    """A lowering change that alters a tuned kernel drops its entry (correct, but the tuning is
    then lost): this test says so, so that the kernel is tuned again or the change is looked at.
    Global grids' entries on R2B4, not the tuned R2B6: a fingerprint leaves the horizontal bounds
    out (tested above), so the prints are the same at the same levels (2-core workstation: 38 s
    for R2B6/80's; on R2B6 179 s, in a run that shared the cores). A limited-area grid's entries
    on that grid: its tables and static bounds are its own."""
    from icoforge.grids import load_grid
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite import get_program, make_inputs
    from icoforge.suite.runner import static_variant

    entries = tuned.load()
    tuned_on = {e: e.measured.split(": ")[1].split(",")[0] for e in entries}  # "R2B6/80"
    assert all(f"/{e.levels}" in where for e, where in tuned_on.items()), tuned_on
    assert set(tuned_on.values()) == {"R2B6/80", "R2B6/120", "REGIONAL/80"}  # the granule's three configurations
    stale = []
    for where in sorted(set(tuned_on.values())):
        name, levels = where.split("/")
        grid = load_grid("R2B4" if name.startswith("R2B") else name, levels=int(levels), show_progress=False)
        mine = [e for e in entries if tuned_on[e] == where]
        for program, statics in sorted({(e.program, e.static_values) for e in mine}):
            info = get_program(program)
            overrides, names = static_variant(info, "icon4py", dict(statics))  # the variant tuned, as the tuner compiles it
            args = {**make_inputs(info, grid, 0), **overrides}
            pir = suite_program_ir(info, grid, args, names)
            prints = {k.name: tuned.kernel_fingerprint(k) for k in pir.kernels()}
            stale += [(where, e.kernel) for e in mine if (e.program, e.static_values) == (program, statics)
                      and prints.get(e.kernel) != e.fingerprint]  # fmt: skip
    assert stale == []
