import json

from icoforge.cli.main import main


def test_grid_list(capsys):
    assert main(["grid", "list"]) == 0
    out = capsys.readouterr().out
    for text in ("R2B3", "R2B7", "REGIONAL", "327,680", "1,966,080"):
        assert text in out


def test_grid_make_then_list_shows_cached(capsys):
    assert main(["grid", "make", "r2b3"]) == 0
    capsys.readouterr()
    main(["grid", "list"])
    r2b3_row = next(line for line in capsys.readouterr().out.splitlines() if "R2B3" in line)
    assert "yes" in r2b3_row


def test_grid_info_tables(capsys):
    assert main(["grid", "info", "R2B3", "--levels", "3"]) == 0
    out = capsys.readouterr().out
    for text in ("5,120", "7,680", "2,562", "C2E2CO", "V2E", "-1", "LATERAL_BOUNDARY", "INTERIOR"):
        assert text in out


def test_grid_info_json(capsys):
    assert main(["grid", "info", "R2B3", "--levels", "4", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["num_cells"], info["num_levels"]) == (5120, 4)
    v2e = next(c for c in info["connectivities"] if c["name"] == "V2E")
    assert (v2e["max_neighbors"], v2e["skip_value"], v2e["num_skipped"]) == (6, -1, 12)


def test_unknown_grid_is_one_line_error(capsys):
    assert main(["grid", "info", "R2B44"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("icoforge: error: unknown grid 'R2B44'. Did you mean 'R2B4'")
    assert err.count("\n") == 1


def test_bad_levels_is_one_line_error(capsys):
    assert main(["grid", "info", "R2B3", "--levels", "0"]) == 2
    assert "levels must be a positive integer" in capsys.readouterr().err
