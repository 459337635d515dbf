"""The peers are GT4Py's backends as icon4py runs them: icon4py's descriptors, customized per program."""

from __future__ import annotations

import logging

import pytest

from icoforge.granule import report
from icoforge.granule.latest import latest
from icoforge.suite import backends, peers
from icoforge.suite.catalogue import get_program
from icoforge.suite.runner import allocator_for


@pytest.mark.parametrize("name", peers.PEERS)
def test_peer_names_are_icon4pys_descriptors_unchanged(name):
    from icon4py.model.common import model_backends

    assert backends.get_backend(name) is model_backends.BACKENDS[name]


@pytest.mark.parametrize("name", peers.PEERS)
def test_plain_names_are_gt4pys_objects(name):
    from gt4py.next import backend as gt_backend

    obj = backends.get_backend(name + "_plain")
    assert isinstance(obj, gt_backend.Backend)
    assert backends.is_gpu_backend(name + "_plain") == backends.is_gpu_backend(name) == name.endswith("gpu")


def test_rho_theta_gets_icon4pys_zero_origin_and_the_options_are_recorded():
    rho_theta = get_program("compute_rho_theta_pgrad_and_update_vn").program
    other = get_program("compute_hydrostatic_correction_term").program
    descriptor = backends.get_backend("dace_cpu")
    with peers.recording_options() as options:
        a = peers.for_program(descriptor, rho_theta)
        b = peers.for_program(descriptor, other)
    assert a is peers.for_program(descriptor, rho_theta)  # one backend per (descriptor, program)
    assert a is not b
    assert "'use_zero_origin': True" in options["compute_rho_theta_pgrad_and_update_vn"]
    assert "use_zero_origin" not in options["compute_hydrostatic_correction_term"]
    config = peers.peer_config("dace_cpu", options)
    assert config["programs"] == {"compute_rho_theta_pgrad_and_update_vn": "use_zero_origin=True"}
    assert "model_backends.BACKENDS['dace_cpu']" in config["source"]
    assert logging.getLogger("icon4py.model.common.model_options").handlers == []  # recorder removed


def test_solvers_get_scan_unrolling_and_the_copy_removal_hook():
    solver = get_program("vertically_implicit_solver_at_corrector_step").program
    with peers.recording_options() as options:
        peers.for_program(backends.get_backend("dace_gpu"), solver)
    summary = peers.summarize(options["vertically_implicit_solver_at_corrector_step"])
    assert summary == "scan_loop_unrolling=True, factor 0, hook TopLevelDataFlowStep"


def test_descriptor_allocates_on_its_device():
    from icon4py.model.common import model_backends

    assert allocator_for(backends.get_backend("gtfn_cpu")) is model_backends.get_allocator(model_backends.BACKENDS["gtfn_cpu"])


def test_plain_and_icoforge_configs_say_what_they_are():
    assert "plain" in peers.peer_config("dace_gpu_plain")["source"]
    assert "programs" not in peers.peer_config("dace_gpu_plain")
    assert peers.peer_config("icoforge-cuda")["source"].startswith("icoforge")


def _one_backend_report(config):
    variant = {"median_ms": 1.0, "min_ms": 1.0, "samples_ms": [1.0]}
    return {
        "grid": {"name": "R2B3"},
        "options": {"grid": "R2B3", "levels": 10},
        "environment": {"date": "d", "host": "h", "cpus": 2, "python_optimized": True},
        "backends": [{"backend": "dace_gpu", "dycore_step_ms": 5.0, "setup_s": {}, "variants": {"first": variant},
                      "peer_config": config}],
    }  # fmt: skip


def test_latest_and_report_name_the_peer_configuration():
    config = peers.peer_config("dace_gpu", {"compute_rho_theta_pgrad_and_update_vn": "{'use_zero_origin': True}"})
    data = _one_backend_report(config)
    assert latest(data, "abc")["peer_config"] == {"dace_gpu": config}
    note = report.peer_note(data["backends"][0])
    assert "BACKENDS['dace_gpu']" in note and "compute_rho_theta_pgrad_and_update_vn: use_zero_origin=True" in note
    assert latest(_one_backend_report(None), "abc")["peer_config"] == {"dace_gpu": {"source": "not recorded"}}
    assert report.peer_note(_one_backend_report(None)["backends"][0]) is None


def test_run_says_how_each_peer_is_configured_for_its_program():
    rho_theta = get_program("compute_rho_theta_pgrad_and_update_vn").program
    line = peers.describe_for("dace_gpu", rho_theta)
    assert "BACKENDS['dace_gpu']" in line and line.endswith("compute_rho_theta_pgrad_and_update_vn: use_zero_origin=True")
    assert "use_zero_origin" not in peers.describe_for("gtfn_gpu", rho_theta)
    assert "plain" in peers.describe_for("dace_gpu_plain", rho_theta)
