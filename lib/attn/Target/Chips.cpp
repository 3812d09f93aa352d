//===- Chips.cpp - the GPU chips attn-mlir targets ------------------------===//

#include "attn/Target/Chips.h"

using namespace mlir;
using namespace mlir::attn;

NvidiaChip NvidiaChip::parse(StringRef chip) {
  NvidiaChip c;
  unsigned sm = 0;
  if (chip.consume_front("sm_")) {
    bool archSpecific = chip.consume_back("a");
    if (chip.getAsInteger(10, sm))
      sm = 0;
    c.wgmma = sm == 90 && archSpecific;
  }
  c.fp8 = sm >= 89;
  return c;
}

std::optional<AmdChip> AmdChip::parse(StringRef chip) {
  FailureOr<amdgpu::Chipset> parsed = amdgpu::Chipset::parse(chip);
  if (failed(parsed))
    return std::nullopt;
  AmdChip c;
  c.chipset = *parsed;
  if (c.chipset == amdgpu::Chipset(9, 0, 0xa) ||
      c.chipset == amdgpu::Chipset(9, 4, 2))
    return c;
  if (c.chipset == amdgpu::Chipset(11, 0, 0)) {
    c.waveSize = 32;
    c.wmma = true;
    return c;
  }
  return std::nullopt;
}
