//===- AttentionProgram.h - the GPU attention program skeleton --*- C++ -*-===//
//
// Every GPU attention program has one shape, that of FlashAttention-2's
// forward loop: per-thread state (running max, running sum, the output
// accumulator) in registers, the query tile staged in shared memory, the
// state initialized, each KV walk computed tile by tile, and an epilogue
// that normalizes each row this thread owns and stores it (or, for split-KV
// segments, stores it with its max and sum). AttentionProgram emits that
// skeleton once; the NVVM warp programs (mma.sync / wgmma) and the ROCDL wave
// programs (MFMA / WMMA) derive from it and supply only what differs: thread
// coordinates and shared tiles, how the query tile is staged, the KV tile
// pipeline, and which rows and output elements a thread's fragments hold.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_ATTENTIONPROGRAM_H
#define ATTN_CONVERSION_ATTNTOGPU_ATTENTIONPROGRAM_H

#include "attn/Conversion/AttnToGPU/GpuStaging.h"
#include "attn/Conversion/AttnToGPU/GpuTarget.h"

namespace mlir::attn {

class AttentionProgram {
public:
  AttentionProgram(LoopEmitter &e, const TileShape &shape,
                   const AttentionFeatures &f, const AttentionOutput &o,
                   Value q, Block *entry)
      : e(e), b(e.builder()), shape(shape), math(e, shape, f), f(f), o(o), q(q),
        entry(entry) {}
  virtual ~AttentionProgram() = default;

  /// Emits the whole program for `rows` over `walks`.
  void emit(const ProgramRows &rows, ArrayRef<KvWalk> walks);

protected:
  // --- Hooks: what a backend's fragments and pipeline decide. ---
  /// Thread coordinates and shared-memory tiles, before anything else.
  virtual void setUp(const ProgramRows &rows, ArrayRef<KvWalk> walks) = 0;
  /// Rows a thread keeps softmax state for ("slots"), and the f32 elements
  /// of its output accumulator.
  virtual int64_t rowSlots() const = 0;
  virtual int64_t accumulatorElems() const = 0;
  /// Stages the query tile (rows from queryRow()) and prepares what the
  /// KV walk reads of it; shared memory is ready for every thread after.
  virtual void stageQuery(const ProgramRows &rows) = 0;
  /// The M-tile row of slot `slot`.
  virtual Value slotRow(int64_t slot) = 0;
  /// Whether this lane is the one of its row's lanes that starts the row
  /// sum (with the sink's weight) and writes the split-KV statistics.
  virtual Value isRowLeader() = 0;
  /// `x` combined (max or sum) over the lanes that share its row.
  virtual Value reduceRow(Value x, bool isMax) = 0;
  /// Whether this thread's warp stores the rows it holds (null: every
  /// warp does). Warps that share rows, each over its own keys, store
  /// them once, after merging (finishWalks).
  virtual Value storesRows() { return Value(); }
  /// Computes KV tiles of keys [lo, hi) of `walk`.
  virtual void walkRange(const ProgramRows &rows, const KvWalk &walk, Value lo,
                         Value hi) = 0;
  /// Computes the KV tiles of a union walk (KvWalk::forEachBlockTile),
  /// which only programs the convert pass accepts for it
  /// (GpuTarget::walksLayoutRowPairs) have.
  virtual void walkUnion(const ProgramRows &rows, const KvWalk &walk) {
    llvm::report_fatal_error("a union walk on a program without one");
  }
  /// After every walk, before the epilogue: what a pipeline still has in
  /// flight (the default: nothing).
  virtual void finishWalks(const ProgramRows &rows, ArrayRef<KvWalk> walks) {}
  /// Warp-specialized programs: emits the roles' split, calling
  /// `consume` (the query tile, softmax state, the walks through walkRange,
  /// the epilogue) in the warps that compute, and returns true; false (the
  /// default) lets every thread run `consume`.
  virtual bool specialize(const ProgramRows &rows, ArrayRef<KvWalk> walks,
                          llvm::function_ref<void()> consume) {
    return false;
  }
  /// Calls `store(d, v, partial)` for each output element of slot `slot`
  /// this thread holds: head dim index d, accumulator value v, and whether
  /// its fragment reaches past the head dim (d must then be checked).
  virtual void visitOutputs(
      int64_t slot,
      llvm::function_ref<void(Value d, Value v, bool partial)> store) = 0;
  /// Where this thread holds its output elements of slot `slot` as pairs
  /// (d, d + 1), d even, all inside the head dim: calls `store(d, v0, v1)`
  /// for each and returns true (one 4-byte store per pair); false (the
  /// default) otherwise.
  virtual bool
  visitOutputPairs(int64_t slot,
                   llvm::function_ref<void(Value d, Value v0, Value v1)>) {
    return false;
  }

  /// Where the threads holding a row's output elements can trade them so
  /// that each holds 8 adjacent ones (every lane of the warp takes part:
  /// called outside any branch on the row): calls `pack(v0, v1)` for each
  /// pair of accumulator values (d, d + 1) it holds (a vector<2> of the
  /// output type), then `store(d, chunk)` for each vector<8> of output
  /// elements d .. d + 7 it holds after the exchange, and returns true;
  /// false (the default, emitting nothing) otherwise.
  virtual bool
  visitOutputChunks(int64_t slot, llvm::function_ref<Value(Value, Value)> pack,
                    llvm::function_ref<void(Value d, Value chunk)> store) {
    return false;
  }

  // --- Shared by the backends. ---
  /// Row r of the query tile: token r / pack of head headBase + r % pack,
  /// clamped into the program's tokens (invalid rows read a valid one);
  /// `scaled`: the query scale and quantization apply while staging.
  StagedRow queryRow(const ProgramRows &rows, Value r, bool scaled);

  LoopEmitter &e;
  ImplicitLocOpBuilder &b;
  TileShape shape;
  AttentionMath math;
  const AttentionFeatures &f;
  const AttentionOutput &o;
  Value q;
  Block *entry;
  /// Per-thread state: the output accumulator, and the running max and sum
  /// of each slot, in arrays indexed only by constants so that LLVM
  /// promotes them to registers.
  Value oAcc, mState, lState;
  /// A factor of every output element that the accumulators leave out
  /// (programs that multiply stored fp8 V directly: its scale), or null.
  Value accumulatorScale;
  /// The epilogue indexes output rows from the low 32 bits of the
  /// program's first token (every op's token offsets are i32, so a stored
  /// row's index fits): set where the walk leaves no register for the
  /// index's high half (ptxas spilled it in sm_90a programs of heads of
  /// 256 on 80-key tiles).
  bool narrowOutputRows = false;

private:
  void allocateState();
  void initializeState(const ProgramRows &rows);
  void epilogue(const ProgramRows &rows);
};

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOGPU_ATTENTIONPROGRAM_H
