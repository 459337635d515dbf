"""`explain`: the source and GTIR pages for every dycore program (no compilation), full pages for a
few small ones (GT4Py's passes take seconds per program, so only a handful), rendering, CLI."""

from __future__ import annotations

import io

import pytest

from icoforge.cli.main import main
from icoforge.errors import IcoforgeError
from icoforge.perf.explain import STAGES, Page, explain, parse_diff_spec, render
from icoforge.suite import program_names


def test_source_and_gtir_pages_for_every_program():
    names = program_names()
    assert len(names) == 78
    for name in names:
        pages = explain(name, stages=["source", "gtir"])
        assert [p.stage for p in pages] == ["source", "gtir"], name
        source, gtir = pages
        assert f"def {name}(" in source.text, name
        assert "@gtx.field_operator" in source.text or "@field_operator" in source.text or "scan_operator" in source.text, name
        assert gtir.text.startswith(f"{name}("), name
        out = io.StringIO()
        render(pages, file=out, color=False)
        assert "\x1b[" not in out.getvalue()


@pytest.mark.parametrize(
    "program, target",
    [
        ("copy_cell_kdim_field_to_vp", "cpp"),
        ("compute_divergence_of_fluxes_of_rho_and_theta", "cuda"),
        ("solve_tridiagonal_matrix_for_w_back_substitution", "hip"),
    ],
)
def test_all_pages(tiny_grid, program, target):
    pages = explain(program, tiny_grid, target, STAGES)
    stages = [p.stage for p in pages]
    assert stages[:4] == ["source", "gtir", "passes", "ir"] and set(stages[4:]) == {"code"}
    ir_page = pages[3].text
    assert "# schedule: " in ir_page and "compulsory bytes: read" in ir_page and "# program total:" in ir_page
    assert "static scalars: horizontal_start=0" in pages[2].title
    code = [p for p in pages if p.stage == "code"]
    if target == "cpp":
        assert all(p.lexer == "cpp" and "static void" in p.text for p in code)
    else:
        kernels = [p for p in code if p.lexer != "python"]
        assert kernels and all('extern "C" __global__' in p.text for p in kernels)
        assert code[-1].title == "host plan (Python)" and "def launch(" in code[-1].text
        if target == "hip":
            assert "amdgpu_flat_work_group_size(1, 256)" in kernels[0].text  # the HIP vendor default


def test_the_inline_decisions_follow_the_kernel_ir(tiny_grid):
    name = "apply_divergence_damping_and_update_vn"
    pages = explain(name, tiny_grid, "cpp", ["ir"])
    assert [p.stage for p in pages] == ["ir", "ir"] and pages[0].title.startswith("kernel IR")
    assert pages[1].title == "temporaries: 0 of 1 inlined (inline=auto)"
    assert "__tmp_0 (appl_dive_damp_upda_vn_k0 -> appl_dive_damp_upda_vn_k1): kept: " in pages[1].text
    (ir_all, decided) = explain(name, tiny_grid, "cpp", ["ir"], inline_policy="all")
    assert decided.title == "temporaries: 1 of 1 inlined (inline=all)" and "(1 kernels;" in ir_all.title


def test_diff_between_schedules(tiny_grid):
    (page,) = explain("compute_divergence_of_fluxes_of_rho_and_theta", tiny_grid, "cuda", [], diff="128,1")
    assert page.stage == "diff" and page.lexer == "diff"
    assert "-extern \"C\" __global__ void __launch_bounds__(256)" in page.text
    assert "+extern \"C\" __global__ void __launch_bounds__(128)" in page.text
    (same,) = explain("compute_divergence_of_fluxes_of_rho_and_theta", tiny_grid, "cuda", [], diff="32,8")  # the CUDA default
    assert same.text.startswith("(no difference")
    assert parse_diff_spec("k_per_thread=4;smem_tables=C2E") == ["k_per_thread=4", "smem_tables=C2E"]
    with pytest.raises(IcoforgeError):
        parse_diff_spec("fast")


def test_render_highlighted_and_plain():
    pages = [Page("code", "kernel x", "int main() { return 0; }\n" + "x" * 300, "cpp")]
    out = io.StringIO()
    render(pages, file=out, color=True)
    text = out.getvalue()
    assert "\x1b[" in text and "x" * 300 in text  # highlighted, long lines never cropped
    out = io.StringIO()
    render(pages, file=out, color=False)
    assert out.getvalue().startswith("======== [code] kernel x ========\nint main()")


def test_errors():
    with pytest.raises(IcoforgeError, match="unknown stage"):
        explain("copy_cell_kdim_field_to_vp", stages=["bytecode"])
    with pytest.raises(IcoforgeError, match="need a grid"):
        explain("copy_cell_kdim_field_to_vp", stages=["ir"])


def test_cli_explain_piped(tiny_grid, capsys):
    rc = main(["explain", "copy_cell_kdim_field_to_vp", "--grid", "R2B3", "--levels", "10", "--stage", "ir,code", "--target", "cpp"])
    out = capsys.readouterr().out
    assert rc == 0 and "\x1b[" not in out
    assert "======== [ir] kernel IR (1 kernels; costs on R2B3/10 levels) ========" in out
    assert "read 0.410 MB (tables 0.000 MB), written 0.410 MB; 0 flop" in out
    assert "======== [code] C++ of copy_cell_kdim_field_to_vp_k0 ========" in out


def test_code_pages_say_which_fusion_the_grid_is_too_small_for(tiny_grid):
    # the CUDA default runs the predictor's back substitution and the map after it as one column
    # walk only on grids with fuse_scan_min_columns columns: the pages show the code as compiled
    pages = explain("vertically_implicit_solver_at_predictor_step", tiny_grid, "cuda", ["code"])
    (refused,) = [p for p in pages if p.title.startswith("fusions refused")]
    assert "vert_impl_solv_pred_step_k7 + vert_impl_solv_pred_step_k9: not fused into one column walk" in refused.text
    titles = [p.title for p in pages]
    assert "CUDA of vert_impl_solv_pred_step_k7" in titles and not any("k7to9" in t for t in titles)


def test_code_pages_of_a_given_schedule(tiny_grid, capsys):
    """--schedule: the code pages as that program schedule compiles them (here the corrector's two
    sweeps as one walk, their coefficients in shared memory); a bad one is refused before any page."""
    rc = main(["explain", "vertically_implicit_solver_at_corrector_step", "--grid", "R2B3", "--levels", "10",
               "--stage", "code", "--schedule", '{"fuse_sweeps": ["*"]}', "--color", "never"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0 and "======== [code] CUDA of vert_impl_solv_corr_step_k5to6 ========" in out
    assert "__shared__ double __tmp_4_oc[" in out and "// then vert_impl_solv_corr_step_k6: backward" in out
    assert main(["explain", "vertically_implicit_solver_at_corrector_step", "--stage", "code", "--schedule", '{"fuse_sweep": 1}']) != 0
    assert "unknown program-schedule keys ['fuse_sweep']" in capsys.readouterr().err
