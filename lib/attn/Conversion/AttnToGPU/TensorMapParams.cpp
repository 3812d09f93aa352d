//===- TensorMapParams.cpp - tensor maps as by-value kernel params --------===//
//
// attn-nvvm-tensor-map-params (Passes.td): the leading tensor-map
// parameters of a lowered TMA kernel become 128-byte grid-constant
// by-value parameters. (convert-gpu-to-nvvm does not carry argument
// attributes such as llvm.byval over from the gpu.func, so they are set on
// the llvm.func it produces.)
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/GpuTarget.h"
#include "attn/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNNVVMTENSORMAPPARAMS
#include "attn/Conversion/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;

namespace {

/// The size of a CUtensorMap (cuda.h: 128 bytes, 64-byte aligned).
constexpr int64_t kTensorMapBytes = 128;
constexpr int64_t kTensorMapAlign = 64;

struct AttnNvvmTensorMapParamsPass
    : public mlir::attn::impl::AttnNvvmTensorMapParamsBase<
          AttnNvvmTensorMapParamsPass> {
  void runOnOperation() override {
    LLVM::LLVMFuncOp func = getOperation();
    auto count = func->getAttrOfType<IntegerAttr>(kTensorMapParamsAttr);
    if (!count)
      return;
    MLIRContext *ctx = &getContext();
    if (count.getInt() > func.getNumArguments()) {
      func.emitOpError() << kTensorMapParamsAttr << " = " << count.getInt()
                         << " exceeds the " << func.getNumArguments()
                         << " parameters";
      return signalPassFailure();
    }
    auto mapType =
        LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), kTensorMapBytes);
    for (unsigned i = 0; i < count.getInt(); ++i) {
      if (!isa<LLVM::LLVMPointerType>(func.getArgument(i).getType())) {
        func.emitOpError() << "tensor-map parameter " << i
                           << " is not a pointer";
        return signalPassFailure();
      }
      func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                      TypeAttr::get(mapType));
      func.setArgAttr(
          i, LLVM::LLVMDialect::getAlignAttrName(),
          IntegerAttr::get(IntegerType::get(ctx, 64), kTensorMapAlign));
      func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                      UnitAttr::get(ctx));
    }
  }
};

} // namespace
