// AMP_VECTOR_CLONES: how the CPU kernels' per-element loops use the vector unit the CPU has.
#pragma once

// A loop worth a wider vector unit is compiled three times and the variant the CPU runs is picked
// when the program loads: AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and the portable baseline. Each
// element gets the same operations in the same order on every variant (the build turns FP
// contraction off), so the results are the same bits; only per-element loops use it.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define AMP_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define AMP_VECTOR_CLONES
#endif
