//===- Wgmma.h - warpgroup MMA (sm_90a) building blocks ---------*- C++ -*-===//
//
// wgmma.mma_async m64nNk16 with f32 accumulators, as PTX inline assembly:
// MLIR's nvvm.wgmma.mma_async takes A only from shared memory, and the
// attention PV product keeps P in registers. Operands in shared memory are
// described by 64-bit matrix descriptors over the canonical 128-byte
// swizzled layout (PTX ISA, "Matrix Descriptor Format"): atoms of 8 rows x
// 128 bytes, 1024-byte aligned, the 16-byte chunk c of row r stored at
// chunk c ^ (r % 8).
//
// Every statement is side-effecting so that LLVM keeps them in order; the
// accumulators of an MMA group are passed through `fenceOperands` after its
// wait, so that no read of them is scheduled before the wait.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_CONVERSION_ATTNTOGPU_WGMMA_H
#define ATTN_LIB_CONVERSION_ATTNTOGPU_WGMMA_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::attn {

/// One PTX inline-assembly statement (LLVM dialect); `resultType` null for
/// none. Side-effecting statements keep their order and stay where they
/// are (not hoisted, not merged).
Value inlinePtx(ImplicitLocOpBuilder &b, Type resultType, ValueRange operands,
                StringRef text, StringRef constraints, bool sideEffects = true);

} // namespace mlir::attn

namespace mlir::attn::wgmma {

/// Rows of one warpgroup's MMA (the M of m64nNk16).
constexpr int64_t kRows = 64;
/// Elements of a 16-bit type in one 128-byte swizzle atom row.
constexpr int64_t kAtomCols = 64;
constexpr int64_t kAtomRowBytes = 128;
/// Bytes of 8 atom rows: the stride between core-matrix row groups.
constexpr int64_t kGroupBytes = 1024;

/// wgmma.fence: registers written by ordinary instructions (accumulators,
/// A fragments) are ready for the next MMAs.
void fence(ImplicitLocOpBuilder &b);
/// Closes the group of MMAs issued since the last commit.
void commit(ImplicitLocOpBuilder &b);
/// Waits until at most `pending` groups are in flight.
void wait(ImplicitLocOpBuilder &b, int pending);
/// Orders this thread's ordinary shared-memory writes (cp.async included,
/// once waited for) before later reads by the tensor cores.
void fenceProxyAsync(ImplicitLocOpBuilder &b);

/// Layouts of a shared-memory operand (the descriptor's swizzle mode).
enum class Swizzle : uint64_t {
  /// Core matrices of 8 rows x 16 bytes, each 128 contiguous bytes, placed
  /// by the leading (K) and stride (M/N) byte offsets.
  None = 0,
  /// 128-byte swizzled atoms (see above).
  Bytes128 = 1,
  /// Atoms of 8 rows x 32 bytes, the 16-byte chunk h of row r at
  /// h ^ (r / 4 % 2), 256-byte aligned.
  Bytes32 = 3,
};

/// The descriptor (i64) of an operand starting at shared byte address
/// `address` (an index; a multiple of 16, for Bytes128 its atom 1024-byte
/// aligned): `leadingBytes` and `strideBytes` are the descriptor's leading
/// (between core matrices along K) and stride (along M or N) byte offsets.
Value descriptor(ImplicitLocOpBuilder &b, Value address, int64_t leadingBytes,
                 int64_t strideBytes, Swizzle swizzle = Swizzle::Bytes128);

/// One MMA of the warpgroup: m64nNk16 of f16 or bf16 (`aType` = `bType`),
/// or m64nNk32 of fp8 (e4m3 / e5m2, either for A and for B; both operands
/// K-major, there is no transposed form). A from shared memory (`aDesc`,
/// K-major) or, when aDesc is null, from the four 32-bit registers `aRegs`
/// (mma.sync's A fragment layout of m16n8k16, or of m16n8k32 for fp8: a
/// register holds 4 adjacent k of one row); B from shared memory, N-major
/// when `transB`. Accumulates into `acc` (N / 2 f32 values) or, when acc is
/// empty, starts from zero. Returns the new accumulators, readable only
/// after a wait and fenceOperands.
SmallVector<Value> mma(ImplicitLocOpBuilder &b, int64_t n, Type aType,
                       Type bType, Value aDesc, ArrayRef<Value> aRegs,
                       Value bDesc, bool transB, ArrayRef<Value> acc);

/// `values` (f32) through an empty side-effecting statement: uses of the
/// results cannot move above the preceding wait.
SmallVector<Value> fenceOperands(ImplicitLocOpBuilder &b,
                                 ArrayRef<Value> values);

} // namespace mlir::attn::wgmma

#endif // ATTN_LIB_CONVERSION_ATTNTOGPU_WGMMA_H
