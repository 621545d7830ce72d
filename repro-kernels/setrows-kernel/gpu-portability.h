// One source for CUDA and HIP: the few runtime names the set-rows replica uses, mapped onto
// whichever toolchain compiles it (hipcc defines __HIPCC__; nvcc defines __CUDACC__).
#pragma once

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuErrorOutOfMemory hipErrorOutOfMemory
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpy hipMemcpy
#define gpuMemset hipMemset
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuDeviceProp hipDeviceProp_t
#define gpuGetDeviceCount hipGetDeviceCount
#define GPU_API_NAME "hip"
#define GPU_ERROR_PREFIX "hipError"
#else
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuErrorOutOfMemory cudaErrorMemoryAllocation
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpy cudaMemcpy
#define gpuMemset cudaMemset
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuDeviceProp cudaDeviceProp
#define gpuGetDeviceCount cudaGetDeviceCount
#define GPU_API_NAME "cuda"
#define GPU_ERROR_PREFIX "cudaError"
#endif

// The wave (warp) size the upstream build forces with -DDFLASH_WAVE_SIZE=32 on gfx1151.
#ifndef DFLASH_WAVE_SIZE
#define DFLASH_WAVE_SIZE 32
#endif
static_assert(DFLASH_WAVE_SIZE == 32 || DFLASH_WAVE_SIZE == 64, "DFLASH_WAVE_SIZE must be 32 or 64");
