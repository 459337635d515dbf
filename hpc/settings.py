"""ReFrame site configuration for icoforge's regression checks (`hpc/icoforge_checks.py`).

Two systems: `local` (any host, CPU only: what the workstation and CI have) and `h200` (one NVIDIA
H200, as reached through the device tool; select it with `--system h200:gpu`). A site adds its
own cluster here: a partition with `features: ["gpu"]` gets the GPU checks.
"""

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
                    "environs": ["builtin"],
                    "features": ["gpu", "cuda"],
                    "max_jobs": 1,
                }
            ],
        },
        {
            "name": "local",
            "descr": "this host, CPU only",
            "hostnames": [r".*"],
            "partitions": [
                {
                    "name": "cpu",
                    "scheduler": "local",
                    "launcher": "local",
                    "environs": ["builtin"],
                    "features": ["cpu"],
                    "max_jobs": 1,
                }
            ],
        },
    ],
    "environments": [{"name": "builtin", "cc": "cc", "cxx": "c++", "ftn": ""}],
}
