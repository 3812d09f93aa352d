//===- Plan.cpp - attn-plan: choose tile schedules --------------*- C++ -*-===//

#include "Schedule.h"
#include "attn/IR/AttnOps.h"
#include "attn/Transforms/Passes.h"

#include <numeric>

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNPLAN
#include "attn/Transforms/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;

namespace {
/// Per-target sizes: query rows of an M tile and keys of a KV tile.
struct TargetTiles {
  int64_t rows, keys;
};

std::optional<TargetTiles> tilesFor(StringRef target) {
  if (target == "cpu")
    return TargetTiles{16, 32};
  if (target == "nvvm" || target == "rocdl")
    return TargetTiles{64, 64};
  return std::nullopt;
}

int64_t groupOf(Value q, Value kv, unsigned kvHeadDim) {
  return cast<MemRefType>(q.getType()).getDimSize(1) /
         cast<MemRefType>(kv.getType()).getDimSize(kvHeadDim);
}
} // namespace

FailureOr<ScheduleAttr> mlir::attn::defaultSchedule(Operation *op,
                                                    StringRef target) {
  std::optional<TargetTiles> tiles = tilesFor(target);
  if (!tiles)
    return failure();
  int64_t group = 0, pack = 0, qBlockLimit = 0;
  if (auto pp = dyn_cast<PrefixPrefillOp>(op))
    group = groupOf(pp.getQ(), pp.getK(), 1);
  else if (auto un = dyn_cast<UnifiedOp>(op))
    group = groupOf(un.getQ(), un.getKCache(), 2);
  else if (auto fl = dyn_cast<FlashOp>(op))
    group = groupOf(fl.getQ(), fl.getK(), 1);
  else if (auto bs = dyn_cast<BlockSparseOp>(op)) {
    group = groupOf(bs.getQ(), bs.getK(), 1);
    // Heads with their own layouts walk different CSR rows.
    if (bs.hasPerHeadLayout())
      pack = 1;
    qBlockLimit = bs.getQueryBlockSize();
  } else {
    return failure();
  }
  // GQA packing: all query heads of a KV head share each KV tile load.
  if (pack == 0)
    pack = group;
  int64_t blockQ = std::max<int64_t>(1, tiles->rows / pack);
  if (qBlockLimit)
    blockQ = std::gcd(blockQ, qBlockLimit);
  // GPU programs hold a [16 x D] accumulator per warp in registers: halve
  // the KV tile for large heads so that S and O fit together.
  int64_t keys = tiles->keys;
  if (target != "cpu") {
    Value q = op->getOperand(0);
    if (cast<MemRefType>(q.getType()).getDimSize(2) > 128)
      keys /= 2;
  }
  return ScheduleAttr::get(op->getContext(), blockQ, keys, pack);
}

ScheduleAttr mlir::attn::scheduleOrDefault(Operation *op) {
  if (auto s = op->getAttrOfType<ScheduleAttr>("schedule"))
    return s;
  return *defaultSchedule(op, "cpu");
}

namespace {
struct AttnPlanPass : public mlir::attn::impl::AttnPlanBase<AttnPlanPass> {
  using Base::Base;
  void runOnOperation() override {
    if (!tilesFor(target)) {
      getOperation()->emitError()
          << "attn-plan: unknown target '" << target
          << "' (expected cpu, nvvm or rocdl)";
      return signalPassFailure();
    }
    getOperation()->walk([&](Operation *op) {
      if (!isa<PrefixPrefillOp, UnifiedOp, FlashOp, BlockSparseOp>(op) ||
          op->hasAttr("schedule"))
        return;
      op->setAttr("schedule", *defaultSchedule(op, target));
    });
  }
};
} // namespace
