//===- AttnLimits.h - the largest sizes the attn ops accept -----*- C++ -*-===//
//
// Upper bounds that the verifiers enforce on every size an op declares (static
// dimensions and attributes). They sit far above any model or schedule in use
// and far below the point where the products the lowerings form (tile bytes,
// unrolled fragments, grid extents) could overflow 64-bit arithmetic, so no
// pass needs to guard its own arithmetic against absurd sizes. The Python API
// checks the same bounds before it emits an op (attn_mlir/ops.py).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_IR_ATTNLIMITS_H
#define ATTN_IR_ATTNLIMITS_H

#include <cstdint>

namespace mlir::attn::limits {

/// Head dim of q, k, v and out (today's models: 32 to 576).
inline constexpr int64_t kMaxHeadDim = 1024;
/// Query or KV heads (today's models: at most 128).
inline constexpr int64_t kMaxHeads = 4096;
/// Keys per cache page, and the key split `x` of vLLM's split key cache.
inline constexpr int64_t kMaxBlockSize = 1 << 16;
/// Block-sparse layout block sizes (keys or queries per layout block).
inline constexpr int64_t kMaxSparseBlock = 1 << 16;
/// Split-KV segments.
inline constexpr int64_t kMaxSegments = 4096;
/// Sliding windows are compared against 32-bit positions.
inline constexpr int64_t kMaxSlidingWindow = (int64_t{1} << 31) - 1;
/// #attn.schedule: block_q and block_n, the rows of a program's M tile
/// (block_q * heads_per_program), and warps or waves.
inline constexpr int64_t kMaxTile = 4096;
inline constexpr int64_t kMaxProgramRows = 4096;
inline constexpr int64_t kMaxWarps = 32;
/// #attn.schedule stages: K/V tiles a program holds (0: the target's).
inline constexpr int64_t kMaxStages = 4;

} // namespace mlir::attn::limits

#endif // ATTN_IR_ATTNLIMITS_H
