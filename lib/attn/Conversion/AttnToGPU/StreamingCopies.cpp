//===- StreamingCopies.cpp - cp.async with an L2 evict-first policy -------===//
//
// attn-nvvm-streaming-copies (Passes.td): the 16-byte cp.async copies of a
// kernel marked attn.streaming_copies become PTX's hinted form, with the
// evict-first policy made once at the kernel's entry.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/GpuTarget.h"
#include "attn/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNNVVMSTREAMINGCOPIES
#include "attn/Conversion/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;

namespace {

Value inlineAsm(OpBuilder &b, Location loc, Type result, ValueRange operands,
                StringRef text, StringRef constraints, bool sideEffects) {
  auto op = LLVM::InlineAsmOp::create(
      b, loc, result, operands, text, constraints, sideEffects,
      /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr(), ArrayAttr());
  return result ? op.getRes() : Value();
}

struct AttnNvvmStreamingCopiesPass
    : public mlir::attn::impl::AttnNvvmStreamingCopiesBase<
          AttnNvvmStreamingCopiesPass> {
  void runOnOperation() override {
    LLVM::LLVMFuncOp func = getOperation();
    if (!func->hasAttr(kStreamingCopiesAttr) || func.isExternal())
      return;
    SmallVector<NVVM::CpAsyncOp> copies;
    func.walk([&](NVVM::CpAsyncOp op) {
      if (op.getModifier() == NVVM::LoadCacheModifierKind::CG &&
          op.getSize() == 16)
        copies.push_back(op);
    });
    if (copies.empty())
      return;
    OpBuilder b(func.getBody());
    Location loc = func.getLoc();
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    // (No side effects: one policy for the kernel, wherever LLVM puts it.)
    Value policy = inlineAsm(
        b, loc, i64, {}, "createpolicy.fractional.L2::evict_first.b64 $0, 1.0;",
        "=l", /*sideEffects=*/false);
    for (NVVM::CpAsyncOp op : copies) {
      b.setInsertionPoint(op);
      Location at = op.getLoc();
      Value dst = LLVM::PtrToIntOp::create(b, at, i32, op.getDst());
      Value src = LLVM::PtrToIntOp::create(b, at, i64, op.getSrc());
      // (Without a source size the copy is whole.)
      Value size = op.getCpSize();
      if (!size)
        size = LLVM::ConstantOp::create(b, at, i32, b.getI32IntegerAttr(16));
      // The shared address through a shuffle of the active lanes (each
      // its own): ptxas then keeps it in one register (see Passes.td).
      inlineAsm(b, at, Type(), {dst, src, size, policy},
                "{\n.reg .b32 m, l, a;\nactivemask.b32 m;\n"
                "mov.u32 l, %laneid;\n"
                "shfl.sync.idx.b32 a, $0, l, 0x1f, m;\n"
                "cp.async.cg.shared.global.L2::cache_hint [a], [$1], 16, $2, "
                "$3;\n}",
                "r,l,r,l,~{memory}", /*sideEffects=*/true);
      op.erase();
    }
  }
};

} // namespace
