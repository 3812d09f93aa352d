//===- AttnKernelVisitor.h - dispatch over the kernel ops -------*- C++ -*-===//
//
// AttnKernelOpInterface::accept calls the overload for the concrete op, so a
// lowering implements one method per kernel op and never tests op types.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_IR_ATTNKERNELVISITOR_H
#define ATTN_IR_ATTNKERNELVISITOR_H

namespace mlir::attn {

class PrefixPrefillOp;
class UnifiedOp;
class FlashOp;
class BlockSparseOp;

class AttnKernelVisitor {
public:
  virtual ~AttnKernelVisitor() = default;
  virtual void visit(PrefixPrefillOp op) = 0;
  virtual void visit(UnifiedOp op) = 0;
  virtual void visit(FlashOp op) = 0;
  virtual void visit(BlockSparseOp op) = 0;
};

} // namespace mlir::attn

#endif // ATTN_IR_ATTNKERNELVISITOR_H
