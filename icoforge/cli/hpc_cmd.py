"""`icoforge hpc-references`: measure the ReFrame checks' performance references on this machine and
write them for a system:partition; `icoforge hpc-trend`: plot the checks' perflogs run by run.

The references are measured by running the checks' own commands (hpc/icoforge_hpc.py) without
ReFrame, so a machine without ReFrame (our GPU machine) can measure them too; the same sanity as
in the checks must pass before a value is written.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

from icoforge.errors import IcoforgeError

DEFAULT_HPC_DIR = pathlib.Path(__file__).resolve().parents[2] / "hpc"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "hpc-references",
        help="measure the ReFrame checks' references on this machine and write them for SYSTEM:PARTITION",
        description=(
            "Runs the commands of the ReFrame checks (hpc/icoforge_checks.py) that a partition with FEATURES gets, "
            "checks each as the check does (exit code, verification), and writes the medians as references for "
            "SYSTEM:PARTITION into a TOML file (other partitions and existing tolerances are kept). Run it where "
            "the checks will run, e.g. inside a job on that partition."
        ),
    )
    p.add_argument("partition", metavar="SYSTEM:PARTITION", help="where the references apply, e.g. mycluster:gpu")
    p.add_argument("--features", default="cpu", help="which checks: cpu, gpu or cpu,gpu (default cpu)")
    p.add_argument("--out", type=pathlib.Path, help="references file to write into (default hpc/references.toml)")
    p.add_argument("--repeat", type=int, default=1, help="runs of each command; the median is written (default 1)")
    p.add_argument("--only", default="", metavar="REGEX", help="only the checks whose key matches")
    p.add_argument(
        "--cache", metavar="DIR",
        help="ICOFORGE_CACHE of the commands (default: a new empty one per run: cold compiles, as a fresh job)",
    )  # fmt: skip
    p.add_argument("--logs", type=pathlib.Path, metavar="DIR", help="keep each command's output here")
    p.add_argument("--hpc-dir", type=pathlib.Path, default=DEFAULT_HPC_DIR, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_references)

    t = subparsers.add_parser(
        "hpc-trend",
        help="plot the ReFrame checks' perflogs: each performance variable run by run, with its reference",
    )
    t.add_argument("perflogs", nargs="+", type=pathlib.Path, help="perflog files or directories (searched for *.log)")
    t.add_argument("--out", type=pathlib.Path, default=pathlib.Path("icoforge-trend.png"), help="PNG to write")
    t.add_argument("--match", default="", metavar="REGEX", help="only checks whose name matches")
    t.set_defaults(func=cmd_trend)


def load_hpc(hpc_dir: pathlib.Path = DEFAULT_HPC_DIR):
    """hpc/icoforge_hpc.py of this checkout (not a package: it sits next to the ReFrame checks)."""
    path = hpc_dir / "icoforge_hpc.py"
    if not path.exists():
        raise IcoforgeError(f"{path} not found: run from an icoforge checkout")
    if (loaded := sys.modules.get("icoforge_hpc")) and pathlib.Path(loaded.__file__) == path:
        return loaded
    spec = importlib.util.spec_from_file_location("icoforge_hpc", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["icoforge_hpc"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def cmd_references(args: argparse.Namespace) -> int:
    hpc = load_hpc(args.hpc_dir)
    if not re.fullmatch(r"[\w.-]+:[\w.-]+", args.partition):
        raise IcoforgeError(f"expected SYSTEM:PARTITION, got {args.partition!r}")
    features = {f.strip() for f in args.features.split(",") if f.strip()}
    commands = [c for c in hpc.commands_for(features) if re.search(args.only, c.key)]
    if not commands:
        raise IcoforgeError(f"no checks for features {sorted(features)} matching {args.only!r}")
    out = args.out or hpc.REFERENCES
    work = pathlib.Path(tempfile.mkdtemp(prefix="icoforge-hpc-references-"))
    logs = args.logs or work
    logs.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(hpc.REPO), os.environ.get("PYTHONPATH", "")) if p),
    }
    env.pop("ICOFORGE_TEST_FAULT", None)  # references of a planted fault would be worthless

    measured: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for command in commands:
        runs = []
        for i in range(args.repeat):
            rundir = work / f"{len(measured)}-{i}"
            rundir.mkdir()
            # without --cache each run starts empty, as a fresh job: compile times are cold ones
            env["ICOFORGE_CACHE"] = str(args.cache or rundir / "icoforge-cache")
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "icoforge", *command.argv], cwd=rundir, env=env, capture_output=True, text=True
            )
            stem = re.sub(r"[^\w.-]+", "_", command.key)
            log = logs / f"{stem}-{i}.log"
            log.write_text(f"$ icoforge {' '.join(command.argv)}\n{proc.stdout}\n--- stderr\n{proc.stderr}")
            if proc.returncode != 0:
                raise IcoforgeError(f"{command.key}: exit code {proc.returncode}; output in {log}")
            try:
                runs.append(command.values(proc.stdout, rundir))
            except (ValueError, KeyError, OSError) as e:
                raise IcoforgeError(f"{e}; output in {log}") from e
            print(f"{command.key} [{i + 1}/{args.repeat}] {time.perf_counter() - t0:.0f} s: {runs[-1]}", flush=True)
        measured[command.key] = {var: statistics.median(r[var] for r in runs) for var in runs[0]}

    source = (
        f"measured by `icoforge hpc-references` on {platform.node()} ({os.cpu_count()} CPUs) "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, median of {args.repeat} run(s), "
        f"{'the cache ' + str(args.cache) if args.cache else 'an empty cache per run'}, {time.perf_counter() - started:.0f} s in all"
    )
    hpc.update_references(out, args.partition, measured, source)
    print(f"references of {len(measured)} checks for {args.partition} written to {out}")
    return 0


def read_perflogs(paths: list[pathlib.Path]) -> list[dict]:
    """Rows of the perflogs hpc/settings.py configures: the run's fields, then 6 per variable.
    (A failed run is plotted red.)"""
    files = [f for p in paths for f in (sorted(p.rglob("*.log")) if p.is_dir() else [p])]
    rows = []
    for f in files:
        for line in f.read_text().splitlines():
            fields = line.split("|")
            if len(fields) < 12 or fields[0] == "job_completion_time":  # the header
                continue
            when, name, system, partition, _, result = fields[:6]
            for i in range(6, len(fields) - 5, 6):
                var, value, unit, ref, lower, upper = fields[i : i + 6]
                try:
                    rows.append({
                        "time": datetime.datetime.fromisoformat(when), "check": name, "partition": f"{system}:{partition}", "result": result,
                        "var": var, "value": float(value), "unit": unit, "ref": float(ref),
                        "lower": _fraction(lower), "upper": _fraction(upper),
                    })  # fmt: skip
                except ValueError:  # a run that produced no value ("None")
                    continue
    return rows


def _fraction(text: str) -> float | None:
    return None if text in ("", "None", "null") else float(text)


def cmd_trend(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read_perflogs(args.perflogs) if re.search(args.match, r["check"])]
    if not rows:
        raise IcoforgeError(f"no performance values in {', '.join(map(str, args.perflogs))}")
    series: dict[tuple, list[dict]] = {}
    for r in rows:
        series.setdefault((r["partition"], r["check"], r["var"]), []).append(r)
    fig, axes = plt.subplots(len(series), 1, figsize=(9, 2.2 * len(series)), squeeze=False)
    for ax, (key, points) in zip(axes[:, 0], sorted(series.items())):
        points.sort(key=lambda r: r["time"])
        runs = range(len(points))  # run by run: evenly spaced, however irregular the runs were
        ax.plot(runs, [p["value"] for p in points], "-", color="C0")
        ax.scatter(runs, [p["value"] for p in points], c=["C3" if p["result"] == "fail" else "C0" for p in points], zorder=3)
        ax.set_xticks(list(runs), [f"{p['time']:%m-%d %H:%M}" for p in points], rotation=30, ha="right")
        last = points[-1]
        if last["ref"]:  # the current reference and the band that passes
            ax.axhline(last["ref"], color="k", ls="--", lw=1, label="reference")
            if last["upper"] is not None:
                ax.axhspan(last["ref"] * (1 + (last["lower"] or -1.0)), last["ref"] * (1 + last["upper"]), color="g", alpha=0.1)
        ax.set_title(f"{key[0]}  {key[1]}", fontsize=8)
        ax.set_ylabel(f"{key[2]} [{last['unit']}]", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"{len(series)} series ({len(rows)} values) plotted to {args.out}")
    return 0
