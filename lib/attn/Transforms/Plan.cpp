//===- Plan.cpp - attn-plan: choose tile schedules --------------*- C++ -*-===//

#include "attn/IR/AttnOps.h"
#include "attn/Target/Chips.h"
#include "attn/Transforms/Passes.h"
#include "attn/Transforms/Schedule.h"

#include <numeric>

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNPLAN
#include "attn/Transforms/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;

namespace {
/// Per-target sizes: query rows of an M tile and keys of a KV tile.
struct TargetTiles {
  int64_t rows, keys;
};

std::optional<TargetTiles> tilesFor(StringRef target) {
  if (target == "cpu")
    return TargetTiles{16, 32};
  if (target == "nvvm" || target == "rocdl")
    return TargetTiles{64, 64};
  return std::nullopt;
}

/// AMD matrix-core families: CDNA (wave64 MFMA) and RDNA3 (wave32 WMMA).
enum class AmdFamily { cdna, rdna3 };

std::optional<AmdFamily> amdFamily(StringRef chip) {
  std::optional<AmdChip> amd = AmdChip::parse(chip);
  if (!amd)
    return std::nullopt;
  return amd->wmma ? AmdFamily::rdna3 : AmdFamily::cdna;
}

/// ROCDL programs: `waves` waves of 32 or 16 query rows (two or one 16-row
/// fragments of 16x16x16 MFMA or WMMA); Q and one K and V tile live in LDS,
/// whose 64 KB budget leaves 16 KB to the compiler and the reductions here, so
/// the KV tile is the largest of 64, 32 and 16 keys that fits in 48 KB.
struct AmdTiles {
  int64_t rows, keys, waves;
};

AmdTiles amdTiles(AmdFamily family, bool prefill, int64_t headDim,
                  int64_t elemBytes) {
  int64_t dPad = (headDim + 15) / 16 * 16;
  // CDNA prefill: 4 waves of 32 rows (two 16x16 MFMA fragments); heads
  // over 128 take 64 rows (16 per wave) so that Q fits next to K and V.
  // Decode-shaped programs and RDNA3: 4 waves of 16 rows.
  int64_t rows = family == AmdFamily::cdna && prefill && dPad <= 128 ? 128 : 64;
  constexpr int64_t kBudget = 48 * 1024;
  int64_t keys = 64;
  while (keys > 16 && (rows + 2 * keys) * dPad * elemBytes > kBudget)
    keys /= 2;
  // f32 tiles (twice the bytes) of large heads also take fewer rows.
  while (rows > 16 && (rows + 2 * keys) * dPad * elemBytes > kBudget)
    rows /= 2;
  return {rows, keys, std::min<int64_t>(4, rows / 16)};
}

/// Whether the op is a flash or block-sparse op whose K and V the bulk
/// tensor copy engine can load as they are: stored like Q (f16 or bf16,
/// not quantized on the way) with contiguous rows of whole 64-column
/// swizzle atoms.
bool tmaOperands(Operation *op) {
  Value q, k, v;
  if (auto flash = dyn_cast<FlashOp>(op)) {
    if (flash.getQuantizeTo())
      return false;
    q = flash.getQ(), k = flash.getK(), v = flash.getV();
  } else if (auto sparse = dyn_cast<BlockSparseOp>(op)) {
    q = sparse.getQ(), k = sparse.getK(), v = sparse.getV();
  } else {
    return false;
  }
  Type qType = cast<MemRefType>(q.getType()).getElementType();
  if (!qType.isF16() && !qType.isBF16())
    return false;
  for (Value kv : {k, v}) {
    auto type = cast<MemRefType>(kv.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (type.getElementType() != qType || type.getRank() != 3 ||
        type.getDimSize(2) % 64 ||
        failed(type.getStridesAndOffset(strides, offset)) || strides[2] != 1)
      return false;
  }
  return true;
}

} // namespace

/// The largest KV tile a block-sparse program should walk its layout
/// blocks with: each block is its own range of keys, so a tile longer than
/// the block is partly masked work. Tiles of 16 keys (one MMA step) up to
/// the largest power of two dividing the block (blocks of 48 take three
/// tiles of 16, not two of 32 with half of one masked). On H200 (S = 8192,
/// bench/results/2026-12-02-h200-session33.md) blocks of 16 ran 2.6-5.5x
/// faster on 16-key tiles than on the 32-64 the heads' rules gave (heads
/// of 80-192; 64 also spilled 156-548 bytes for heads of 80-112), blocks
/// of 32 with heads of 112 1.9x on 32 than on 64.
static int64_t sparseKeyLimit(BlockSparseOp op) {
  int64_t block = op.getBlockSizeAttr().getInt();
  return std::max<int64_t>(16, block & -block);
}

FailureOr<ScheduleAttr>
mlir::attn::defaultSchedule(Operation *op, StringRef target, StringRef chip) {
  std::optional<TargetTiles> tiles = tilesFor(target);
  if (!tiles)
    return failure();
  auto kernel = dyn_cast<AttnKernelOpInterface>(op);
  if (!kernel)
    return failure();
  int64_t group = kernel.getNumQueryHeads() / kernel.getNumKvHeads();
  int64_t pack = 0, qBlockLimit = 0;
  Value keySource = kernel.getKeySource(); // where most staged keys come from
  if (auto bs = dyn_cast<BlockSparseOp>(op)) {
    // Heads with their own layouts walk different CSR rows.
    if (bs.hasPerHeadLayout())
      pack = 1;
    qBlockLimit = bs.getQueryBlockSize();
  }
  // GQA packing: all query heads of a KV head share each KV tile load.
  if (pack == 0)
    pack = group;
  int64_t headDim = cast<MemRefType>(op->getOperand(0).getType()).getDimSize(2);
  // sm_90a prefix prefill of heads over 128 (warpgroup programs staging by
  // cp.async, 255 registers): eight packed heads of 16 rows spilled 16
  // bytes, four of 32 rows none. Larger groups take two programs per tile.
  if (target == "nvvm" && chip == "sm_90a" && isa<PrefixPrefillOp>(op) &&
      headDim > 128 && pack > 4 && pack % 4 == 0)
    pack = 4;
  if (target == "rocdl") {
    std::optional<AmdFamily> family = amdFamily(chip);
    if (!family)
      return failure();
    Type qType = cast<MemRefType>(op->getOperand(0).getType()).getElementType();
    AmdTiles t =
        amdTiles(*family, !isa<UnifiedOp>(op), headDim, qType.isF32() ? 4 : 2);
    int64_t blockQ = std::max<int64_t>(1, t.rows / pack);
    if (qBlockLimit)
      blockQ = std::gcd(blockQ, qBlockLimit);
    // RDNA3 holds a bias tile in VGPRs next to S: a head of 128 spilled 106
    // VGPRs at 64 keys on gfx1100 (f16, f32 bias); 32 fit.
    if (auto flash = dyn_cast<FlashOp>(op);
        flash && flash.getBias() && *family == AmdFamily::rdna3 && headDim > 64)
      t.keys = std::min<int64_t>(t.keys, 32);
    if (auto sparse = dyn_cast<BlockSparseOp>(op))
      t.keys = std::min(t.keys, sparseKeyLimit(sparse));
    return ScheduleAttr::get(op->getContext(), blockQ, t.keys, pack, t.waves);
  }
  int64_t rows = tiles->rows;
  // Prefill-shaped GPU programs take 128-row M tiles: with 4 warps of 32
  // rows each K/V fragment read from shared memory feeds two MMAs (as in
  // FlashAttention-2); large heads keep 16 rows per warp (8 warps) so that
  // the [rows x D] accumulator fits in registers. The unified op's programs
  // are mostly decode rows and keep the smaller tile.
  // K/V of another type than Q (fp8 caches) are dequantized through
  // registers while staging, which needs the registers of the second M
  // fragment.
  auto elementType = [](Value v) {
    return cast<MemRefType>(v.getType()).getElementType();
  };
  bool converted = elementType(keySource) != elementType(op->getOperand(0));
  // sm_90a: prefill programs of two warpgroups of 64 rows on wgmma (one
  // 16-row fragment per warp), whose tiles are whole 64-column swizzle
  // atoms. With one fragment per warp, dequantizing caches fit too.
  bool atoms = (headDim + 15) / 16 * 16 % 64 == 0 && headDim <= 256;
  bool f32 = elementType(op->getOperand(0)).isF32();
  bool warpgroups = target == "nvvm" && chip == "sm_90a" && atoms && !f32 &&
                    !isa<UnifiedOp, BlockSparseOp>(op) && 128 % pack == 0;
  // f32 programs (tf32 mma.sync) hold tiles of twice the bytes: 64 rows
  // of one fragment per warp, single-buffered, and KV tiles of 64 keys up
  // to heads of 64, 32 up to 128 and 16 beyond keep the shared memory under
  // 100 KB and the registers of the 255 a thread has.
  if (target == "nvvm" && f32) {
    int64_t blockQ = std::max<int64_t>(1, 64 / pack);
    if (qBlockLimit)
      blockQ = std::gcd(blockQ, qBlockLimit);
    int64_t keys = headDim <= 64 ? 64 : headDim <= 128 ? 32 : 16;
    // Prefix prefill gathers vLLM's f32 K cache ([.., D / 4, page, 4]: no
    // 8-element chunks) element by element: at 32 keys a head of 80 spilled
    // on sm_90a.
    if (isa<PrefixPrefillOp>(op) && headDim > 64)
      keys = 16;
    // Quantizing f32 tiles to fp8 on the way (flash quantize_to) holds
    // both forms: a head of 64 spilled 4 bytes at 64 keys on sm_90a.
    if (auto flash = dyn_cast<FlashOp>(op); flash && flash.getQuantizeTo())
      keys = std::min<int64_t>(keys, 32);
    // Row log-sum-exps keep each row's max and sum to the end: a head of 64
    // spilled 4 bytes at 64 keys on sm_90a.
    auto flash = dyn_cast<FlashOp>(op);
    auto unified = dyn_cast<UnifiedOp>(op);
    if ((flash && flash.getLse()) || (unified && unified.getLse()))
      keys = std::min<int64_t>(keys, 32);
    if (auto sparse = dyn_cast<BlockSparseOp>(op))
      keys = std::min(keys, sparseKeyLimit(sparse));
    return ScheduleAttr::get(op->getContext(), blockQ, keys, pack, 0);
  }
  // sm_90a prefix prefill over fp8 caches with heads that are no whole
  // swizzle atoms (80, 96, 112, ...) decodes in registers like sm_80's,
  // but in the 128-row programs of 16-bit caches: they fit the 255
  // registers there, and twice the rows a decoded tile ran 1.58x faster
  // than 64 for a head of 96 on H200 (84 -> 133 TFLOP/s, the seed 98;
  // bench/results/2026-11-29-h200-prefix-schedules.md).
  bool decodesForWideTiles = target == "nvvm" && chip == "sm_90a" &&
                             converted && isa<PrefixPrefillOp>(op);
  bool prefill = target != "cpu" && !isa<UnifiedOp>(op) &&
                 (!converted || warpgroups || decodesForWideTiles);
  if (prefill)
    rows = 128;
  int64_t blockQ = std::max<int64_t>(1, rows / pack);
  if (qBlockLimit)
    blockQ = std::gcd(blockQ, qBlockLimit);
  int64_t keys = tiles->keys, warps = 0;
  // 64-row tiles (block-sparse query blocks of 64) are two warps of 32 rows.
  // On NVVM, heads strictly between 64 and 128 spilled 240-600 bytes there
  // (Q, S and O of two fragments): they take four warps of 16 rows, and
  // heads over 96 also 32-key tiles (two per layout block of 64).
  bool midHead = headDim > 64 && headDim < 128;
  if (prefill && blockQ * pack == 64 && headDim <= 128)
    warps = target == "nvvm" && midHead ? 4 : 2;
  if (target == "nvvm" && isa<BlockSparseOp>(op) && warps == 4 &&
      headDim > 96 && headDim < 128)
    keys = 32;
  // Block-sparse ranges are whole layout blocks: one KV tile each.
  if (prefill && blockQ * pack >= 64 && headDim <= 128 && headDim > 64 &&
      !isa<BlockSparseOp>(op))
    keys = 32;
  if (prefill && blockQ * pack >= 128) {
    warps = headDim <= 128 ? 4 : 8;
    // Two fragments of S [32 x keys] next to O [32 x D]: heads over 64 take
    // 32-key tiles to stay within 255 registers.
    if (headDim > 64 && headDim <= 128)
      keys = 32;
    // Paged walks address each key through the block table while staging;
    // next to 8 warps of [16 x 256] accumulators that needs 16-key tiles
    // (32 spilled on sm_80 and sm_89).
    if (headDim > 128 && isa<PrefixPrefillOp>(op))
      keys = 16;
    // Decoding them (fp8 caches on sm_90a) up to heads of 160 fits 32:
    // 1.16x over 16 for a head of 160 on H200; 224 spilled 136 bytes.
    if (decodesForWideTiles && headDim > 128 && headDim <= 160)
      keys = 32;
    // An additive bias tile next to S: a head of 128 spilled 16 bytes at
    // 4 warps of 32 rows (f16, f32 bias; sm_80/sm_89); 8 warps of 16 fit.
    if (auto flash = dyn_cast<FlashOp>(op);
        flash && flash.getBias() && headDim > 64)
      warps = 8;
  }
  // The warpgroup programs walk 128-key tiles; 64 for heads over 128,
  // whose O takes twice the registers, and for heads of 64, whose MMAs are
  // short next to the softmax (64-key tiles measured 3-6% faster there on
  // H100 and H200). Dequantizing (fp8) caches take 128 too: 14% faster
  // than 64 for prefix prefill on H200.
  if (warpgroups && blockQ * pack >= 128) {
    warps = 8;
    keys = headDim > 64 && headDim <= 128 ? 128 : 64;
  }
  // Otherwise each warp holds a [16 x D] accumulator: halve the KV tile for
  // large heads so that S and O fit together, and quarter it when the
  // staging dequantizes (fp8 caches).
  if (target != "cpu" && !warps && headDim > 128)
    keys /= converted ? 4 : 2;
  // Block-sparse programs of one or two warps (16-32 rows: small query
  // blocks of one head, or a few packed heads' rows): ptxas gives their
  // 32-64 threads 255 registers and still spilled on sm_90a at 64 keys for
  // heads of 80-112 (156-548 bytes) and at 32 keys for heads of 160-192
  // (172-456 bytes; bench/results/2026-12-02-h200-session33.md). 32 and 16
  // keys fit.
  if (target == "nvvm" && isa<BlockSparseOp>(op) && !warps &&
      blockQ * pack <= 32 && headDim > 64 && headDim != 128 && headDim < 256)
    keys = std::min<int64_t>(keys, headDim < 128 ? 32 : 16);
  // Unified programs of heads between 64 and 128 take 32-key tiles: ptxas
  // gives their 128 threads 168 registers (three programs per SM), and at
  // 64 keys a head of 96 spilled there.
  if (target == "nvvm" && isa<UnifiedOp>(op) && headDim > 64 && headDim < 128)
    keys = 32;
  // fp8 queries (unified) keep Q as fp8 and as its converted fragments:
  // with per-(sequence, KV head) descales and a window or softcap, heads of
  // 128 at 64 keys spilled 28-64 bytes on sm_90a, heads of 256 at 32 keys
  // 4-16, and split-KV programs at 32 keys 4 (vLLM's full unified grid).
  // 16-key tiles (one page of 16) spill in none of them. (On sm_89 ptxas
  // gives 16-key programs 128 registers and spills; 64 keys fit there.)
  if (target == "nvvm" && chip == "sm_90a" && isa<UnifiedOp>(op) &&
      headDim > 64 &&
      isa<Float8E4M3FNType, Float8E5M2Type>(elementType(op->getOperand(0))))
    keys = 16;
  // Flash over fp8 Q, K and V on fp8 mma.sync (sm_89; wgmma chips take
  // fp8 wgmma) keeps Q as fp8 and as its converted fragments: a head of
  // 256 spilled 28 bytes at 64 keys on sm_89 (causal); 32 keys fit.
  if (auto flash = dyn_cast<FlashOp>(op);
      target == "nvvm" && flash && !warpgroups && headDim > 128 &&
      NvidiaChip::parse(chip).fp8 && isFp8(elementType(flash.getQ())) &&
      isFp8(elementType(flash.getK())))
    keys = std::min<int64_t>(keys, 32);
  // Flash tiles quantized to fp8 while staging (quantize_to) take 32 keys
  // on the mma.sync programs: 64 spilled 20 bytes for a head of 32.
  if (auto flash = dyn_cast<FlashOp>(op);
      target == "nvvm" && flash && flash.getQuantizeTo() && !warpgroups)
    keys = std::min<int64_t>(keys, 32);
  // Philox dropout draws next to two 16-row fragments of S in each warp
  // (mma.sync programs of 32 rows a warp): heads of 16-32 spilled 16-156
  // bytes at 64 keys (sm_80, sm_89, sm_90a) and heads of 80 12 at 32
  // (sm_90a); half the keys fit, and on H200 ran 1.09x faster (heads of 32;
  // bench/results/2026-12-02-h200-session34.md). Heads of 128 fit 32.
  if (auto flash = dyn_cast<FlashOp>(op);
      target == "nvvm" && flash && flash.getDropoutP() && warps &&
      blockQ * pack / warps >= 32 && (keys >= 64 || midHead))
    keys = std::max<int64_t>(16, keys / 2);
  if (auto sparse = dyn_cast<BlockSparseOp>(op))
    keys = std::min(keys, sparseKeyLimit(sparse));
  // sm_90a flash over dense K/V stored like Q (f16/bf16, contiguous rows):
  // the Hopper pipeline (AttnToGPU/NVVM/WarpSpecialized.cpp): K/V by TMA,
  // a producer warpgroup, and two consumer warpgroups in pingpong.
  // On H100 (2026-11-24, bench/results/2026-11-24-h100-ws.md) heads of 64
  // ran 24% faster there on 128-key tiles than on 64 (the MMAs are longer
  // next to the softmax), and heads of 256 4-6% faster without pingpong
  // (their O takes the registers that two tiles in flight need). The
  // persistent form (one block per SM, each claiming the next program:
  // causal ones longest first) runs faster where programs are few a sequence:
  // each block's prologue and epilogue then overlap the next program's loads.
  // On H200 (bench/results/2026-11-29-h200-session19.md) 3-12% at S = 512-1024
  // (non-causal) and 3-26% for causal S = 512-4096 (heads of 64 against
  // their three warpgroups), level or slower above. The shapes are dynamic,
  // so the caller says which regime a call is in: flash ops carrying
  // kShortSequencesHint (the Python ops set it when the tokens average at
  // most 1024 a sequence, 4096 if causal) take it, those with bias,
  // dropout or lse excepted (their persistent programs are untested).
  // sm_90a block-sparse programs on the same pipeline: a producer
  // warpgroup loads the CSR blocks by TMA into a ring that runs on from
  // block to block. 64 rows (a layout row of one head) are one consumer
  // warpgroup, and two blocks share an SM (24 + 232 registers per thread
  // of 128 at launch); 128 rows (GQA packing under a shared layout) two,
  // in pingpong. Layout blocks of whole 64-key tiles only.
  // Layout rows of one head (per-head layouts, or heads one a program)
  // with query and key blocks of 64 take 128 x 128 programs instead: two
  // layout rows a program, one a consumer warpgroup, in pingpong over the
  // union of the rows' blocks, two blocks a 128-key tile (the shape dense
  // flash runs at 676 TFLOP/s on H100 against 522 for one warpgroup of
  // 64 x 64, bench/results/2026-11-25-h100-blocksparse-ws.md).
  if (auto sparse = dyn_cast<BlockSparseOp>(op);
      sparse && target == "nvvm" && chip == "sm_90a" && pack == 1 &&
      blockQ == 64 && sparse.getQueryBlockSize() == 64 &&
      sparse.getBlockSizeAttr().getInt() == 64 && headDim % 64 == 0 &&
      headDim <= 128 && tmaOperands(op))
    return ScheduleAttr::get(op->getContext(), 128, 128, 1, 8, /*tma=*/true,
                             /*producer_warps=*/4, /*pingpong=*/true,
                             /*persistent=*/false, /*stages=*/0);
  // Their 128-row programs take 128-key tiles: one block a tile where the
  // blocks are multiples of 128 (1.10x over two tiles of 64 on H200,
  // bench/results/2026-11-28-h200-blocksparse-keys-128.log), two blocks of
  // 64 a tile (the producer pairs them: WarpSpecialized.cpp, walkUnion).
  if (auto sparse = dyn_cast<BlockSparseOp>(op);
      sparse && target == "nvvm" && chip == "sm_90a" &&
      (blockQ * pack == 64 || blockQ * pack == 128) &&
      sparse.getBlockSizeAttr().getInt() % 64 == 0 && headDim % 64 == 0 &&
      headDim <= 128 && tmaOperands(op)) {
    int64_t block = sparse.getBlockSizeAttr().getInt();
    int64_t keys =
        blockQ * pack == 128 && (block % 128 == 0 || block == 64) ? 128 : 64;
    return ScheduleAttr::get(op->getContext(), blockQ, keys, pack,
                             blockQ * pack / 16, /*tma=*/true,
                             /*producer_warps=*/4,
                             /*pingpong=*/blockQ * pack == 128,
                             /*persistent=*/false, /*stages=*/0);
  }
  // sm_90a prefix prefill over caches stored like Q (16-bit, unscaled,
  // 8-element chunks: vLLM's split-x K cache and [D, page] V cache are no
  // TMA boxes): the same pipeline, its producer warpgroup gathering pages
  // and new keys with cp.async (WarpSpecialized.cpp, setUpGather).
  if (warpgroups && warps == 8 && gathersCaches(op) && headDim % 64 == 0 &&
      headDim <= 128)
    return ScheduleAttr::get(op->getContext(), blockQ, keys, pack, warps,
                             /*tma=*/false, /*producer_warps=*/4,
                             /*pingpong=*/true, /*persistent=*/false,
                             /*stages=*/0);
  // sm_90a flash over fp8 Q, K and V: the same pipeline on fp8 wgmma
  // (QGMMA), Q and K as stored, V transposed by the producer warpgroup,
  // P quantized in registers (WarpSpecialized.cpp, produceTransposed).
  // Heads of 64 take three consumer warpgroups in a three-way pingpong
  // (192-row programs), as 16-bit heads of 64 do below: on H100 (S = 8192,
  // bench/results/2026-11-28-h100-fp8-heads256-wgmma.md) 564 TFLOP/s
  // against 468 for two, causal 463-467 against 413-425. Heads of 256
  // (FlashAttention-3's 128 x 128 fp8 tile) ran 851-870 against 197 for
  // the previous program.
  if (warpgroups && warps == 8 && multipliesFp8OnWgmma(op)) {
    bool three = headDim == 64 && 192 % pack == 0;
    return ScheduleAttr::get(op->getContext(), three ? 192 / pack : blockQ, 128,
                             pack, three ? 12 : warps,
                             /*tma=*/true, /*producer_warps=*/4,
                             /*pingpong=*/true, /*persistent=*/false,
                             /*stages=*/0);
  }
  if (warpgroups && warps == 8 && tmaOperands(op)) {
    if (headDim <= 64)
      keys = 128;
    // An additive bias tile next to two S tiles in flight (pingpong):
    // a head of 128 spilled 8 bytes at 128 keys (f16, f32 bias, GQA 2).
    auto flash = dyn_cast<FlashOp>(op);
    if (flash && flash.getBias() && headDim > 64)
      keys = 64;
    // Philox dropout draws next to them: heads of 64 spilled 8-20 bytes
    // and heads of 128 172-196 at 128 keys, heads of 192 16-28 at 64
    // (sm_90a; the flash fuzzer's kernels); 64 and 32 fit (heads of 256
    // spill 224 bytes at either and run the same). With Philox in 32-bit
    // words, 64 keys ran 1.18x faster than 128 at heads of 128 on H200
    // (with 64-bit products, 0.91x; bench/results/2026-12-02-h200-
    // session34.md).
    if (flash && flash.getDropoutP())
      keys = std::min<int64_t>(keys, headDim <= 128 ? 64 : 32);
    bool persistent = flash && op->hasAttr(kShortSequencesHint) &&
                      headDim <= 128 && !flash.getBias() &&
                      !flash.getDropoutP() && !flash.getLse();
    // Heads of 256: 80-key tiles (as FlashAttention-3's; K and V then take
    // 160 KB of the 225, Q 64 KB). On H100 (S = 8192, bench/results/
    // 2026-11-27-h100-heads256-eighty-keys.md, the committed build) 635
    // TFLOP/s against 618 for 64 keys, causal 590 against 566; the dense
    // row went from 0.89x to 0.91-0.97x cuDNN. Not with bias or dropout
    // (untested there).
    if (flash && headDim == 256 && !flash.getBias() && !flash.getDropoutP())
      keys = 80;
    // Heads of 64: three consumer warpgroups (192-row programs, as
    // FlashAttention-3's), 160 registers each, in a three-way pingpong. On
    // H100 (S = 8192, bench/results/2026-11-27-h100-flash-three-
    // warpgroups.md) 500 TFLOP/s against 414 for two in pingpong, causal
    // 430 against 409. Not for the persistent form, bias or dropout
    // (untested there).
    if (flash && headDim == 64 && !persistent && !flash.getBias() &&
        !flash.getDropoutP() && 192 % pack == 0)
      return ScheduleAttr::get(op->getContext(), 192 / pack, keys, pack,
                               /*warps=*/12, /*tma=*/true,
                               /*producer_warps=*/4, /*pingpong=*/true,
                               /*persistent=*/false, /*stages=*/0);
    return ScheduleAttr::get(op->getContext(), blockQ, keys, pack, warps,
                             /*tma=*/true, /*producer_warps=*/4,
                             /*pingpong=*/headDim <= 128, persistent,
                             /*stages=*/0);
  }
  // sm_90a unified programs of prefill rows (kPrefillRowsHint) over caches
  // stored like Q, heads of 64 or 128: prefix prefill's pipeline
  // (WarpSpecialized.cpp, setUpGather), its producer warpgroup gathering
  // the pages' K and V rows with cp.async into 128-byte swizzled tiles (Q
  // by TMA), two consumer warpgroups of 64 rows in pingpong, 128-key tiles.
  // On H200 (bench/results/2026-11-28-h200-unified-prefill-gather.md)
  // prefill rows ran 1.06-1.36x faster than on the three-stage programs
  // below, heads of 64 1.10x (64-key tiles: 5% slower); the mixed batch of
  // 4 prefills of 1k and 60 decodes (queries averaging 65, so no hint)
  // ran 22% slower on it.
  // Pages that are whole TMA boxes of those tiles (8 to 128 keys dividing
  // 128, or multiples of 128) come by TMA (`tma`: whole tiles' pages, a
  // further 1.03-1.11x on H200); other pages' rows are gathered. fp8 caches
  // with one descale each take the pipeline too: the producer copies each
  // key's K and V bytes and dequantizes them into the same tiles
  // (produceConverted). On H200 (bench/results/2026-11-29-h200-session18.md)
  // unified prefill over e4m3 caches ran 1.42-1.46x faster than on the
  // one-stage programs (4 x 2048: 681.8 -> 465.5 us). Their whole tiles'
  // pages come by TMA too, as raw bytes (heads of 128: rows of one 128-byte
  // atom; bench/results/2026-11-30-h200-session23.md).
  if (auto unified = dyn_cast<UnifiedOp>(op);
      unified && target == "nvvm" && chip == "sm_90a" &&
      op->hasAttr(kPrefillRowsHint) && (headDim == 64 || headDim == 128) &&
      128 % pack == 0 && gathersCaches(op)) {
    // (fp8 pages are copied as bytes and dequantized: as boxes of one
    // 128-byte atom a row, so for heads of 128.)
    bool boxes = pageBoxRows(unified.getBlockSize(), 128) > 0 &&
                 (!gathersFp8Caches(op) || headDim == 128);
    return ScheduleAttr::get(op->getContext(), 128 / pack, 128, pack,
                             /*warps=*/8, /*tma=*/boxes, /*producer_warps=*/4,
                             /*pingpong=*/true, /*persistent=*/false,
                             /*stages=*/0);
  }
  // sm_90a unified programs of decode rows (kDecodeRowsHint) over fp8
  // caches: one 16-row slab (16 / pack query tokens) and four warps that
  // split each 64-key tile's keys (WarpKeySplit.cpp), instead of four
  // slabs of which a decode token fills one: that slab's warp issued
  // every MMA of the program on one SM sub-partition. On H200 (B=64 ctx
  // 4096 GQA 32/8 D=128 e4m3, bench/results/2026-11-29-h200-decode-key-
  // split.md) 2241-2405 -> 3055-3085 GB/s, and 2304-2323 -> 3027-3044 with
  // 4 query tokens a sequence; two warps on 32-key tiles 2740, 128-key
  // tiles 2266-2438. 16-bit caches keep their warpgroup programs (4182
  // GB/s there against 3954 for three stages split four ways).
  if (isa<UnifiedOp>(op) && target == "nvvm" && chip == "sm_90a" && converted &&
      op->hasAttr(kDecodeRowsHint) && pack <= 16 && headDim <= 128 &&
      headDim % 16 == 0 && !isFp8(elementType(op->getOperand(0))))
    return ScheduleAttr::get(op->getContext(), 16 / pack, 64, pack,
                             /*warps=*/4);
  // sm_90a unified programs over caches stored like Q (heads of 64 or
  // 128, 64-key tiles): two K/V stages, so that tile j + 1 loads while
  // tile j computes, which also makes the 64-row program one warpgroup on
  // wgmma (geometryOf). On H100 (bench/results/2026-11-27-h100-decode-
  // stages.md) decode rose 3-4% at B = 1..256, decode of 4 query tokens
  // 19% and the mixed batch 16%; ptxas gave 146 registers instead of 236.
  // (Dequantizing caches keep one stage and their raw fp8 buffer.)
  // Calls carrying kLongQueriesHint (queries averaging more than 16 a
  // sequence: prefill rows, alone or in a mixed batch) take three stages:
  // their programs walk long causal ranges and compute more a tile, and
  // on H100 the mixed batch (4 prefills of 1k tokens, 60 decodes of 2k)
  // ran in 244-246 us instead of 255-256, while decode-only rows lost 1-3%
  // (bench/results/2026-11-27-h100-unified-three-stages.md). Heads of 128
  // then take 113 KB of shared memory: still two programs per SM.
  if (isa<UnifiedOp>(op) && target == "nvvm" && chip == "sm_90a" &&
      !converted && (headDim == 64 || headDim == 128) && keys == 64 &&
      blockQ * pack == 64 && !warps)
    return ScheduleAttr::get(op->getContext(), blockQ, keys, pack, warps,
                             /*tma=*/false, /*producer_warps=*/0,
                             /*pingpong=*/false, /*persistent=*/false,
                             /*stages=*/op->hasAttr(kLongQueriesHint) ? 3 : 2);
  return ScheduleAttr::get(op->getContext(), blockQ, keys, pack, warps);
}

/// gathersCaches of attn.unified: Q and both caches of one 16-bit type,
/// or fp8 caches (the producer copies their bytes and dequantizes them:
/// WarpSpecialized.cpp, produceConverted) with at most one descale each
/// for the whole tensor; rows of unit stride, out like Q, and only the
/// features its pipeline was measured with (causal or not, windows,
/// softcap, sinks, linear ALiBi); query descales, per-head or per-token
/// scales, split-KV, lse, out scales, tree and multimodal biases, R-SWA,
/// chunks and per-sequence flags keep the other programs.
static bool gathersUnifiedRows(UnifiedOp op) {
  Type qType = cast<MemRefType>(op.getQ().getType()).getElementType();
  if (!qType.isF16() && !qType.isBF16())
    return false;
  Type cacheType = cast<MemRefType>(op.getKCache().getType()).getElementType();
  bool fp8 = isFp8(cacheType);
  for (Value x : {op.getQ(), op.getKCache(), op.getVCache(), op.getOut()}) {
    auto type = cast<MemRefType>(x.getType());
    Type want = x == op.getKCache() || x == op.getVCache() ? cacheType : qType;
    if (type.getElementType() != want || !type.isLastDimUnitStride())
      return false;
  }
  if (!fp8 && cacheType != qType)
    return false;
  // (A descale of one element: the program's K and V scales are constants
  // the producer reloads after its setmaxnreg.)
  auto perTensor = [&](Value descale) {
    auto type = descale ? cast<MemRefType>(descale.getType()) : MemRefType();
    return !descale ||
           (fp8 && type.hasStaticShape() && type.getNumElements() == 1);
  };
  if (op.getQDescale() || !perTensor(op.getKDescale()) ||
      !perTensor(op.getVDescale()) || op.hasTokenScales() || op.isSplitKv() ||
      op.getLse() || op.getOutScale() || op.getQqBias() ||
      op.getMmPrefixRange() || op.getRswaPrefixLens() || op.getCausalFlags() ||
      op.getChunkLookbackAttr())
    return false;
  return !op.getAlibiSlopes() || op.getAlibiFormOrDefault() != AlibiForm::sqrt;
}

bool mlir::attn::gathersCaches(Operation *op) {
  if (auto unified = dyn_cast<UnifiedOp>(op))
    return gathersUnifiedRows(unified);
  auto prefix = dyn_cast<PrefixPrefillOp>(op);
  if (!prefix)
    return false;
  Type qType = cast<MemRefType>(prefix.getQ().getType()).getElementType();
  if (!qType.isF16() && !qType.isBF16())
    return false;
  Type cacheType =
      cast<MemRefType>(prefix.getKCache().getType()).getElementType();
  bool fp8 = isFp8(cacheType);
  if (!fp8 && (cacheType != qType || prefix.getKScale() || prefix.getVScale()))
    return false;
  // (Rows of unit stride: every chunk is one copy, 16 bytes or 8 of fp8.)
  for (Value x : {prefix.getQ(), prefix.getK(), prefix.getV(),
                  prefix.getKCache(), prefix.getVCache()}) {
    auto type = cast<MemRefType>(x.getType());
    Type want =
        x == prefix.getKCache() || x == prefix.getVCache() ? cacheType : qType;
    if (type.getElementType() != want || !type.isLastDimUnitStride())
      return false;
  }
  return prefix.getBlockSize() % 8 == 0 && prefix.getKeySplit() % 8 == 0;
}

bool mlir::attn::multipliesFp8OnWgmma(Operation *op) {
  // (Dropout's Philox draws next to the consumers' 224 registers spilled
  // 176 bytes: it keeps the previous schedule.)
  auto flash = dyn_cast<FlashOp>(op);
  if (!flash || flash.getQuantizeTo() || flash.getBias() ||
      flash.getDropoutP() ||
      (flash.getHeadDim() != 64 && flash.getHeadDim() != 128 &&
       flash.getHeadDim() != 256))
    return false;
  for (Value x : {flash.getQ(), flash.getK(), flash.getV()}) {
    auto type = cast<MemRefType>(x.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (!isFp8(type.getElementType()) || type.getRank() != 3 ||
        failed(type.getStridesAndOffset(strides, offset)) || strides[2] != 1)
      return false;
  }
  return true;
}

int64_t mlir::attn::pageBoxRows(int64_t page, int64_t bn) {
  if (page % 8)
    return 0;
  if (bn % page == 0)
    return page;
  return page % bn == 0 ? bn : 0;
}

bool mlir::attn::gathersFp8Caches(Operation *op) {
  Value kCache;
  if (auto prefix = dyn_cast<PrefixPrefillOp>(op))
    kCache = prefix.getKCache();
  else if (auto unified = dyn_cast<UnifiedOp>(op))
    kCache = unified.getKCache();
  return kCache && gathersCaches(op) &&
         isFp8(cast<MemRefType>(kCache.getType()).getElementType());
}

ScheduleAttr mlir::attn::scheduleOrDefault(Operation *op) {
  if (auto s = op->getAttrOfType<ScheduleAttr>("schedule"))
    return s;
  return *defaultSchedule(op, "cpu");
}

namespace {
struct AttnPlanPass : public mlir::attn::impl::AttnPlanBase<AttnPlanPass> {
  using Base::Base;
  void runOnOperation() override {
    if (!tilesFor(target)) {
      getOperation()->emitError() << "attn-plan: unknown target '" << target
                                  << "' (expected cpu, nvvm or rocdl)";
      return signalPassFailure();
    }
    if (target == "rocdl" && !amdFamily(chip)) {
      getOperation()->emitError() << "attn-plan: unknown rocdl chip '" << chip
                                  << "' (expected gfx90a, gfx942 or gfx1100)";
      return signalPassFailure();
    }
    getOperation()->walk([&](Operation *op) {
      if (!isa<AttnKernelOpInterface>(op) || op->hasAttr("schedule"))
        return;
      op->setAttr("schedule", *defaultSchedule(op, target, chip));
    });
  }
};
} // namespace
