//===- RegisterTargets.cpp - the GPU backends built in --------------------===//

#include "attn/Conversion/AttnToGPU/Targets.h"

void mlir::attn::registerAttnGpuTargets() {
#ifdef ATTN_ENABLE_NVVM
  registerNvvmTarget();
#endif
#ifdef ATTN_ENABLE_ROCDL
  registerRocdlTarget();
#endif
}
