"""A site's ReFrame configuration for icoforge's checks: copy it, edit the marked lines, and chain it
after ours (ReFrame tries the systems of later files first):

    reframe -C hpc/settings.py -C site.py -c hpc/icoforge_checks.py -r

It defines a Slurm cluster `mycluster` with a GPU and a CPU partition, and an AMD MI300A cluster
`mi300a` with the APU in its two partition modes (docs/mi300a.md): `spx` (one APU = one GPU: 228
CUs in 6 XCDs, 24 CPU cores) and `cpx` (each XCD its own GPU: 38 CUs, 4 CPU cores). What the
checks take from it: `features` (`gpu`/`cpu`: which checks run), an environment with the feature
`icoforge` (the Python with icoforge's dependencies, through `modules` or `extras`), and in
`extras`: the cache directory (`$TMPDIR` is expanded in the job: job-local scratch), the CPUs per
task, the site's reference file (written by `icoforge hpc-references`), and on GPU partitions
`icoforge_schedule` (a schedule, JSON or a file, exported as ICOFORGE_SCHEDULE). A GPU partition
with the feature `hip` runs the GPU checks with icoforge-hip instead of icoforge-cuda.
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
        },
        {
            "name": "mi300a",
            "descr": "example Slurm cluster of AMD MI300A nodes (4 APUs a node), both partition modes",
            "hostnames": [r"^mi300a-login\d+", r"^mi300a-nid\d+"],  # EDIT: the login and compute node names
            "modules_system": "lmod",
            "partitions": [
                {
                    "name": "spx",
                    "descr": "one MI300A in SPX mode: one GPU of 228 CUs (6 XCDs)",
                    "scheduler": "slurm",
                    "launcher": "srun",
                    "access": ["--partition=mi300a", "--constraint=spx", "--account=myproject"],  # EDIT
                    "time_limit": "30m",
                    "max_jobs": 4,
                    "environs": ["icoforge-rocm"],
                    "features": ["gpu", "hip"],
                    "resources": [{"name": "gpu", "options": ["--gpus-per-task={num_gpus_per_node}"]}],
                    "extras": {
                        # the chiplet remap over the APU's 6 XCDs; drop it to run the HIP default (256x1,
                        # stride sets: a "default" given takes the knobs it does not name from the Schedule's)
                        "icoforge_schedule": '{"default": {"block": [256, 1], "stride_sets": true, "chiplet_remap": true, "chiplets": 6}}',
                        "icoforge_cache": "$TMPDIR/icoforge-cache",
                        "icoforge_cpus_per_task": 24,
                        "icoforge_references": "/project/ci/icoforge-references.toml",  # EDIT
                    },
                },
                {
                    "name": "cpx",
                    "descr": "one XCD of an MI300A in CPX mode: one GPU of 38 CUs (24 GPUs a node)",
                    "scheduler": "slurm",
                    "launcher": "srun",
                    "access": ["--partition=mi300a", "--constraint=cpx", "--account=myproject"],  # EDIT
                    "time_limit": "1h",  # a sixth of the APU: R2B6/80 takes longer than in SPX
                    "max_jobs": 24,
                    "environs": ["icoforge-rocm"],
                    "features": ["gpu", "hip"],
                    "resources": [{"name": "gpu", "options": ["--gpus-per-task={num_gpus_per_node}"]}],
                    "extras": {
                        # one XCD: no chiplet remap (the HIP default)
                        "icoforge_cache": "$TMPDIR/icoforge-cache",
                        "icoforge_cpus_per_task": 4,
                        "icoforge_references": "/project/ci/icoforge-references.toml",  # EDIT
                    },
                },
            ],
        },
    ],
    "environments": [
        {
            "name": "icoforge-gnu",
            "target_systems": ["mycluster"],
            "features": ["icoforge"],
            "modules": ["gcc/13", "cuda/12.6", "python/3.12"],  # EDIT
            "extras": {"icoforge_python": "/project/ci/venv/bin/python"},  # EDIT: pip install -e icoforge
        },
        {
            "name": "icoforge-rocm",
            "target_systems": ["mi300a"],
            "features": ["icoforge"],
            "modules": ["rocm/6.2", "python/3.12"],  # EDIT: ROCm 6+ (gfx942), CuPy built for it in the venv
            "extras": {"icoforge_python": "/project/ci/venv-rocm/bin/python"},  # EDIT
        },
    ],
}
