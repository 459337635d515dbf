"""Stage 5, codegen: the printers.

Takes a scheduled `ir.ProgramIR` (and its `KernelLaunch`es) and gives source text: the C++/OpenMP
module (`cpp`), the CUDA/HIP module (`cuda`, `device`), and the Python host plan that launches its
kernels (`host`); `common` is what they share. `hip_on_cuda.h` maps the HIP API onto CUDA.
"""
