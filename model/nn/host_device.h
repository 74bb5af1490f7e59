// SSAVIZ_HOST_DEVICE: a function both a CUDA kernel and the CPU run (temperature_rows.h, tf32.h);
// nothing where CUDA is absent.
#pragma once

#ifdef __CUDACC__
#define SSAVIZ_HOST_DEVICE __host__ __device__
#else
#define SSAVIZ_HOST_DEVICE
#endif
