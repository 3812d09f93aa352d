//===- KernelLowering.h - attn ops -> programs on a grid --------*- C++ -*-===//
//
// The op-specific half of every lowering, written once for all targets: the
// launch grid of an op (as a function of its operands' shapes, so a host can
// compute it without reading device memory) and, per grid point, which rows
// a program owns and where its keys come from. A ProgramTarget turns that
// into scalar loops (CPU) or warps (GPU).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOSCF_KERNELLOWERING_H
#define ATTN_CONVERSION_ATTNTOSCF_KERNELLOWERING_H

#include "attn/Conversion/AttnToSCF/TiledAttention.h"
#include "attn/IR/AttnOps.h"
#include "llvm/Support/JSON.h"

namespace mlir::attn {

/// One grid extent: sum_i floor(dim(operand_i, dim_i) / divisor_i) + constant.
struct GridExtent {
  struct Term {
    unsigned operand;
    unsigned dim;
    int64_t divisor;
  };
  SmallVector<Term> terms;
  int64_t constant = 0;

  Value materialize(LoopEmitter &e, ValueRange operands) const;
  /// JSON for the kernel manifest: {"terms": [[op, dim, div], ...], "add": c}.
  llvm::json::Value toJson() const;
};

/// The launch grid of an attn op (1 to 3 extents); failure for other ops.
FailureOr<SmallVector<GridExtent>> kernelGrid(Operation *op);

/// Emits `op` (any attn op) through `target` at the builder's insertion
/// point; the op's operands are used as they are. Does not erase `op`.
LogicalResult emitAttnOp(LoopEmitter &e, ProgramTarget &target, Operation *op);

/// attn.merge_states (LowerMergeStates.cpp): each program merges
/// kMergeRowsPerProgram tokens of one head (its grid: tokens /
/// kMergeRowsPerProgram + 1, heads), each row by kMergeLanes lanes.
constexpr int64_t kMergeRowsPerProgram = 4;
constexpr int64_t kMergeLanes = 32;
void emitMergeStates(LoopEmitter &e, ProgramTarget &target, MergeStatesOp op);

/// A split-KV op's segments (docs/semantics.md, 3.5) and where their merge
/// goes: partial [rows, heads, S, D] f32, statistics [rows, heads, S]
/// f32, optional sinks [heads] f32 and (loaded) output scale.
struct SegmentStates {
  Value partial, segmentMax, segmentSum, sinks, outScale, out;
  Value segments; // S (index)
  int64_t headDim;
  /// Optional [tokens, heads] f32: each merged row's log-sum-exp (sinks
  /// included), as the non-split form's lse.
  Value lse = Value();
  /// Whole rounds of segments unclamped (ProgramTarget::wholeMergeRounds).
  bool wholeRounds = false;
};

/// One row of a fused merge: the row of its partials and statistics, the
/// row of its output (merged_out, lse: the token) and its head.
struct MergeRow {
  Value stateRow, outRow, head;
};

/// Merges rows [0, numRows) of `states` as attn.merge_states does, row r
/// being rowAt(r): the fused merge of attn.unified's last program of a
/// tile. Its threads take (row, run of dims) pairs, and each reads the
/// segments in one pass (running max), so that a few rows of a decode tile
/// are merged in a couple of memory round trips.
void emitMergeRows(LoopEmitter &e, ProgramTarget &target,
                   const SegmentStates &states, Value numRows,
                   llvm::function_ref<MergeRow(Value row)> rowAt);

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOSCF_KERNELLOWERING_H
