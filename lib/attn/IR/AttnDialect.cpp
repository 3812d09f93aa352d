//===- AttnDialect.cpp - attn dialect ---------------------------*- C++ -*-===//

#include "attn/IR/AttnDialect.h"
#include "attn/IR/AttnAttrs.h"
#include "attn/IR/AttnLimits.h"
#include "attn/IR/AttnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::attn;

#include "attn/IR/AttnEnums.cpp.inc"
#include "attn/IR/AttnOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "attn/IR/AttnAttrs.cpp.inc"

void AttnDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "attn/IR/AttnAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "attn/IR/AttnOps.cpp.inc"
      >();
}

LogicalResult ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t blockQ, int64_t blockN,
                                   int64_t headsPerProgram, int64_t warps,
                                   bool tma, int64_t producerWarps,
                                   bool pingpong, bool persistent,
                                   int64_t stages) {
  using namespace limits;
  if (blockQ < 1 || blockN < 1 || headsPerProgram < 1)
    return emitError() << "#attn.schedule needs positive block_q, block_n "
                          "and heads_per_program, got "
                       << blockQ << ", " << blockN << ", " << headsPerProgram;
  if (blockQ > kMaxTile || blockN > kMaxTile)
    return emitError() << "#attn.schedule needs block_q and block_n of at "
                          "most "
                       << kMaxTile << ", got " << blockQ << " and " << blockN;
  // Both factors are at most kMaxTile here: no overflow.
  if (headsPerProgram > kMaxHeads || blockQ * headsPerProgram > kMaxProgramRows)
    return emitError() << "#attn.schedule tiles " << blockQ << " x "
                       << headsPerProgram
                       << " rows (block_q x heads_per_program) per program; "
                          "at most "
                       << kMaxProgramRows << " are allowed";
  if (warps < 0 || warps > kMaxWarps)
    return emitError() << "#attn.schedule needs 0 to " << kMaxWarps
                       << " warps (0: one per 16 rows), got " << warps;
  if (producerWarps != 0 && producerWarps != 4)
    return emitError() << "#attn.schedule needs 0 or 4 producer_warps (a "
                          "producer warpgroup), got "
                       << producerWarps;
  if (pingpong && !producerWarps)
    return emitError() << "#attn.schedule pingpong needs producer_warps = 4";
  // Only the producer's ring carries work from one program to the next,
  // and only a TMA producer runs ahead into the next program's Q.
  if (persistent && !producerWarps)
    return emitError() << "#attn.schedule persistent needs producer_warps = 4";
  if (persistent && !tma)
    return emitError() << "#attn.schedule persistent needs tma = true (its "
                          "producer loads by TMA)";
  if (stages < 0 || stages > kMaxStages)
    return emitError() << "#attn.schedule needs 0 to " << kMaxStages
                       << " stages (0: the target's choice), got " << stages;
  if (producerWarps && stages != 0 && stages != 2)
    return emitError() << "#attn.schedule producer_warps = 4 needs a ring of "
                          "2 stages, got stages = "
                       << stages;
  return success();
}
