"""A site's ReFrame configuration for icoforge's checks: copy it, edit the marked lines, and chain it
after ours (ReFrame tries the systems of later files first):

    reframe -C hpc/settings.py -C site.py -c hpc/icoforge_checks.py -r

It defines a Slurm cluster `mycluster` with a GPU and a CPU partition. What the checks take from
it: `features` (`gpu`/`cpu`: which checks run), an environment with the feature `icoforge` (the
Python with icoforge's dependencies, through `modules` or `extras`), and in `extras`: the cache
directory (`$TMPDIR` is expanded in the job: job-local scratch), the CPUs per task, and the
site's reference file (written by `icoforge hpc-references`).
"""

site_configuration = {
    "systems": [
        {
            "name": "mycluster",
            "descr": "example Slurm cluster",
            "hostnames": [r"^mycluster-login\d+", r"^nid\d+"],  # EDIT: the login and compute node names
            "modules_system": "lmod",
            "partitions": [
                {
                    "name": "gpu",
                    "descr": "one GPU of a node",
                    "scheduler": "slurm",
                    "launcher": "srun",
                    "access": ["--partition=gpu", "--account=myproject"],  # EDIT
                    "time_limit": "30m",
                    "max_jobs": 4,
                    "environs": ["icoforge-gnu"],
                    "features": ["gpu", "cuda"],
                    "resources": [{"name": "gpu", "options": ["--gres=gpu:{num_gpus_per_node}"]}],
                    "extras": {
                        "icoforge_cache": "$TMPDIR/icoforge-cache",  # job-local: every job compiles cold
                        "icoforge_cpus_per_task": 16,
                        "icoforge_references": "/project/ci/icoforge-references.toml",  # EDIT
                    },
                },
                {
                    "name": "cpu",
                    "descr": "one node's CPUs",
                    "scheduler": "slurm",
                    "launcher": "srun",
                    "access": ["--partition=normal", "--account=myproject", "--exclusive"],  # EDIT
                    "time_limit": "30m",
                    "max_jobs": 4,
                    "environs": ["icoforge-gnu"],
                    "features": ["cpu"],
                    "extras": {
                        "icoforge_cache": "/scratch/$USER/icoforge-cache",  # shared: warm compiles
                        "icoforge_cpus_per_task": 64,
                        "icoforge_references": "/project/ci/icoforge-references.toml",  # EDIT
                    },
                },
            ],
        }
    ],
    "environments": [
        {
            "name": "icoforge-gnu",
            "target_systems": ["mycluster"],
            "features": ["icoforge"],
            "modules": ["gcc/13", "cuda/12.6", "python/3.12"],  # EDIT
            "extras": {"icoforge_python": "/project/ci/venv/bin/python"},  # EDIT: pip install -e icoforge
        }
    ],
}
