//===- WaveAttention.h - attention programs on AMD matrix cores -*- C++ -*-===//
//
// The ROCDL program target: one workgroup per program of the tiled grid,
// `warps` waves (wave64 on CDNA, wave32 on RDNA3), each owning a slab of
// 16-row fragments of the M tile. Q and one K/V tile are staged in LDS
// through registers (the shared TileStager: 16-byte chunks, fp8 decoded
// and scaled, V transposed); QK and PV run on 16x16x16 matrix instructions
// (amdgpu.mfma on gfx90a/gfx942, amdgpu.wmma on gfx1100) in transposed
// form, S^T = K Q^T and O^T = V^T P^T, so that every lane owns one query
// row of a fragment (lane % 16) in S, P and O alike: the online softmax
// reduces a row over the lanes of the same row with xor shuffles, P feeds
// PV from registers (MFMA: as it is; WMMA: with its other half-wave's
// keys), and the running max and sum are one value per fragment.
// The element math (scores, masks, dropout, initial state, epilogue
// factor) is AttentionMath's, shared with the CPU and NVVM programs.
//
// Fragment layouts (16x16 blocks; lane l, group g = l / 16):
//   MFMA 16x16x16 (wave64): A[l % 16][4g + j], B[4g + j][l % 16],
//                           D[4g + j][l % 16], j < 4
//   WMMA 16x16x16 (wave32): A[l % 16][j], B[j][l % 16] (j < 16, both
//                           half-waves alike), D[2j + g][l % 16], j < 8
// f32 (CDNA only; RDNA3 has no f32 WMMA) runs each 16x16x16 step as four
// MFMA 16x16x4 f32 (v_mfma_f32_16x16x4f32, full f32): the j-th takes the
// lane's k = 4g + j as its k = g, so operands and P keep the layouts above.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_CONVERSION_ATTNTOGPU_WAVEATTENTION_H
#define ATTN_LIB_CONVERSION_ATTNTOGPU_WAVEATTENTION_H

#include "attn/Conversion/AttnToGPU/AttentionProgram.h"
#include "attn/Target/Chips.h"

namespace mlir::attn::wave {

/// The 16x16x16 matrix instruction of a chip and its fragment layouts.
struct MatrixCore {
  int64_t wave;
  bool wmma;
  /// A/B elements per lane: k offsets kOffset(g) .. + operandElems().
  int64_t operandElems() const { return wmma ? 16 : 4; }
  /// Accumulator elements per lane.
  int64_t accElems() const { return wmma ? 8 : 4; }
  /// Lanes that hold the same fragment row (l % 16) or column: groups of
  /// 16 lanes, xor-shuffled over in row reductions.
  int64_t groups() const { return wave / 16; }
};

/// Static tile geometry of a program. Wave w owns rows
/// [w * 16 * mFrags, (w + 1) * 16 * mFrags).
struct Geometry {
  int64_t waves, mFrags, mRows;
  int64_t dPad;     // head dim rounded up to 16
  int64_t stride;   // LDS row stride of Q and K (elements; 16 bytes of pad)
  int64_t bn;       // keys per KV tile (a multiple of 16)
  int64_t vtStride; // row stride of the transposed V tile ([dPad, bn])
  int64_t dBlocks() const { return dPad / 16; }
  int64_t nBlocks() const { return bn / 16; }
  int64_t ldsElems() const {
    return mRows * stride + bn * stride + dPad * vtStride;
  }
};

/// The geometry of tile shape `s` with compute-type elements of
/// `elemBytes`.
Geometry geometryOf(const TileShape &s, int64_t elemBytes);

class WaveProgramTarget : public GpuProgramTarget {
public:
  WaveProgramTarget(Block *entry, Value shared, Type computeType,
                    int64_t threads, AmdChip chip)
      : GpuProgramTarget(entry, shared, computeType, threads), chip(chip) {}
  void emitProgram(LoopEmitter &e, const TileShape &shape,
                   const AttentionFeatures &f, const AttentionOutput &o,
                   Value q, const ProgramRows &rows,
                   ArrayRef<KvWalk> walks) override;

private:
  AmdChip chip;
};

/// Emits one program (WaveAttention.cpp: the walk and the softmax;
/// WaveMatrix.cpp: LDS tiles and matrix instructions).
class WaveAttentionBuilder : public AttentionProgram {
public:
  WaveAttentionBuilder(LoopEmitter &e, const TileShape &shape,
                       const AttentionFeatures &f, const AttentionOutput &o,
                       Value q, Block *entry, Value shared, Type ct,
                       int64_t threads, AmdChip chip)
      : AttentionProgram(e, shape, f, o, q, entry),
        g(geometryOf(shape, ct.getIntOrFloatBitWidth() / 8)), mc{chip.waveSize,
                                                                 chip.wmma},
        shared(shared), ct(ct), threads(threads) {}

private:
  // AttentionProgram's hooks: slot m is this lane's row of fragment m.
  void setUp(const ProgramRows &rows, ArrayRef<KvWalk> walks) override;
  int64_t rowSlots() const override { return g.mFrags; }
  int64_t accumulatorElems() const override {
    return g.mFrags * g.dBlocks() * mc.accElems();
  }
  void stageQuery(const ProgramRows &rows) override;
  Value slotRow(int64_t slot) override { return rowOf(slot); }
  Value isRowLeader() override { return e.eq(group, e.idx(0)); }
  Value reduceRow(Value x, bool isMax) override { return rowReduce(x, isMax); }
  void walkRange(const ProgramRows &rows, const KvWalk &walk, Value lo,
                 Value hi) override;
  void visitOutputs(
      int64_t slot,
      llvm::function_ref<void(Value d, Value v, bool partial)> store) override;

  // WaveMatrix.cpp
  void setUpThreads();
  /// For the duration of one KV tile: thread coordinates that LLVM cannot
  /// hoist out of the KV loop (see pinned()).
  void pinThreadCoordinates();
  void unpinThreadCoordinates();
  Value pinned(Value index);
  /// A [rows, cols] view of LDS from element `offset` (of ct).
  Value view(int64_t offset, int64_t rows, int64_t cols);
  TileStager stager();
  /// Stages K of keys [n0, n0 + nValid) into kS, and V into vtS.
  void stageTile(const KvWalk &walk, Value n0, Value nValid);
  /// The operand elements of this lane from row `row` of `tile`, columns
  /// col0 + kOffset .. + operandElems().
  Value operand(Value tile, Value row, int64_t col0);
  /// D = A B + C on the chip's 16x16x16 instruction.
  Value mma(Value a, Value bOperand, Value c);
  /// Row `r` of the 16x16 accumulator element j belongs to (its M index).
  Value accRow(int64_t j);
  /// P of 16-key block `nb` of fragment m as PV's B operand.
  Value probabilityOperand(ArrayRef<Value> p, int64_t m, int64_t nb);
  /// Keeps the instruction scheduler from moving anything across: between
  /// the k steps of wide tiles, so that it does not load every operand
  /// ahead (and spill) next to a register-filling O.
  void scheduleFence();
  /// Combines `x` over the lanes that share its row.
  Value rowReduce(Value x, bool isMax);

  // WaveAttention.cpp
  /// One KV tile: S^T = K Q^T, softmax, O^T += V^T P^T.
  void tile(const ProgramRows &rows, Value n0, Value nValid);
  /// Query row of fragment m that this lane owns.
  Value rowOf(int64_t m) {
    return e.add(e.add(waveRow0, row16), e.idx(16 * m));
  }
  Value accIndex(int64_t m, int64_t db, int64_t j) {
    return e.idx((m * g.dBlocks() + db) * mc.accElems() + j);
  }

  Geometry g;
  MatrixCore mc;
  Value shared;
  Type ct;
  int64_t threads;

  Value tid, lane, wave, row16, group, waveRow0;
  std::tuple<Value, Value, Value, Value> unpinned; // tid, row16, group, row0
  Value qS, kS, vtS; // LDS tiles: [mRows, stride], [bn, stride],
                     // [dPad, vtStride]
};

} // namespace mlir::attn::wave

#endif // ATTN_LIB_CONVERSION_ATTNTOGPU_WAVEATTENTION_H
