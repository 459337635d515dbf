"""Backend registry and run_program (timing, checksum, restoring in-out fields)."""

import numpy as np
import pytest
from gt4py.next import backend as gt_backend

from icoforge.errors import UnknownNameError
from icoforge.suite.backends import backend_names, get_backend, is_gpu_backend
from icoforge.suite.catalogue import get_program
from icoforge.suite.inputs import make_inputs
from icoforge.suite.runner import checksum, output_arrays, prepare, run_program, static_param_names


def test_backend_registry():
    assert get_backend("embedded") is None
    # peer names are icon4py's descriptors, handed over unchanged; GT4Py's objects are the *_plain names
    from icon4py.model.common import model_backends

    assert get_backend("gtfn_cpu") is model_backends.BACKENDS["gtfn_cpu"]
    assert not isinstance(get_backend("dace_cpu"), gt_backend.Backend)
    gtfn = get_backend("gtfn_cpu_plain")
    assert isinstance(gtfn, gt_backend.Backend) and gtfn.name == "run_gtfn_cpu"
    assert get_backend("gtfn_cpu_plain") is gtfn  # built once
    assert isinstance(get_backend("dace_cpu_plain"), gt_backend.Backend)
    assert {"icoforge", "icoforge-cpu", "icoforge-cuda", "icoforge-hip", "gtfn_gpu", "dace_gpu"} <= set(backend_names())
    assert is_gpu_backend("gtfn_gpu") and not is_gpu_backend("gtfn_cpu")
    with pytest.raises(UnknownNameError) as err:
        get_backend("gtfn_cp")
    assert err.value.suggestions[0] == "gtfn_cpu"


def test_icoforge_backend_is_built_through_make_backend():
    backend = get_backend("icoforge")
    assert isinstance(backend, gt_backend.Backend) and "icoforge" in backend.name


def test_static_params_like_icon4py():
    info = get_program("apply_divergence_damping_and_update_vn")
    static = static_param_names(info, "icon4py")
    assert {"horizontal_start", "vertical_end", "divdamp_order", "limited_area", "is_iau_active"} <= set(static)
    assert "dtime" not in static and "second_order_divdamp_factor" not in static
    assert static_param_names(info, "none") == ()
    assert static_param_names(info, ["dtime"]) == ("dtime",)


def test_run_program_on_embedded(tiny_grid):
    info = get_program("add_analysis_increments_to_vn")  # vn += ...: an in-out field
    assert info.inouts == ("vn",)
    result = run_program(info, "embedded", tiny_grid, seed=4, repeat=3)
    assert (result.program, result.backend, result.grid) == (info.name, "embedded", "R2B3")
    assert result.num_levels == tiny_grid.num_levels and result.compile_s == 0.0
    assert len(result.times_s) == 3 and 0 < result.min_ms <= result.median_ms

    # the checksum is that of exactly one call on the pristine inputs, however many calls ran
    args = make_inputs(info, tiny_grid, seed=4)
    call, _ = prepare(info, "embedded", tiny_grid, args)
    call(args)
    expected = output_arrays(info, args)
    assert result.checksum == checksum(expected)
    assert result.output_sums["vn"] == pytest.approx(float(np.sum(expected["vn"])))

    assert run_program(info, "embedded", tiny_grid, seed=4, repeat=1).checksum == result.checksum
    assert run_program(info, "embedded", tiny_grid, seed=5, repeat=1).checksum != result.checksum


def test_checksum_ignores_rounding_noise_but_not_changes():
    a = {"x": np.linspace(1.0, 2.0, 100)}
    assert checksum(a) == checksum({"x": a["x"] * (1 + 1e-15)})
    assert checksum(a) != checksum({"x": a["x"] + 1e-3})
    assert checksum(a) != checksum({"y": a["x"]})


def test_icoforge_cuda_by_name_carries_the_tuned_schedules_unless_a_schedule_is_given(monkeypatch):
    # the granule and `icoforge run` make their backend by name: without --schedule it must be
    # the backend's own default, the one that carries this device's tuned schedules
    from icoforge import settings
    from icoforge.backend.runtime import gpu
    from icoforge.suite.backends import BACKEND_FACTORIES

    monkeypatch.setattr(gpu, "device_name", lambda: "NVIDIA H200")
    with settings.overridden(schedule=""):
        assert BACKEND_FACTORIES["icoforge-cuda"]().executor.schedule.tuned
    with settings.overridden(schedule='{"default": {"block": [128, 1]}}'):
        assert BACKEND_FACTORIES["icoforge-cuda"]().executor.schedule.tuned == ()
