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

/// A discardable unit attribute of attn.flash: the calls the op stands for
/// have short sequences (the Python ops set it when the queries average at
/// most 512 a sequence). A planning hint only: on sm_90a the plan then
/// gives dense 16-bit flash the persistent form of its Hopper schedule;
/// elsewhere it changes nothing.
inline constexpr llvm::StringLiteral kShortSequencesHint =
    "attn.short_sequences";

/// A discardable unit attribute of attn.unified: the calls the op stands
/// for carry many queries a sequence (the Python ops set it when the
/// queries average more than 16 a sequence: prefill rows, or a mixed batch
/// with them). A planning hint only: on sm_90a the plan then gives 16-bit
/// unified programs three K/V stages instead of two; elsewhere it changes
/// nothing.
inline constexpr llvm::StringLiteral kLongQueriesHint = "attn.long_queries";

/// A discardable unit attribute of attn.unified: the calls the op stands
/// for are prefill rows almost only (the Python ops set it when the queries
/// average at least 128 a sequence). A planning hint only: on sm_90a the
/// plan then gives 16-bit unified programs of heads of 64 or 128 prefix
/// prefill's pipeline (a producer warpgroup loading whole pages by TMA and
/// gathering other rows, two consumer warpgroups in pingpong); elsewhere it
/// changes nothing.
inline constexpr llvm::StringLiteral kPrefillRowsHint = "attn.prefill_rows";

/// A discardable unit attribute of attn.unified: the calls the op stands
/// for are decode rows (the Python ops set it when a sequence's queries
/// times the packed query heads average at most 16 rows). A planning hint
/// only: on sm_90a the plan then gives unified programs over fp8 caches
/// one 16-row slab computed by four warps, each over its quarter of every
/// KV tile's keys (ScheduleAttr::warps beyond the slabs); elsewhere it
/// changes nothing.
inline constexpr llvm::StringLiteral kDecodeRowsHint = "attn.decode_rows";

/// A discardable unit attribute of attn.unified: the calls the op stands
/// for stream short segments of pages (split-KV decode whose programs each
/// read at most a few thousand keys; the vLLM drop-in sets it from its
/// plan). A code generation hint only: on sm_90a the split-KV programs'
/// 16-byte cp.async copies then take an L2 evict-first policy
/// (attn-nvvm-streaming-copies); elsewhere it changes nothing.
inline constexpr llvm::StringLiteral kStreamPagesHint = "attn.stream_pages";

/// The op's own schedule, or the CPU default when it has none.
ScheduleAttr scheduleOrDefault(Operation *op);

/// Whether `op` is a prefix prefill whose cache pages and new keys a
/// producer warpgroup can gather with cp.async (schedule producer_warps
/// without tma): f16 or bf16 Q and new keys; caches like Q, unscaled, or
/// fp8 (e4m3/e5m2, scaled or not: their bytes are copied, then dequantized
/// in shared memory); rows of unit stride, pages and key splits of whole
/// 8-element chunks. Or an attn.unified over f16/bf16 caches like Q (rows
/// of unit stride) without descales, split-KV, lse and the rarer masks
/// (Plan.cpp, gathersUnifiedRows).
bool gathersCaches(Operation *op);
/// gathersCaches with fp8 caches.
bool gathersFp8Caches(Operation *op);
/// The rows of one TMA box of NHD pages of `page` keys in tiles of `bn`:
/// the page where it divides bn, bn where it is a multiple of it; 0 where
/// pages are no whole boxes (or under 8 rows: 128-byte swizzled boxes
/// start on 1024-byte boundaries of the tile).
int64_t pageBoxRows(int64_t page, int64_t bn);
/// Whether `op` is an attn.flash over fp8 Q, K and V (e4m3/e5m2, scaled or
/// not) that sm_90a multiplies as stored, on fp8 wgmma: rank-3 operands of
/// unit innermost stride (TMA boxes), heads of 64 or 128 (one 128-byte
/// swizzle atom a row, a head of 64 half of it), no quantize_to, additive
/// bias or dropout.
bool multipliesFp8OnWgmma(Operation *op);

} // namespace mlir::attn

#endif // ATTN_TRANSFORMS_SCHEDULE_H
