"""Profiler command lines and the parsers of their CSV output (samples written after the tools'
documented formats: ncu `--csv --page raw`, nsys `stats --report cuda_gpu_kern_sum --format csv`,
rocprofv3 `--kernel-trace` CSV)."""

from __future__ import annotations

import re

import pytest

from icoforge.cli.main import main
from icoforge.perf import profile

# ncu --csv --page raw: program output and ==PROF== lines first; a units row after the header;
# quoted values with thousands separators; "n/a" where a metric is unavailable. Here one metric
# comes in non-base units (as without --print-units base) to check the scaling.
NCU_RAW = '''\
==PROF== Connected to process 4242 (/usr/bin/python3.12)
building inputs for compute_divergence_of_fluxes_of_rho_and_theta
==PROF== Profiling "comp_dive_flux_rho_thet_k0": 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes.sum","gpu__time_duration.sum","l1tex__t_sector_hit_rate.pct","launch__registers_per_thread","lts__t_sector_hit_rate.pct","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","byte","usecond","%","register/thread","%","%"
"0","4242","python3.12","h200","comp_dive_flux_rho_thet_k0","1","7","(128, 1, 1)","(2560, 80, 1)","0","9.0","1,234,567,890","412.25","12.5","40","61.25","83.1"
"1","4242","python3.12","h200","other_kernel_k0","1","7","(128, 1, 1)","(10, 1, 1)","0","9.0","1,000","1.0","n/a","16","n/a","10"
"2","4242","python3.12","h200","comp_dive_flux_rho_thet_k0","1","7","(128, 1, 1)","(2560, 80, 1)","0","9.0","1,234,567,910","412.75","13.5","40","62.25","83.3"
"3","4242","python3.12","h200","comp_dive_flux_rho_thet_k0","1","7","(128, 1, 1)","(2560, 80, 1)","0","9.0","1,234,567,900","500.0","12.0","40","60.0","82.0"
==PROF== Disconnected from process 4242
'''

# the details page: one row per (launch, metric)
NCU_DETAILS = '''\
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","p","h","k_a_k0(double const*, int)","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes.sum","Mbyte","2.50"
"0","1","p","h","k_a_k0(double const*, int)","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","5,000"
'''

NSYS_KERNSUM = '''\
Processing [icoforge-profile.sqlite] with [cuda_gpu_kern_sum.py]...
"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"
"61.2","2500000","5","500000.0","410000.0","400000","900000","200000.5","comp_dive_flux_rho_thet_k0"
"38.8","1580000","2","790000.0","790000.0","780000","800000","14142.1","cupy_copy__float64_float64"
'''

ROCPROF_TRACE = '''\
"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"
"KERNEL_DISPATCH","Agent 4",1,1,77,1,10,"comp_dive_flux_rho_thet_k0",1,1000000,1300000,0,0,32,0,24,256,1,1,655360,80,1
"KERNEL_DISPATCH","Agent 4",1,1,77,2,10,"comp_dive_flux_rho_thet_k0",2,2000000,2200000,0,0,32,0,24,256,1,1,655360,80,1
"KERNEL_DISPATCH","Agent 4",1,1,77,3,10,"comp_dive_flux_rho_thet_k0",3,3000000,3250000,0,0,32,0,24,256,1,1,655360,80,1
'''


def test_parse_ncu_raw_page():
    m = profile.parse_ncu_csv(NCU_RAW)
    assert set(m) == {"comp_dive_flux_rho_thet_k0", "other_kernel_k0"}
    k = m["comp_dive_flux_rho_thet_k0"]
    assert k.launches == 3
    assert k.dram_bytes == 1_234_567_900  # median over launches, thousands separators removed
    assert k.seconds == pytest.approx(412.75e-6)  # usecond -> seconds
    assert (k.l1_hit_pct, k.l2_hit_pct, k.occupancy_pct, k.registers) == (12.5, 61.25, 83.1, 40)
    assert k.dram_bytes_per_s == pytest.approx(1_234_567_900 / 412.75e-6)
    other = m["other_kernel_k0"]
    assert other.l1_hit_pct is None and other.l2_hit_pct is None  # "n/a"
    assert other.seconds == pytest.approx(1e-6)


def test_parse_ncu_details_page():
    m = profile.parse_ncu_csv(NCU_DETAILS)
    (k,) = m.values()
    assert k.kernel == "k_a_k0"  # the parameter list is not part of our names
    assert k.dram_bytes == pytest.approx(2.5e6) and k.seconds == pytest.approx(5e-6)


def test_parse_ncu_nothing():
    assert profile.parse_ncu_csv("==PROF== No kernels were profiled.\n") == {}


def test_parse_nsys_and_rocprof():
    ns = profile.only(profile.parse_nsys_kernsum(NSYS_KERNSUM), ["comp_dive_flux_rho_thet_k0"])
    assert list(ns) == ["comp_dive_flux_rho_thet_k0"]
    assert ns["comp_dive_flux_rho_thet_k0"].seconds == pytest.approx(410e-6)
    assert ns["comp_dive_flux_rho_thet_k0"].launches == 5
    rp = profile.parse_rocprof_kernel_trace(ROCPROF_TRACE)["comp_dive_flux_rho_thet_k0"]
    assert rp.launches == 3 and rp.seconds == pytest.approx(250e-6) and rp.registers == 32


def test_command_lines():
    target = profile.target_command("prog", "R2B4", 80, "icoforge-cuda", 3)
    (ncu,) = profile.profile_commands("ncu", ["a_k0", "a_k1"], target, "out")
    line = profile.shell_line(ncu)
    assert "--kernel-name 'regex:^(a_k0|a_k1)$'" in line
    assert "--clock-control none" in line and "--csv --page raw" in line
    assert "dram__bytes.sum,gpu__time_duration.sum" in line
    assert ncu[-len(target) :] == target
    nsys = profile.profile_commands("nsys", ["a_k0"], target, "out")
    assert [c[:2] for c in nsys] == [["nsys", "profile"], ["nsys", "stats"]]
    (roc,) = profile.profile_commands("rocprof", ["a_k0"], target, "out")
    assert roc[:4] == ["rocprofv3", "--kernel-trace", "--kernel-include-regex", "^(a_k0)$"]
    with pytest.raises(ValueError):
        profile.profile_commands("vtune", ["a"], target, "out")
    # a granule variant: its static values go to the profiled `icoforge run`
    variant = profile.target_command("prog", "R2B4", 80, "icoforge-cuda", 3, {"nflatlev": "16", "limited_area": "True"})
    assert variant[len(target):] == ["--static-value", "nflatlev=16", "--static-value", "limited_area=True"]


def test_cli_prints_ncu_command(tiny_grid, capsys):
    rc = main(["profile", "compute_divergence_of_fluxes_of_rho_and_theta", "--tool", "ncu", "--grid", "R2B3", "--levels", "10"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("ncu --kernel-name 'regex:^(comp_dive_flux_rho_thet_k0)$' --clock-control none")
    assert "-m icoforge run compute_divergence_of_fluxes_of_rho_and_theta --grid R2B3 --levels 10 --backend icoforge-cuda" in out
    argv = ["profile", "compute_hydrostatic_correction_term", "--tool", "ncu", "--grid", "R2B3", "--levels", "10"]
    assert main([*argv, "--static-value", "vertical_start=8"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("--repeat 3 --static-value vertical_start=8")
    assert main([*argv, "--static-value", "no_such=1"]) == 2
    assert "its scalars: " in capsys.readouterr().err


def test_cli_profiles_the_kernels_as_the_schedule_fuses_them(tiny_grid, capsys, monkeypatch):
    # ncu must be told the names the profiled `icoforge run` compiles: as its schedule fuses them,
    # at the grid's size. The CUDA default fuses the predictor solver's maps at any size, and its
    # backward sweep with the map after it only on grids with fuse_scan_min_columns columns (R2B3
    # has fewer); a --schedule that names the program fuses at any size; '{"fuse": []}' nothing
    monkeypatch.setenv("ICOFORGE_SCHEDULE", "")  # --schedule sets it; restored after the test
    argv = ["profile", "vertically_implicit_solver_at_predictor_step", "--tool", "ncu", "--grid", "R2B3", "--levels", "10"]

    def names(*extra):
        assert main([*argv, *extra]) == 0
        return re.search(r"regex:\^\(([^)]*)\)", capsys.readouterr().out).group(1).split("|")

    assert names() == [f"vert_impl_solv_pred_step_k{k}" for k in ("0to1", "2to5", "6", "7", "9")]
    fused = names("--schedule", '{"fuse": ["vertically_implicit_solver_at_predictor_step"]}')
    assert fused == [f"vert_impl_solv_pred_step_k{k}" for k in ("0to1", "2to5", "6", "7to9")]
    unfused = names("--schedule", '{"fuse": []}')
    assert len(unfused) == 8 and "vert_impl_solv_pred_step_k6" in unfused and not any("to" in n for n in unfused)


def test_parse_real_ncu_output():
    """`icoforge profile ... --tool ncu --run` on the H200 (R2B4, 80 levels): ncu's raw page lists
    every raw metric; ours are among them, in base units ("byte", "ns")."""
    import pathlib

    text = (pathlib.Path(__file__).parent / "ncu_raw_h200.csv").read_text()
    (k,) = profile.parse_ncu_csv(text).values()
    assert k.kernel == "comp_dive_flux_rho_thet_k0" and k.launches == 5
    assert k.dram_bytes == 51_117_312 and k.seconds == pytest.approx(17.952e-6)
    assert (k.l1_hit_pct, k.l2_hit_pct, k.occupancy_pct, k.registers) == (40.11, 62.77, 84.25, 32)
