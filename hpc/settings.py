"""ReFrame configuration for icoforge's regression checks (`hpc/icoforge_checks.py`).

Systems: `h200` (one NVIDIA H200 as reached through the device tool; never detected by host
name: select it with `--system h200:gpu`) and `local` (any host, CPU only: the workstation, CI).

A site keeps its own file (start from `hpc/site_example.py`) and chains it AFTER this one:

    reframe -C hpc/settings.py -C /path/site.py -c hpc/icoforge_checks.py -r

ReFrame tries the systems of later files first, so the site's `hostnames` win and `local` only
catches hosts no file names. Partitions get the checks by their features (`cpu`, `gpu`), any
environment with the feature `icoforge` runs them (so no `builtin` is redefined here).

Perflogs: one file per check and partition under `<prefix>/perflogs/SYSTEM/PARTITION/`
(`--perflogdir` moves them), a header line and one `|`-separated line per performance variable
and run, appended run after run: `icoforge hpc-trend PERFLOGDIR` plots them.
"""

_ENVIRONMENT = {
    "name": "icoforge",
    "features": ["icoforge"],
    # the Python that has icoforge's dependencies (overridden by -S icoforge_python=...)
    "extras": {"icoforge_python": "python3"},
}

PERFLOG_FIELDS = (
    "%(check_job_completion_time)s|%(check_display_name)s|%(check_system)s|%(check_partition)s|"
    "%(check_environ)s|%(check_result)s|"
)
PERFVAR_FIELDS = "%(check_perf_var)s|%(check_perf_value)s|%(check_perf_unit)s|%(check_perf_ref)s|%(check_perf_lower_thres)s|%(check_perf_upper_thres)s|"

site_configuration = {
    "systems": [
        {
            "name": "h200",
            "descr": "one NVIDIA H200 (16 CPU cores), offline; select with --system h200:gpu",
            "hostnames": [r"^never-matched-by-hostname$"],
            "partitions": [
                {
                    "name": "gpu",
                    "scheduler": "local",
                    "launcher": "local",
                    "environs": ["icoforge"],
                    "features": ["gpu", "cuda"],
                    "max_jobs": 1,
                    "extras": {"icoforge_cache": "/tmp/icfcache"},  # what scripts/device/setup.sh uses
                }
            ],
        },
        {
            "name": "local",
            "descr": "this host, CPU only (catches any host no later configuration file names)",
            "hostnames": [r".*"],
            "partitions": [
                {
                    "name": "cpu",
                    "scheduler": "local",
                    "launcher": "local",
                    "environs": ["icoforge"],
                    "features": ["cpu"],
                    "max_jobs": 1,  # timings of two checks at once would disturb each other
                }
            ],
        },
    ],
    "environments": [_ENVIRONMENT],
    "logging": [
        {
            "handlers_perflog": [
                {
                    "type": "filelog",
                    "prefix": "%(check_system)s/%(check_partition)s",
                    "level": "info",
                    "format": PERFLOG_FIELDS + "%(check_perfvalues)s",
                    "format_perfvars": PERFVAR_FIELDS,
                    "datefmt": "%Y-%m-%dT%H:%M:%S%z",
                    "append": True,
                }
            ]
        }
    ],
}
