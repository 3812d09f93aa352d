//===- ExternDynamicShared.cpp - dynamic shared memory as extern ----------===//
//
// attn-nvvm-extern-dynamic-shared (Passes.td): the zero-length shared
// globals through which kernels address their dynamic shared memory get
// external linkage, so that NVPTX declares them `.extern .shared` instead
// of demoting them to one-byte static variables that overlap the kernel's
// mbarriers.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNNVVMEXTERNDYNAMICSHARED
#include "attn/Conversion/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;

namespace {

struct AttnNvvmExternDynamicSharedPass
    : public mlir::attn::impl::AttnNvvmExternDynamicSharedBase<
          AttnNvvmExternDynamicSharedPass> {
  void runOnOperation() override {
    for (auto global : getOperation().getOps<LLVM::GlobalOp>()) {
      auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType());
      if (global.getAddrSpace() !=
              static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared) ||
          !array || array.getNumElements() != 0 || global.getValueOrNull() ||
          global.getInitializerBlock())
        continue;
      global.setLinkage(LLVM::Linkage::External);
      // (A declaration: no dso_local, no unnamed_addr.)
      global.setDsoLocal(false);
      global.setUnnamedAddr(LLVM::UnnamedAddr::None);
    }
  }
};

} // namespace
