//===- Chips.h - the GPU chips attn-mlir targets ----------------*- C++ -*-===//
//
// One model per vendor of what a chip offers the programs, parsed once from
// the chip name and used by attn-plan, convert-attn-to-gpu and the
// pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TARGET_CHIPS_H
#define ATTN_TARGET_CHIPS_H

#include "mlir/Dialect/AMDGPU/Utils/Chipset.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mlir::attn {

/// What an NVIDIA chip offers the warp programs and the PTX they need.
struct NvidiaChip {
  bool wgmma = false; // warpgroup MMAs (sm_90a)
  bool fp8 = false;   // fp8 mma.sync shapes, cvt of fp8 pairs (sm_89 and up)
  /// From a chip name: sm_XY[a].
  static NvidiaChip parse(llvm::StringRef chip);
  /// The PTX ISA feature the programs need: fp8 mma.sync needs 8.4.
  llvm::StringRef ptxFeatures() const { return fp8 ? "+ptx84" : "+ptx80"; }
};

/// What an AMD chip offers the wave programs: CDNA (gfx90a, gfx942: wave64
/// MFMA) or RDNA3 (gfx1100: wave32 WMMA), from upstream's chipset parser.
struct AmdChip {
  amdgpu::Chipset chipset;
  int64_t waveSize = 64; // CDNA: 64; RDNA3: 32
  bool wmma = false;     // RDNA3 WMMA instead of CDNA MFMA
  /// gfx90a, gfx942 or gfx1100; nullopt for any other chip.
  static std::optional<AmdChip> parse(llvm::StringRef chip);
  /// The chips parse() accepts, for diagnostics.
  static constexpr llvm::StringLiteral kSupported = "gfx90a, gfx942 or gfx1100";
};

} // namespace mlir::attn

#endif // ATTN_TARGET_CHIPS_H
