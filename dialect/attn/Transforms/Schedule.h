//===- Schedule.h - default tile schedules per target -----------*- C++ -*-===//

#ifndef ATTN_TRANSFORMS_SCHEDULE_H
#define ATTN_TRANSFORMS_SCHEDULE_H

#include "attn/IR/AttnAttrs.h"
#include "mlir/IR/Operation.h"

namespace mlir::attn {

/// The schedule `attn-plan` gives `op` for `target` (cpu, nvvm, rocdl) and
/// `chip` (may be empty); failure for an unknown target or an op that takes
/// no schedule.
FailureOr<ScheduleAttr> defaultSchedule(Operation *op, StringRef target,
                                        StringRef chip = "");

/// The op's own schedule, or the CPU default when it has none.
ScheduleAttr scheduleOrDefault(Operation *op);

} // namespace mlir::attn

#endif // ATTN_TRANSFORMS_SCHEDULE_H
