//===- GpuTarget.h - what a GPU backend provides ----------------*- C++ -*-===//
//
// convert-attn-to-gpu is written once for every GPU: it outlines each attn
// op into a gpu.func, lowers it through the shared op lowerings
// (KernelLowering.h) and launches it over the op's grid. What differs
// between NVIDIA and AMD is this small interface, in the manner of Triton's
// TargetInfo: the tensor-core compute type, the launch resources of a
// program, the hardware exp2, and the program builder (warps of mma.sync /
// wgmma on NVVM, waves of MFMA / WMMA on ROCDL). The grid mapping, KV walks,
// masks and score math are common (LowerKernelOps.cpp, AttentionMath); the
// staging of global rows into shared memory is common too (GpuStaging.h).
//
// Each backend is compiled in only when its CMake option is on
// (ATTN_ENABLE_NVVM, ATTN_ENABLE_ROCDL).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_GPUTARGET_H
#define ATTN_CONVERSION_ATTNTOGPU_GPUTARGET_H

#include "attn/Conversion/AttnToSCF/TiledAttention.h"

#include "llvm/Support/CheckedArithmetic.h"

#include <functional>
#include <limits>
#include <memory>

namespace mlir::attn {

/// The shared memory a program with a fused split-KV merge needs at least
/// (GpuProgramTarget::lastArrival's broadcast word).
constexpr int64_t kArrivalSharedBytes = 16;

/// Launch resources of one GPU program (a thread block / workgroup).
struct KernelLaunch {
  int64_t threads = 128;
  int64_t sharedBytes = 0;
  /// The kernel loops over the program grid from its linear block id with
  /// the launch's stride: a runtime launches at most one block per SM.
  bool persistent = false;
  /// Persistent kernels: programs are claimed query tile by query tile,
  /// every head group of one tile in turn (causal programs, longest
  /// first), rather than in sections of the head groups whose K and V fit
  /// in L2 together (WarpPersistent.cpp).
  bool claimsTileMajor = false;
  /// NVVM: the shared memory holds a raw buffer for fp8 cache pages
  /// (decode-shaped sm_90a programs; rawStagedFp8Keys).
  bool rawFp8Keys = false;
  /// NVVM: those programs' QK reads K raw, and V takes the K tile's place
  /// (readsRawFp8KeysDirect).
  bool rawKeysDirect = false;
  /// Grids of fewer than smallGridProgramsPerSM programs an SM launch with
  /// smallGridSharedBytes of shared memory (more than sharedBytes, so fewer
  /// blocks an SM), which spreads them over more SMs; 0: no such rule.
  int64_t smallGridProgramsPerSM = 0;
  int64_t smallGridSharedBytes = 0;
  /// NVVM: the kernel's 16-byte cp.async copies stream (each byte is read
  /// once): attn-nvvm-streaming-copies gives them an L2 evict-first policy.
  bool streamingCopies = false;
};

/// What one warp (or wave) of a program unrolls: its rows, each 16-row MMA
/// fragment of which is emitted separately, and the f32 accumulator elements
/// of S and O that each of its lanes keeps in registers.
struct ProgramBody {
  int64_t rowsPerWarp = 0;
  int64_t accumulatorsPerLane = 0;
};

/// The largest body convert-attn-to-gpu emits: twice what a lane's 255
/// registers hold (head dims up to 512 compile, spilling past 256), far below
/// the bodies of hundreds of fragments that take the backends minutes and
/// gigabytes to compile. Default schedules of heads up to 256 stay under 256
/// accumulators and do not spill (the resource sweeps check this).
constexpr int64_t kMaxRowsPerWarp = 64;
constexpr int64_t kMaxAccumulatorsPerLane = 512;

/// Resource arithmetic that saturates instead of overflowing, so that a
/// check against a limit cannot wrap around and pass.
inline int64_t saturatingMul(int64_t a, int64_t b) {
  return llvm::checkedMul(a, b).value_or(std::numeric_limits<int64_t>::max());
}
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  return llvm::checkedAdd(a, b).value_or(std::numeric_limits<int64_t>::max());
}

/// The shared part of every GPU ProgramTarget: the launch grid is exactly
/// the op's grid (block ids), and element-wise work is spread over the
/// block's threads. `entry` is the kernel's entry block (where per-thread
/// state arrays are allocated so that LLVM promotes them to registers),
/// `shared` its dynamic shared memory (memref<?xi8, workgroup>).
class GpuProgramTarget : public ProgramTarget {
public:
  GpuProgramTarget(Block *entry, Value shared, Type computeType,
                   int64_t threads)
      : entry(entry), shared(shared), computeType(computeType),
        threads(threads) {}
  void grid(LoopEmitter &e, ArrayRef<Value> ubs,
            llvm::function_ref<void(ValueRange)> body,
            Value kvBytesPerSequence) override;
  void spread(LoopEmitter &e, Value lo, Value hi,
              llvm::function_ref<void(Value)> body) override;
  /// A block barrier, then thread 0 fences, counts and broadcasts through
  /// the first word of shared memory (the program is done with it; the
  /// launch has at least kArrivalSharedBytes).
  Value lastArrival(LoopEmitter &e, Value counters, ValueRange at,
                    Value expected) override;
  /// (GPU programs keep one copy of the round unless their target says.)
  bool wholeMergeRounds(const TileShape &shape) const override { return false; }

protected:
  /// An acq_rel fence at device scope: with the relaxed atomic after (or
  /// before) it, the release (acquire) pattern that orders this thread's
  /// memory operations, and those a block barrier ordered before them, for
  /// the whole device.
  void deviceFence(ImplicitLocOpBuilder &b);
  /// The LLVM sync scope of the whole device ("agent" for AMDGPU).
  virtual StringRef deviceSyncScope() const { return "agent"; }

  Block *entry;
  Value shared;
  Type computeType;
  int64_t threads;
};

/// A tensor map (CUtensorMap) the kernel reads operand `operand` through:
/// the bulk tensor copy engine (TMA) loads boxes of `box` elements (one
/// per memref dim, outermost first) into 128-byte swizzled shared tiles.
/// The kernel takes each map as a parameter ahead of the op's operands; the
/// runtime encodes it from the operand's descriptor (docs/runtime.md).
struct TensorMapRequest {
  unsigned operand = 0;
  SmallVector<int64_t> box;
};

/// The gpu.func attribute that counts the kernel's leading tensor-map
/// parameters (attn-nvvm-tensor-map-params passes them by value).
inline constexpr llvm::StringLiteral kTensorMapParamsAttr =
    "attn.tensor_map_params";

/// The gpu.func attribute of kernels whose 16-byte cp.async copies take an
/// L2 evict-first policy (KernelLaunch::streamingCopies).
inline constexpr llvm::StringLiteral kStreamingCopiesAttr =
    "attn.streaming_copies";

/// A kernel's tensor map: the memref argument it describes and the
/// parameter that carries it (an !llvm.ptr to the 128-byte map).
struct TensorMapArg {
  Value operand, map;
  SmallVector<int64_t> box;
};

/// The matrix-core operand type for query type `qType`: f16 and bf16 as
/// they are, fp8 as f16 (exact), f32 as it is when `f32` (the target has
/// f32 / tf32 matrix instructions); failure otherwise.
FailureOr<Type> gpuComputeType(Type qType, bool f32);

/// One GPU backend, for one chip.
class GpuTarget {
public:
  virtual ~GpuTarget() = default;
  /// The tensor-core operand type for query type `qType`; failure when the
  /// target has no matrix-core path for it.
  virtual FailureOr<Type> computeType(Type qType) const = 0;
  /// The operand type of the programs of `op` with tile shape `shape`,
  /// given computeType's `ct`: a backend may multiply in another 16-bit
  /// type where that makes its staging cheaper. `ct` by default.
  virtual Type programComputeType(Operation *op, const TileShape &shape,
                                  Type ct) const {
    return ct;
  }
  /// The query types computeType accepts, in words (for diagnostics).
  virtual std::string supportedTypes() const = 0;
  /// Threads and dynamic shared memory of a program of `op` with tile shape
  /// `shape` (saturating at INT64_MAX).
  virtual KernelLaunch launchFor(Operation *op, const TileShape &shape,
                                 Type ct) const = 0;
  /// The per-warp (per-wave) body of a program of tile shape `shape`.
  virtual ProgramBody bodyOf(const TileShape &shape) const = 0;
  /// The most dynamic shared memory (LDS) one program may use.
  virtual int64_t maxSharedBytes() const = 0;
  /// exp2 through the hardware instruction (no device library).
  virtual Value exp2(ImplicitLocOpBuilder &b, Value x) const = 0;
  /// log2 through the hardware instruction (log2(0) = -inf).
  virtual Value log2(ImplicitLocOpBuilder &b, Value x) const = 0;
  /// sqrt, correctly rounded, without a device library.
  virtual Value sqrt(ImplicitLocOpBuilder &b, Value x) const = 0;
  /// 1 / x through the hardware's reciprocal (about 1 ulp; rcp(inf) = 0).
  virtual Value rcp(ImplicitLocOpBuilder &b, Value x) const = 0;
  /// The high word of the unsigned i32 product x * y (Philox dropout), or
  /// null for LoopEmitter's 64-bit multiply.
  virtual Value mulHiU32(ImplicitLocOpBuilder &b, Value x, Value y) const {
    return {};
  }
  /// The operands of kernel op `op` (with tile shape `shape`) that its
  /// program loads through tensor maps; none by default.
  virtual SmallVector<TensorMapRequest>
  tensorMaps(Operation *op, const TileShape &shape, Type ct) const {
    return {};
  }
  /// Whether the programs of `op` (tile shape `shape`, producer_warps
  /// without tma) have a producer warpgroup that gathers K/V with
  /// cp.async; false by default (the convert pass rejects the schedule).
  virtual bool gathersKeys(Operation *op, const TileShape &shape,
                           Type ct) const {
    return false;
  }
  /// Whether the programs of block-sparse `op` walk two layout rows at
  /// once (a schedule whose block_q is twice the query block: the union
  /// of both CSR rows); false by default (the convert pass rejects the
  /// schedule).
  virtual bool walksLayoutRowPairs(Operation *op, const TileShape &shape,
                                   Type ct) const {
    return false;
  }
  /// Whether the programs of `op` (tile shape `shape`) give a row slab's
  /// several warps each their own keys of every KV tile (a schedule of
  /// more warps than 16-row slabs); false by default.
  virtual bool splitsKeys(Operation *op, const TileShape &shape,
                          Type ct) const {
    return false;
  }
  /// The program builder of one kernel: `entry` is its entry block (where
  /// per-thread state is allocated), `shared` its dynamic shared memory
  /// (memref<?xi8, workgroup>, null when the launch needs none), `maps` the
  /// tensor maps tensorMaps() asked for.
  virtual std::unique_ptr<ProgramTarget>
  programs(Block *entry, Value shared, Type ct, const KernelLaunch &launch,
           ArrayRef<TensorMapArg> maps) const = 0;
};

/// Makes a backend for `chip`: null, with `error` set, for a chip it does
/// not support. `exactF32`: f32 products on 3xTF32 (convert-attn-to-gpu's
/// f32-precision; backends without the choice ignore it).
using GpuTargetFactory = std::function<std::unique_ptr<GpuTarget>(
    StringRef chip, bool exactF32, std::string &error)>;

/// Backends register themselves under their target name (nvvm, rocdl), so
/// that convert-attn-to-gpu depends on none of them
/// (attn/Conversion/AttnToGPU/Targets.h registers the built-in ones).
void registerGpuTarget(StringRef target, GpuTargetFactory factory);

/// The backend `target` for `chip`; null, with `error` set, for a target
/// that is unknown or not registered, or a chip it does not support.
std::unique_ptr<GpuTarget> createGpuTarget(StringRef target, StringRef chip,
                                           std::string &error,
                                           bool exactF32 = false);

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOGPU_GPUTARGET_H
