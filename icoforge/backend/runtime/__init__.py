"""Stage 6, runtime: compile, load and run what codegen printed.

Takes GT4Py's call (`workflow` is the GT4Py workflow: frontend, lowering, schedule and codegen in
order) and gives GT4Py's callable: the C++ module built (`build`), the CUDA/HIP module compiled
and its host plan run (`gpu`, `hip_on_cuda`, `emulate` on the CPU, `graphs`, `events`), compiles
in parallel (`compile_pool`, `precompile`), a substep's calls fused across programs (`substep`,
`compose`; the runtime reaches them only through `deferral`), and the checks of built kernels
(`host_checks`, `gpu_check`, `amd_check`). `icf_cpu.h` is the C++ target's runtime header.
"""
