//===- WaveMatrix.cpp - LDS tiles and matrix instructions of wave programs ===//
//
// The ROCDL program's (WaveAttention.h) threads, LDS tiles and their
// staging, and the MFMA / WMMA fragments.
//
//===----------------------------------------------------------------------===//

#include "WaveAttention.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::wave;

Geometry mlir::attn::wave::geometryOf(const TileShape &s, int64_t elemBytes) {
  Geometry g;
  int64_t frags = llvm::alignTo(s.rows(), 16) / 16;
  g.waves = s.warps > 0 ? s.warps : std::min<int64_t>(4, frags);
  g.mFrags = (frags + g.waves - 1) / g.waves;
  g.mRows = g.waves * 16 * g.mFrags;
  g.dPad = llvm::alignTo(s.headDim, 16);
  g.bn = llvm::alignTo(s.blockN, 16);
  // 16 bytes of padding per row: the 16 lanes that read one fragment hit
  // different banks, and chunks stay 16-byte aligned.
  g.stride = g.dPad + 16 / elemBytes;
  g.vtStride = g.bn + 16 / elemBytes;
  return g;
}

namespace mlir::attn::wave {

void WaveAttentionBuilder::setUpThreads() {
  tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  lane = e.remU(tid, e.idx(mc.wave));
  wave = e.divU(tid, e.idx(mc.wave));
  row16 = e.remU(lane, e.idx(16));
  group = e.divU(lane, e.idx(16));
  waveRow0 = e.mul(wave, e.idx(16 * g.mFrags));
}

Value WaveAttentionBuilder::pinned(Value index) {
  // Every LDS address and key column of a tile is a lane offset plus a
  // constant. Left loop-invariant, LLVM hoists each 64-bit sum out of the
  // KV loop into its own registers (hundreds on wave32), and the kernel
  // spills; a copy through a side-effecting v_mov keeps them in the loop,
  // where they fold into the instructions' immediate offsets.
  Type i32 = b.getI32Type();
  Value v = arith::IndexCastOp::create(b, i32, index);
  auto asmOp = LLVM::InlineAsmOp::create(
      b, i32, ValueRange{v}, "v_mov_b32 $0, $1", "=v,v",
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
      ArrayAttr());
  return arith::IndexCastOp::create(b, b.getIndexType(), asmOp.getRes());
}

void WaveAttentionBuilder::pinThreadCoordinates() {
  unpinned = {tid, row16, group, waveRow0};
  tid = pinned(tid);
  row16 = pinned(row16);
  group = pinned(group);
  waveRow0 = pinned(waveRow0);
}

void WaveAttentionBuilder::unpinThreadCoordinates() {
  std::tie(tid, row16, group, waveRow0) = unpinned;
}

Value WaveAttentionBuilder::view(int64_t offset, int64_t rows, int64_t cols) {
  auto space =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  auto type =
      MemRefType::get({rows, cols}, ct, MemRefLayoutAttrInterface(), space);
  Value bytes = e.idx(offset * ct.getIntOrFloatBitWidth() / 8);
  return memref::ViewOp::create(b, type, shared, bytes, ValueRange{});
}

TileStager WaveAttentionBuilder::stager() {
  // No asynchronous copies: whole chunks go through registers, fp8 through
  // Fp8Codec's exact integer decode.
  return TileStager(e, tid, threads, shape.headDim, ct, TileStager::Hooks{});
}

void WaveAttentionBuilder::stageTile(const KvWalk &walk, Value n0,
                                     Value nValid) {
  KvTileRows tile(e, walk, n0, nValid, shape.headDim);
  TileStager st = stager();
  auto plain = [](Value r, Value x) { return SmallVector<Value>{r, x}; };
  st.stage(kS, plain, g.bn, g.dPad,
           [&](Value r) { return tile.key(r, /*isK=*/true); });
  if (!walk.valueKeyMajor) {
    // Key rows of V, stored transposed: V^T is PV's A operand.
    st.stage(
        vtS,
        [](Value r, Value x) {
          return SmallVector<Value>{x, r};
        },
        g.bn, g.dPad, [&](Value r) { return tile.key(r, /*isK=*/false); },
        /*transposed=*/true);
    return;
  }
  st.stage(vtS, plain, g.dPad, g.bn,
           [&](Value d) { return tile.valueColumn(d); });
}

Value WaveAttentionBuilder::operand(Value tile, Value row, int64_t col0) {
  Value col = e.idx(col0);
  if (!mc.wmma)
    col = e.add(col, e.mul(group, e.idx(mc.operandElems())));
  auto type = VectorType::get({mc.operandElems()}, ct);
  return vector::LoadOp::create(b, type, tile, ValueRange{row, col});
}

Value WaveAttentionBuilder::mma(Value a, Value bOperand, Value c) {
  Type accType = c.getType();
  if (ct.isF32()) {
    // Four MFMA 16x16x4 f32: the j-th sums k = 4g + j over the groups g.
    for (int64_t j = 0; j < mc.operandElems(); ++j)
      c = amdgpu::MFMAOp::create(b, accType, b.getI32IntegerAttr(16),
                                 b.getI32IntegerAttr(16),
                                 b.getI32IntegerAttr(4), b.getI32IntegerAttr(1),
                                 vector::ExtractOp::create(b, a, j),
                                 vector::ExtractOp::create(b, bOperand, j), c);
    return c;
  }
  if (mc.wmma)
    return amdgpu::WMMAOp::create(b, accType, b.getI32IntegerAttr(16),
                                  b.getI32IntegerAttr(16),
                                  b.getI32IntegerAttr(16), a, bOperand, c);
  return amdgpu::MFMAOp::create(
      b, accType, b.getI32IntegerAttr(16), b.getI32IntegerAttr(16),
      b.getI32IntegerAttr(16), b.getI32IntegerAttr(1), a, bOperand, c);
}

Value WaveAttentionBuilder::accRow(int64_t j) {
  if (mc.wmma)
    return e.add(group, e.idx(2 * j));
  return e.add(e.mul(group, e.idx(4)), e.idx(j));
}

Value WaveAttentionBuilder::probabilityOperand(ArrayRef<Value> p, int64_t m,
                                               int64_t nb) {
  // p holds this lane's keys accRow(j) of block nb for its row: MFMA's B
  // operand wants keys 4g + j, which they are; WMMA's wants all 16 keys,
  // the odd (even) ones from the other half-wave.
  int64_t n = mc.accElems(), base = (m * g.nBlocks() + nb) * n;
  auto operandType = VectorType::get({mc.operandElems()}, ct);
  SmallVector<Value> mine;
  auto toCt = [&](Value x) -> Value {
    return ct.isF32() ? x : arith::TruncFOp::create(b, ct, x);
  };
  for (int64_t j = 0; j < n; ++j)
    mine.push_back(toCt(p[base + j]));
  if (!mc.wmma)
    return vector::FromElementsOp::create(b, operandType, mine);
  SmallVector<Value> other;
  for (int64_t j = 0; j < n; ++j)
    other.push_back(toCt(gpu::ShuffleOp::create(b, p[base + j], 16, mc.wave,
                                                gpu::ShuffleMode::XOR)
                             .getShuffleResult()));
  SmallVector<Value> even, odd; // for group 0 and group 1
  for (int64_t j = 0; j < n; ++j) {
    even.append({mine[j], other[j]});
    odd.append({other[j], mine[j]});
  }
  return e.select(e.eq(group, e.idx(0)),
                  vector::FromElementsOp::create(b, operandType, even),
                  vector::FromElementsOp::create(b, operandType, odd));
}

void WaveAttentionBuilder::scheduleFence() {
  // wave32 WMMA operands are 8 VGPRs each, O up to 128: loaded all ahead,
  // they spill (CDNA's 2-VGPR operands do not need the fence).
  if (mc.wmma)
    amdgpu::SchedBarrierOp::create(b, amdgpu::sched_barrier_opt_enum::none);
}

Value WaveAttentionBuilder::rowReduce(Value x, bool isMax) {
  for (int64_t s = 16; s < mc.wave; s *= 2) {
    Value y = gpu::ShuffleOp::create(b, x, s, mc.wave, gpu::ShuffleMode::XOR)
                  .getShuffleResult();
    x = isMax ? e.maxF(x, y) : e.addF(x, y);
  }
  return x;
}

} // namespace mlir::attn::wave
