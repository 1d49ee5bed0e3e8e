// The AMX tile configuration both AMX kernels load (tile_gemm_amx.cc, quant_gemm_amx.cc); include only from *_amx.cc
// files, which are compiled with the AMX flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace ferry::ops::cpu::amx {

/// The palette-1 tile configuration (Intel SDM vol. 1, 18.2): per tile its rows and bytes per row; unused tiles zero.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

/// Loads `cfg` into the calling thread's tiles (until _tile_release).
inline void load_tile_config(const TileConfig& cfg) {
  // GCC 12's _tile_loadconfig does not tell the optimiser that it reads cfg, which may then drop the stores that
  // filled it (quant_gemm_amx.cc met it: every tile unconfigured, SIGILL at the first tile instruction). The empty
  // asm reads it.
  asm volatile("" : : "m"(cfg));
  _tile_loadconfig(&cfg);
}

}  // namespace ferry::ops::cpu::amx
