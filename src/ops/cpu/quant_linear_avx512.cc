// AVX-512 VNNI quantized GEMV: quant_simd.h with the integer dot product as one vpdpbusd (256-bit vectors, so the
// core keeps its full clock and the loops stay those of the AVX2 build) and eight activation rows per decoded
// weight group (the 32 vector registers hold their accumulators). Activations are quantized by the AVX2 code (same
// bytes on every ISA).
#define FERRY_QUANT_NS avx512
#define FERRY_QUANT_VNNI 1
#define FERRY_QUANT_MAX_ROWS 8
#include "quant_simd.h"
