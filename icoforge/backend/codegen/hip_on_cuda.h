// icoforge HIP-on-CUDA: the generated HIP module compiled for an NVIDIA GPU (NVRTC or nvcc).
// Prepended to the HIP source by icoforge.backend.hip_on_cuda; by hand: nvcc -include hip_on_cuda.h.
// A thin layer, in the spirit of HIP's own nvidia platform headers: HIP names become CUDA names,
// AMD-only kernel attributes become CUDA's. The HIP code paths of the module are compiled as
// hipcc/hiprtc compile them (ICF_HIP), the chiplet remap included: what runs is the HIP source.
#ifndef ICF_HIP_ON_CUDA_H
#define ICF_HIP_ON_CUDA_H
#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#error "hip_on_cuda.h: compile with nvcc or NVRTC"
#endif
#define ICF_HIP 1          // the module's HIP branches (the prelude sets it only for AMD)
#define ICF_HIP_ON_CUDA 1
#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif

// Kernel attributes. HIP: __attribute__((amdgpu_flat_work_group_size(MIN, MAX))) promises at most
// MAX threads per block, as CUDA's launch_bounds(MAX) (what __launch_bounds__ expands to);
// amdgpu_waves_per_eu(N) asks for N wavefronts per SIMD unit (an occupancy hint bought with
// registers), which CUDA cannot state without the block size: dropped (an empty attribute list).
#define amdgpu_flat_work_group_size(lo, hi) launch_bounds(hi)
#define amdgpu_waves_per_eu(...)
#ifndef __launch_bounds__
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#endif

// Work-item built-ins under their HIP names.
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z
#define __builtin_amdgcn_s_barrier() __syncthreads()
#define __builtin_amdgcn_wave_barrier() __syncwarp()

// Host runtime names (nvcc only: NVRTC compiles device code alone).
#if !defined(__CUDACC_RTC__)
#include <cuda_runtime.h>
typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaDeviceProp hipDeviceProp_t;
#define hipSuccess cudaSuccess
#define hipMalloc cudaMalloc
#define hipMallocAsync cudaMallocAsync
#define hipFree cudaFree
#define hipFreeAsync cudaFreeAsync
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipGetLastError cudaGetLastError
#define hipGetErrorString cudaGetErrorString
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipEventCreate cudaEventCreate
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy
#define hipLaunchKernelGGL(kernel, grid, block, shared, stream, ...) \
  kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__)
#endif
#endif  // ICF_HIP_ON_CUDA_H
