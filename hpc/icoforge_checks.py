"""ReFrame regression checks of icoforge: what an HPC centre runs after every change of the
software stack (compiler, CUDA, CuPy, GT4Py, icon4py) to see that the generated code still
verifies and has not become slower.

    reframe -C hpc/settings.py -c hpc/icoforge_checks.py -r                       # this host (CPU)
    reframe -C hpc/settings.py -c hpc/icoforge_checks.py --system h200:gpu -r     # the GPU checks
    reframe -C hpc/settings.py -C site.py -c hpc/icoforge_checks.py -r            # a site's systems

Partitions with the feature `cpu` get the CPU checks, those with `gpu` the GPU checks; any
environment with the feature `icoforge` runs them. Each check runs an `icoforge` command as a user
would, with the icoforge of this tree (PYTHONPATH), and passes only if the command exits with 0
and its own verification passed: the program checks compare every output with a second backend
on fresh random inputs, the greenline compares the dycore's state after three substeps with a
fingerprint a GT4Py backend recorded on the same inputs (`hpc/icoforge_hpc.py`: FINGERPRINTS).
Performance references per system:partition come from `hpc/references.toml` and the site's files
(`-S references_file=...` or the partition's extras); a check without a reference fails, unless
`-S require_references=false` (e.g. while measuring a new system: `icoforge hpc-references`).

Per-site settings, each a check variable (`-S NAME=VALUE`, winning) or an entry of the
environment's or partition's `extras`: `icoforge_python`, `icoforge_cache` (default:
`icoforge-cache` under ReFrame's stage prefix; a job-local scratch such as `$TMPDIR/icoforge-cache`
makes every run cold), `icoforge_cpus_per_task`, and `references_file` (extras:
`icoforge_references`; both apply, the variable's files last). hpc/site_example.py shows them.

The CPU greenline compiles the granule: about 10 min cold on the 2-core dev machine (26 min at a
load of 10), about 2 min with a warm cache.
"""

import json
import os
import shlex

import icoforge_hpc as hpc  # next to this file (ReFrame puts the check's directory on sys.path)
import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, performance_function, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import PerformanceError

_verified = sn.deferrable(hpc.greenline_verified)
_values = sn.deferrable(hpc.greenline_values)


class IcoforgeCommand(rfm.RunOnlyRegressionTest):
    """Base: an `icoforge ...` command in the stage directory."""

    kind = "cpu"  # which DEFAULTS and partitions: "cpu" or "gpu"
    icoforge_python = variable(str, value="")  # "" -> environment/partition extras, else python3
    icoforge_source = variable(str, value=str(hpc.REPO))  # put first on PYTHONPATH; "" to use the installed one
    icoforge_cache = variable(str, value="")  # "" -> partition extras, else under the stage prefix
    icoforge_cpus_per_task = variable(int, value=0)  # 0 -> partition extras, processor, or unset
    references_file = variable(str, value="")  # site reference files (comma-separated) on top of hpc/references.toml
    require_references = variable(typ.Bool, value=True)  # typ.Bool: -S ...=false converts
    references_here = variable(dict, value={})  # this partition's, from the files
    valid_prog_environs = ["+icoforge"]
    maintainers = ["icoforge"]
    tags = {"icoforge"}

    @run_after("init")
    def select_partitions(self):
        self.valid_systems = [f"+{self.kind}"]
        self.tags |= {self.kind}

    def _extra(self, name, default=None):
        """A site setting: the environment's extras, then the partition's."""
        for extras in (self.current_environ.extras, self.current_partition.extras):
            if extras.get(name) not in (None, ""):
                return extras[name]
        return default

    @run_after("setup")
    def site_settings(self):
        self.executable = self.icoforge_python or self._extra("icoforge_python", "python3")
        self.env_vars["PYTHONUNBUFFERED"] = "1"
        if self.icoforge_source:
            self.env_vars["PYTHONPATH"] = f"{self.icoforge_source}${{PYTHONPATH:+:$PYTHONPATH}}"
        cache = self.icoforge_cache or self._extra("icoforge_cache")
        self.env_vars["ICOFORGE_CACHE"] = cache or os.path.join(rt.runtime().stage_prefix, "icoforge-cache")
        self.num_tasks = 1
        cpus = self.icoforge_cpus_per_task or self._extra("icoforge_cpus_per_task") or self.current_partition.processor.num_cpus
        if cpus:
            self.num_cpus_per_task = int(cpus)
            self.env_vars["OMP_NUM_THREADS"] = str(cpus)
        if self.kind == "gpu" and self.current_partition.get_resource("gpu", num_gpus_per_node=1):
            self.extra_resources = {"gpu": {"num_gpus_per_node": 1}}
        if self.kind == "gpu":  # a partition with the feature `hip` runs icoforge-hip (before load_references:
            self.backend = hpc.gpu_backend(self.current_partition.features, self.backend)  # its key names it)
        if self._extra("icoforge_schedule"):  # a schedule (JSON or file) for the GPU backends: ICOFORGE_SCHEDULE
            self.env_vars["ICOFORGE_SCHEDULE"] = shlex.quote(self._extra("icoforge_schedule"))  # JSON: one word

    @run_after("setup")
    def load_references(self):
        files = hpc.split_paths(self.references_file)
        site = self._extra("icoforge_references")
        if site:
            files = hpc.split_paths(site) + files  # -S files override the partition's
        refs = hpc.load_references(files)
        partition = self.current_partition.fullname
        self.references_here = hpc.reframe_reference(refs, partition, self.reference_key())
        self.reference = {partition: self.references_here}

    @run_before("performance")
    def references_present(self):
        partition = self.current_partition.fullname
        missing = set(self.perf_variables) - set(self.references_here)
        if missing and self.require_references and not self.is_dry_run():
            raise PerformanceError(
                f"no reference for {', '.join(sorted(missing))} of {self.reference_key()!r} on {partition}: "
                "measure them with `icoforge hpc-references` (README), or run with -S require_references=false"
            )

    def reference_key(self):
        raise NotImplementedError

    def exited_cleanly(self):
        return sn.all([
            sn.assert_eq(self.job.exitcode, 0, msg="icoforge exited with {0}"),
            sn.assert_not_found(r"Traceback", self.stderr),
        ])  # fmt: skip


@rfm.simple_test
class IcoforgeProgramCheck(IcoforgeCommand):
    """One program with icoforge, verified against another backend on fresh random inputs."""

    program = parameter(hpc.PROGRAMS)
    grid = variable(str, value=hpc.DEFAULTS["cpu"]["program"]["grid"])
    levels = variable(int, value=hpc.DEFAULTS["cpu"]["program"]["levels"])
    backend = variable(str, value=hpc.DEFAULTS["cpu"]["program"]["backend"])
    reference_backend = variable(str, value=hpc.DEFAULTS["cpu"]["program"]["reference_backend"])
    descr = "icoforge run: verified against a second backend, median time per call, compile time"

    def reference_key(self):
        return hpc.program_key(self.program, self.grid, self.levels, self.backend)

    @run_before("run")
    def command(self):
        self.executable_opts = [
            "-m", "icoforge",
            *hpc.program_argv(self.program, self.grid, self.levels, self.backend, self.reference_backend),
        ]  # fmt: skip

    @sanity_function
    def verified(self):
        return sn.all([
            self.exited_cleanly(),
            sn.assert_found(hpc.PROGRAM_VERIFIED, self.stdout),
            sn.assert_not_found(hpc.PROGRAM_FAILED, self.stdout),
        ])  # fmt: skip

    def _row(self, column):
        return sn.extractsingle(hpc.program_row_pattern(self.backend), self.stdout, column, float)

    @performance_function("ms")
    def median_per_call(self):
        return self._row(2)

    @performance_function("s")
    def compile_time(self):
        return self._row(1)


@rfm.simple_test
class IcoforgeGpuProgramCheck(IcoforgeProgramCheck):
    """The program checks on a GPU: icoforge-cuda verified against the CPU target."""

    kind = "gpu"
    grid = hpc.DEFAULTS["gpu"]["program"]["grid"]
    levels = hpc.DEFAULTS["gpu"]["program"]["levels"]
    backend = hpc.DEFAULTS["gpu"]["program"]["backend"]
    reference_backend = hpc.DEFAULTS["gpu"]["program"]["reference_backend"]


@rfm.simple_test
class IcoforgeGreenlineCheck(IcoforgeCommand):
    """The dycore step (icon4py's SolveNonhydro.time_step) with icoforge: the state after the
    first, a middle and the last substep is compared with the fingerprint a GT4Py backend recorded
    on the same inputs (`fingerprint`, default from hpc/icoforge_hpc.py's FINGERPRINTS)."""

    grid = variable(str, value=hpc.DEFAULTS["cpu"]["greenline"]["grid"])
    levels = variable(int, value=hpc.DEFAULTS["cpu"]["greenline"]["levels"])
    backend = variable(str, value=hpc.DEFAULTS["cpu"]["greenline"]["backend"])
    fingerprint = variable(str, value="")  # "" -> the recorded one for grid/levels
    descr = "icoforge greenline: dycore step against a recorded fingerprint, step and setup time"
    time_limit = "1h"  # a cold compile on a loaded CPU node

    def reference_key(self):
        return hpc.greenline_key(self.grid, self.levels, self.backend)

    @run_before("run")
    def command(self):
        fingerprint = self.fingerprint or hpc.fingerprint_for(self.grid, self.levels)
        if not fingerprint:  # a check that verifies nothing is no check
            raise ValueError(f"no recorded fingerprint for {self.grid}/{self.levels}: set -S fingerprint=FILE")
        self.executable_opts = ["-m", "icoforge", *hpc.greenline_argv(self.grid, self.levels, self.backend, fingerprint, "greenline.json")]

    @sn.deferrable
    def _report(self):  # read when the sanity/performance expressions are evaluated
        with open(os.path.join(self.stagedir, "greenline.json")) as f:
            return json.load(f)

    @sanity_function
    def verified(self):
        return sn.all([
            self.exited_cleanly(),
            sn.assert_true(os.path.exists(os.path.join(self.stagedir, "greenline.json")), msg="no greenline.json"),
            sn.assert_true(
                _verified(self._report(), self.backend),
                msg="no passing comparison with the recorded fingerprint",
            ),
        ])  # fmt: skip

    @performance_function("ms")
    def dycore_step(self):
        return _values(self._report())["dycore_step"]

    @performance_function("ms")
    def first_substep(self):
        return _values(self._report())["first_substep"]

    @performance_function("s")
    def setup_time(self):
        return _values(self._report())["setup_time"]


@rfm.simple_test
class IcoforgeGpuGreenlineCheck(IcoforgeGreenlineCheck):
    """The dycore step with icoforge's CUDA target, against the same kind of fingerprint."""

    kind = "gpu"
    time_limit = "30m"  # fresh node: R2B6 grid, static fields, cold compile (about 5 min on the H200)
    grid = hpc.DEFAULTS["gpu"]["greenline"]["grid"]
    levels = hpc.DEFAULTS["gpu"]["greenline"]["levels"]
    backend = hpc.DEFAULTS["gpu"]["greenline"]["backend"]
