"""`icoforge greenline --ranks N`: the dycore step decomposed over N MPI ranks (granule/ranks.py).

Outside MPI, `--ranks N` starts `mpirun -n N` with this same command line (one process per rank;
`--mpirun` names another launcher, e.g. `srun`); inside it (mpirun sets OMPI_COMM_WORLD_SIZE,
MPICH/Slurm PMI_SIZE) every rank runs the decomposed step. `mpirun -n N python -m icoforge
greenline ...` without `--ranks` works too. Only rank 0 prints.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

from icoforge.cli import common_args
from icoforge.errors import IcoforgeError

WORLD_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from icoforge.granule.decompose import DECOMPOSERS
    from icoforge.granule.halo_exchange import EXCHANGES

    g = p.add_argument_group("ranks (MPI; issue 23)")
    g.add_argument(
        "--ranks", type=int, metavar="N",
        help="split the grid into N MPI ranks (icon4py's decomposition and halo exchanges); starts mpirun unless "
        "already under it. --verify then compares N ranks with one rank (owned points, rtol default 1e-12)",
    )  # fmt: skip
    g.add_argument("--exchange", choices=EXCHANGES, default="auto",
                   help="halo exchange: ghex (icon4py's, needs the ghex package), mpi (mpi4py; GPU buffers staged "
                   "through the host), auto: ghex if installed (default)")  # fmt: skip
    g.add_argument("--decomposer", choices=DECOMPOSERS, default="metis",
                   help="cell partition: metis (icon4py's MetisDecomposer, pymetis; bfs without it) or bfs")  # fmt: skip
    g.add_argument("--compile-in-turn", action="store_true",
                   help="the ranks build their programs one after another, each with all cores' compile workers, "
                   "then run together (N ranks compiling at once take far longer than N times one rank: "
                   "dace_gpu on 4 ranks)")  # fmt: skip
    g.add_argument("--mpirun", default="mpirun", help="launcher command for --ranks outside MPI (default mpirun)")
    # set by the launcher when its own output is not a terminal: Open MPI gives each rank a pty,
    # so rank 0 would draw a live progress bar into a log file
    g.add_argument("--progress-lines", action="store_true", help=argparse.SUPPRESS)


def world_size() -> int | None:
    """The number of ranks when this process was started by an MPI launcher, else None."""
    for name in WORLD_SIZE_VARIABLES:
        if (value := os.environ.get(name, "")).isdigit():
            return int(value)
    return None


# greenline options of one process that a decomposed run does not take, with their "not given"
# values: refused by name rather than ignored (a --ranks run used to drop them without a word)
ONE_PROCESS_ONLY = {
    "cold": ("--cold", False), "substep_fusion": ("--substep-fusion", False), "gpu_lock": ("--gpu-lock", None),
    "save_reference": ("--save-reference", None), "save_fields": ("--save-fields", None), "reference_file": ("--reference", None),
    "floors_steps": ("--floors-steps", 0), "profile_steps": ("--profile-steps", 1), "markdown": ("--markdown", None),
    "latest": ("--latest", None), "floors": ("--floors", None), "commit": ("--commit", None),
    "timing_rounds": ("--timing-rounds", 1),
}  # fmt: skip


def _given(args: argparse.Namespace, options: dict[str, tuple[str, object]]) -> list[str]:
    """The flags of `options` (name -> (flag, value when not given)) that `args` sets."""
    return [flag for name, (flag, unset) in options.items() if getattr(args, name, unset) != unset]


def refuse_one_process_options(args: argparse.Namespace) -> None:
    if given := _given(args, ONE_PROCESS_ONLY):
        raise IcoforgeError(f"--ranks does not take {', '.join(given)} (options of one process's greenline)")


# and the other way round: options of a decomposed run that one process would drop
RANKS_ONLY = {
    "exchange": ("--exchange", "auto"), "decomposer": ("--decomposer", "metis"),
    "compile_in_turn": ("--compile-in-turn", False), "mpirun": ("--mpirun", "mpirun"),
}  # fmt: skip


def refuse_ranks_options(args: argparse.Namespace) -> None:
    if given := _given(args, RANKS_ONLY):
        raise IcoforgeError(f"{', '.join(given)} need --ranks N (options of a run decomposed over MPI ranks)")


def wanted(args: argparse.Namespace) -> bool:
    return args.ranks is not None or (world_size() or 1) > 1


def launch_command(args: argparse.Namespace, argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """mpirun -n N [root and oversubscription flags] python -m icoforge ARGV, and its environment."""
    launcher = shlex.split(args.mpirun)
    if not launcher or shutil.which(launcher[0]) is None:
        raise IcoforgeError(
            f"--ranks {args.ranks}: launcher {args.mpirun!r} not found; install Open MPI (Debian: apt-get install "
            "openmpi-bin libopenmpi-dev) or name one with --mpirun"
        )
    cmd = [*launcher, "-n", str(args.ranks)]
    env = dict(os.environ)
    if pathlib.Path(launcher[0]).name in ("mpirun", "mpiexec") and _is_open_mpi(launcher[0]):
        # one core per rank need not exist (the 2-core CI machine runs 4 ranks); no pinning, so a
        # rank's OpenMP threads are not all bound to one core
        cmd += ["--oversubscribe", "--bind-to", "none"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    cores_per_rank = str(max(1, (os.cpu_count() or 1) // args.ranks))
    env.setdefault("OMP_NUM_THREADS", cores_per_rank)
    # every rank compiles its own programs in GT4Py's process pool, which takes min(cores, 32)
    # workers by default: 4 ranks on the 16-core H200 host started 64 of them (session 11: the
    # 4-rank construct took 88 s against 22 s for one rank, and was still compiling at the deadline).
    # With --compile-in-turn one rank compiles at a time, with all the cores
    env.setdefault("GT4PY_BUILD_JOBS", str(os.cpu_count() or 1) if args.compile_in_turn else cores_per_rank)
    return [*cmd, sys.executable, "-m", "icoforge", *argv], env


def _is_open_mpi(launcher: str) -> bool:
    try:
        out = subprocess.run([launcher, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in out or "OpenRTE" in out


def run(args: argparse.Namespace) -> int:
    refuse_one_process_options(args)
    size = world_size()
    if size is None:  # not started by MPI: start mpirun with this command line
        if args.ranks is None or args.ranks < 1:
            raise IcoforgeError("--ranks must be a positive number of ranks")
        if args.cli_argv is None:
            raise IcoforgeError("--ranks outside MPI needs the command line (run `icoforge greenline --ranks N ...`)")
        from icoforge.granule.backends import check_name

        for name in (args.backend, *args.compare, args.factory_backend):
            check_name(name)  # a typo fails here, not in N processes after mpirun started
        argv = list(args.cli_argv) + ([] if sys.stdout.isatty() else ["--progress-lines"])
        cmd, env = launch_command(args, argv)
        print("icoforge: " + shlex.join(cmd), file=sys.stderr, flush=True)
        return subprocess.call(cmd, env=env)
    if args.ranks is not None and args.ranks != size:
        raise IcoforgeError(f"--ranks {args.ranks}, but MPI started {size} ranks (mpirun -n {size})")
    return _run_rank(args)


def _run_rank(args: argparse.Namespace) -> int:
    from icoforge.console import StepProgress, make_console
    from icoforge.granule import decompose, ranks

    local = decompose.local_rank_from_environment()
    if any(b for b in (args.backend, *args.compare) if "cuda" in b or "gpu" in b or "hip" in b):
        if local is not None:  # one GPU per rank, chosen before anything allocates on a device
            decompose.select_device(local)
    props = decompose.mpi_world()
    opts = common_args.options(
        ranks.RanksOptions, args, backends=tuple(dict.fromkeys([args.backend, *args.compare])),
        rtol=ranks.DEFAULT_RTOL if args.rtol is None else args.rtol,
    )  # fmt: skip
    console = make_console(stderr=args.json == "-", wide=args.wide)
    if args.progress_lines:
        from icoforge.console import QuietConsole

        console = QuietConsole(stderr=args.json == "-", force_terminal=False, width=200 if args.wide else 120)
    try:
        if props.rank == 0:
            with StepProgress(console) as step:
                report = ranks.run_ranks(opts, props, progress=step, log=step.log)
        else:
            report = ranks.run_ranks(opts, props)
    except BaseException as e:  # one rank failing must not leave the others waiting forever
        print(f"icoforge: rank {props.rank}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        if props.comm_size > 1:
            if not isinstance(e, IcoforgeError):  # a bug, not bad input: where it happened
                import traceback

                traceback.print_exc()
            props.comm.Abort(1)
        raise
    if report is None:
        return 0
    if args.json == "-":
        json.dump(report, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for line in ranks.report_lines(report):
            console.print(line, highlight=False, markup=False)
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
            console.print(f"report written to {args.json}")
    return 0 if ranks.passed(report) else 1
