//===- WarpFp8Wgmma.cpp - fp8 flash on fp8 wgmma (sm_90a) -----------------===//
//
// attn.flash over fp8 Q, K and V on the warp-specialized pipeline
// (WarpSpecialized.cpp) with fp8 wgmma (m64nNk32, QGMMA), after
// FlashAttention-3's fp8 path:
//
// * Q and K tiles are loaded by TMA as stored (128 fp8 of a row: one
//   128-byte swizzle atom; heads of 64 fill half of it, the box reading
//   zeros past the head, which QK does not multiply) and multiplied as
//   they are; q_scale * k_scale scales the dot products.
// * fp8 wgmma reads B only K-major, and V [keys, D] is N-major for PV: the
//   producer warpgroup loads each raw V tile by TMA one tile ahead and
//   transposes it into V^T ([D, keys], 128-byte swizzled), 4 x 4 bytes
//   per thread and step with byte permutes.
// * P's A registers need 4 adjacent keys of a row per register, where the
//   S accumulator holds pairs: keys 2t, 2t + 1 and 2t + 8, 2t + 9 of each
//   16 (t the lane's quad column). Instead of trading values between lanes,
//   V^T stores its keys in that order (byte position 16h + 4t + i of a
//   32-key step holds key 16h + 2t + {0, 1, 8, 9}[i]), so that each
//   register packs the lane's own four values (packP8).
// * P is scaled by 1 / |p_scale| in the exponent, quantized with
//   cvt.rn.satfinite (round to nearest even, saturating, as the seed's
//   P / p_scale rounding), and |p_scale| * v_scale multiplies the output
//   (accumulatorScale); the row sums are kept in the true units.
//
//===----------------------------------------------------------------------===//

#include "WarpProgram.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mlir::attn;

namespace mlir::attn::warp {

namespace {
/// The keys of a 4-byte word of V^T, relative to 16h + 2t (see above).
constexpr int64_t kWordKeys[4] = {0, 1, 8, 9};

/// prmt.b32: the bytes of (hi:lo) that `selector`'s nibbles pick.
Value permuteBytes(ImplicitLocOpBuilder &b, Value lo, Value hi,
                   uint32_t selector) {
  char text[40];
  snprintf(text, sizeof(text), "prmt.b32 $0, $1, $2, 0x%04x;", selector);
  return inlinePtx(b, b.getI32Type(), ValueRange{lo, hi}, text, "=r,r,r",
                   /*sideEffects=*/false);
}
} // namespace

SharedTile WarpAttentionBuilder::transposedValues(Value stage) {
  // Past the K/V ring, one V^T per buffer (fp8WgmmaGeometry; warpLaunchFor
  // reserves them).
  int64_t ctBytes = ct.getIntOrFloatBitWidth() / 8;
  int64_t vtElems = g.dPad * g.bn / ctBytes;
  SharedTile t;
  t.offset = e.add(e.idx(g.mRows * g.stride + g.stages * g.kvElems()),
                   e.mul(stage, e.idx(vtElems)));
  t.rows = g.dPad;
  t.layout = TileLayout::Swizzled;
  t.mem = view(t.offset, g.dPad, wgmma::kAtomRowBytes / ctBytes);
  return t;
}

void WarpAttentionBuilder::transposeValues(const SharedTile &raw,
                                           const SharedTile &vt) {
  // The tiles as rows of 32 words (128 bytes), chunk c of row r at chunk
  // c ^ (r % 8). Lane (x, t) = (lane / 4, lane % 4) of a producer warp
  // writes V^T word 4x + t of a row (keys 16x + 2t + {0, 1, 8, 9}): the 8
  // x are 8 distinct chunks of the row, so a warp's stores of a 4-byte
  // word to one row each hit 32 banks. In round i the lane reads dims
  // 4W .. 4W + 3 of its four keys, W = (8 warp + i + x) % 32: the lanes'
  // rows differ in key % 8 or in W / 4, so their reads hit 32 banks too.
  // 32-bit shared addresses throughout (index arithmetic is 64-bit, twice
  // the instructions of the producer's critical path), the swizzles as
  // XORs of byte offsets with per-lane constants. (Heads of 64: the raw
  // rows' first 16 words, W = (4 warp + i + x) % 16; W and W ^ 8 of the
  // lanes' 8 consecutive W still cover 32 banks.) Heads of 256 have raw
  // rows of two atoms, bn rows apart: word W lies in atom W / 32, at word
  // W % 32 of its row there (banks as for 128).
  assert(g.bn == 128 && (g.dPad == 64 || g.dPad == 128 || g.dPad == 256) &&
         "V^T rows of one 128-byte atom");
  Type i32 = b.getI32Type();
  auto c32 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, i32, v).getResult();
  };
  auto to32 = [&](Value v) {
    return arith::IndexCastUIOp::create(b, i32, v).getResult();
  };
  auto add = [&](Value a, Value c) {
    return arith::AddIOp::create(b, a, c).getResult();
  };
  auto xorI = [&](Value a, Value c) {
    return arith::XOrIOp::create(b, a, c).getResult();
  };
  auto orI = [&](Value a, Value c) {
    return arith::OrIOp::create(b, a, c).getResult();
  };
  auto xorC = [&](Value a, int64_t c) { return xorI(a, c32(c)); };
  auto andI = [&](Value a, int64_t c) {
    return arith::AndIOp::create(b, a, c32(c)).getResult();
  };
  auto shl = [&](Value a, int64_t c) {
    return arith::ShLIOp::create(b, a, c32(c)).getResult();
  };
  auto shr = [&](Value a, int64_t c) {
    return arith::ShRUIOp::create(b, a, c32(c)).getResult();
  };
  // (Words of a raw row's dims; each V^T row is 32 words of keys.)
  int64_t words = g.dPad / 4;
  Value rawBase = to32(tileAddress(raw, 0)), vtBase = to32(tileAddress(vt, 0));
  Value ptid = andI(to32(tid), kProducerWarps * kLanes - 1);
  Value x = andI(shr(ptid, 2), 7), t = andI(ptid, 3);
  // The lane's first key row of the raw tile (a byte address; the other
  // three are immediate offsets from it, which keeps the producer within
  // its 24 registers next to heads of 256), and the swizzle of each: byte
  // 4W of row key lies at 4W ^ (key % 8) * 16, key % 8 = 2t + c % 2.
  Value key0 = add(shl(x, 4), shl(t, 1));
  Value row0 = add(rawBase, shl(key0, 7));
  Value rowSwizzle = shl(t, 5);
  // V^T word 4x + t of row d: byte 16 (x ^ d % 8) + 4t of the row, that is
  // (16x + 4t) ^ 16 (d % 8).
  Value laneWord = orI(shl(x, 4), shl(t, 2));
  // Four rounds' loads at a time ahead of their permutes and stores, where
  // the producer has the registers for them (not beside heads of 256 or
  // three consumer warpgroups: registerSplit gives it 24 there).
  int64_t rounds = words / kProducerWarps,
          batch = producerRegisters() >= kFourRoundTransposeRegisters ? 4 : 1;
  Value first =
      e.mul(e.divU(e.remU(tid, e.idx(kProducerWarps * kLanes)), e.idx(kLanes)),
            e.idx(rounds));
  e.forLoop(first, e.add(first, e.idx(rounds)), e.idx(batch), [&](Value i0) {
    SmallVector<std::pair<Value, SmallVector<Value>>> loaded;
    for (int64_t k = 0; k < batch; ++k) {
      Value w = andI(add(add(to32(i0), c32(k)), x), words - 1);
      // (The swizzle XORs bits 4-6 of the byte in the row's atom.)
      Value wordBytes = shl(andI(w, 31), 2);
      if (words > 32)
        wordBytes =
            orI(wordBytes,
                shl(shr(w, 5), llvm::Log2_64(g.bn * wgmma::kAtomRowBytes)));
      Value cols[2] = {xorI(wordBytes, rowSwizzle),
                       xorI(wordBytes, xorC(rowSwizzle, 16))};
      Value at[2] = {add(row0, cols[0]), add(row0, cols[1])};
      SmallVector<Value> r;
      for (int64_t c = 0; c < 4; ++c)
        r.push_back(inlinePtx(b, i32, ValueRange{at[c % 2]},
                              "ld.shared.b32 $0, [$1+" +
                                  std::to_string(kWordKeys[c] * 128) + "];",
                              "=r,r"));
      loaded.emplace_back(w, r);
    }
    for (auto &[w, r] : loaded) {
      // 4 x 4 bytes: out[j] = byte j of r[0], r[1], r[2], r[3].
      Value lo01 = permuteBytes(b, r[0], r[1], 0x5140);
      Value hi01 = permuteBytes(b, r[0], r[1], 0x7362);
      Value lo23 = permuteBytes(b, r[2], r[3], 0x5140);
      Value hi23 = permuteBytes(b, r[2], r[3], 0x7362);
      Value out[4] = {permuteBytes(b, lo01, lo23, 0x5410),
                      permuteBytes(b, lo01, lo23, 0x7632),
                      permuteBytes(b, hi01, hi23, 0x5410),
                      permuteBytes(b, hi01, hi23, 0x7632)};
      // Row d = 4W + j at byte 128 d; d % 8 = 4 (W % 2) + j.
      Value dRows = add(vtBase, shl(w, 9));
      Value inRow = xorI(laneWord, shl(andI(w, 1), 6));
      for (int64_t j = 0; j < 4; ++j)
        inlinePtx(
            b, Type(), ValueRange{add(dRows, xorC(inRow, 16 * j)), out[j]},
            "st.shared.b32 [$0+" + std::to_string(128 * j) + "], $1;", "r,r");
    }
  });
}

void WarpAttentionBuilder::produceTransposed(
    const KvWalk &walk, llvm::function_ref<void()> issueQuery) {
  // Tile t's raw V lands on kRawValueBarrier + t % 2 in buffer t % 2,
  // loaded while tile t - 1 is transposed; V^T(t) is released on fullV
  // once every producer thread has written and fenced its part.
  Value lo = walk.lo, hi = walk.hi, bn = e.idx(g.bn);
  Value leader = e.eq(tid, e.idx(consumerThreads()));
  auto rawFull = [&](Value s) { return e.add(e.idx(kRawValueBarrier), s); };
  auto loadRaw = [&](Value n0, Value s) {
    nvgpu::MBarrierArriveExpectTxOp::create(b, bars, e.idx(tileBytes(g.bn)),
                                            rawFull(s), Value());
    issueTmaBoxes(walk, kvBuffers(s).v, vMap, rawFull(s), n0);
  };
  e.ifThen(e.andI(leader, e.lt(lo, hi)), [&] { loadRaw(lo, e.idx(0)); });
  e.forLoop(lo, hi, bn, [&](Value n0) {
    Value t = e.divU(e.sub(n0, lo), bn);
    Value s = e.remU(t, e.idx(2));
    Value next = e.add(n0, bn);
    KvBuffers buf = kvBuffers(s);
    e.ifThen(leader, [&] {
      // The other buffer's raw V (tile t - 1) was transposed before the
      // last producer barrier.
      e.ifThen(e.lt(next, hi), [&] { loadRaw(next, e.sub(e.idx(1), s)); });
      awaitFree(emptyK(s), t);
      nvgpu::MBarrierArriveExpectTxOp::create(b, bars, e.idx(tileBytes(g.bn)),
                                              fullK(s), Value());
      issueTmaBoxes(walk, buf.k, kMap, fullK(s), n0);
      e.ifThen(e.eq(t, e.idx(0)), issueQuery);
    });
    waitBarrier(rawFull(s), parityOf(t));
    awaitFree(emptyV(s), t);
    transposeValues(buf.v, transposedValues(s));
    // Generic-proxy writes that wgmma reads through the async proxy.
    wgmma::fenceProxyAsync(b);
    syncProducer();
    e.ifThen(leader,
             [&] { nvgpu::MBarrierArriveOp::create(b, bars, fullV(s)); });
  });
  e.ifThen(e.andI(leader, e.le(hi, lo)), issueQuery);
}

void WarpAttentionBuilder::loadFp8Scales() {
  // (fp8 q, k and v require all four scales: the verifier.)
  dotScale = e.mulF(reloaded(qScaleAtEntry), reloaded(kScaleAtEntry));
  Value p = reloaded(f.pScale);
  pScaleAbs = e.maxF(p, arith::NegFOp::create(b, p));
  pScaleLog2 = e.log2(pScaleAbs);
  // (The sign of p_scale cancels: P / p_scale rounds symmetrically.)
  accumulatorScale = e.mulF(pScaleAbs, reloaded(vScaleAtEntry));
}

SmallVector<Value> WarpAttentionBuilder::packP8(ArrayRef<Value> p) {
  // Key step kk (S tiles 4kk .. 4kk + 3, accumulator order: element i of
  // tile j at 4j + i, rows quadRow + 8 (i / 2)): register 0 is row quadRow
  // of tiles 4kk and 4kk + 1, register 1 row quadRow + 8 of those, 2 and 3
  // the same of tiles 4kk + 2 and 4kk + 3 (the key order of V^T).
  // cvt packs its second operand into the low byte.
  auto cvt4 = [&](Value x0, Value x1, Value x2, Value x3) {
    std::string type = isa<Float8E4M3FNType>(vType) ? "e4m3x2" : "e5m2x2";
    std::string text = "{\n.reg .b16 lo, hi;\ncvt.rn.satfinite." + type +
                       ".f32 lo, $2, $1;\ncvt.rn.satfinite." + type +
                       ".f32 hi, $4, $3;\nmov.b32 $0, {lo, hi};\n}";
    return inlinePtx(b, b.getI32Type(), ValueRange{x0, x1, x2, x3}, text,
                     "=r,f,f,f,f", /*sideEffects=*/false);
  };
  SmallVector<Value> regs;
  for (size_t j = 0; j + 3 < p.size() / 4; j += 4) {
    auto at = [&](size_t tile, int64_t i) { return p[4 * tile + i]; };
    for (size_t pair : {j, j + 2})
      for (int64_t h : {0, 2})
        regs.push_back(cvt4(at(pair, h), at(pair, h + 1), at(pair + 1, h),
                            at(pair + 1, h + 1)));
  }
  return regs;
}

} // namespace mlir::attn::warp
