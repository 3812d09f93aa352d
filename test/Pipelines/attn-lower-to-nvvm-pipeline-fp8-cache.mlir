// REQUIRES: nvvm-backend
// REQUIRES: ptxas
// RUN: attn-opt %s --attn-plan="target=nvvm chip=sm_90a" --attn-lower-to-nvvm-pipeline="chip=sm_90a format=isa" | %python %S/extract_gpu_binary.py > %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: FileCheck %s --check-prefix=B16 < %t.ptx
// RUN: FileCheck %s --check-prefix=RAW < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// Prefix prefill over fp8 caches on sm_90a: the producer warpgroup
// decodes each raw tile from shared memory into the K and V^T tiles the
// consumers read, 16 bytes a store. The stores say their 16-byte
// alignment (dequantize): through the V^T tile's 32-byte swizzle LLVM
// could not see it and split each into eight 2-byte stores, each a 4-way
// bank conflict (on an H200, 355 -> 426 TFLOP/s for the e4m3 case,
// bench/results/2026-11-29-h200-fp8-prefix-aligned-stores.md). So do the
// loads and stores of Q's negation (a negative scale).
// CHECK: .visible .entry prefix_e4m3(
// CHECK: setmaxnreg.dec.sync.aligned.u32 56;
// The sign of k_scale, once: 0x80808080 where it is negative.
// CHECK: selp.b32 [[SIGNS:%r[0-9]+]], -2139062144, 0,
// CHECK: cp.async.ca.shared.global
// V is decoded into exact f16 tiles: a conversion a pair, no scale (the
// cache walk's PV multiplies f16 P and V; v_scale multiplies O after
// the walk's last PV, issued with the new tokens' first QK).
// CHECK: ld.shared.v4.b32
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK-NOT: mul.rn.f32
// CHECK: st.shared.v4.b32
// K: the raw words times the sign, converted exactly into bf16 (|k_scale|
// multiplies the walk's score factor instead of every key).
// CHECK: xor.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, [[SIGNS]];
// CHECK-NOT: mul.rn.f32
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK-NOT: mul.rn.f32
// CHECK: cvt.rn.bf16x2.f32
// CHECK-NOT: mul.rn.f32
// CHECK: st.shared.v4.b32
// CHECK: mbarrier.arrive.shared.b64
// The cache walk's PV on f16 wgmma, the new tokens' on bf16.
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: .visible .entry prefix_e5m2(
// CHECK: cvt.rn.f16x2.e5m2x2
// CHECK: st.shared.v4.b32
// Heads of 256 stage through registers (no producer warpgroup): each
// thread decodes whole 8-byte chunks and stores them as 16 bytes, which
// the staging says are aligned (TileStager::Hooks::alignedChunks; its
// ragged chunks, gathered element by element, keep LLVM's stores).
// CHECK: .visible .entry prefix_e4m3_d256(
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: st.shared.v4.b32
// Heads of 112 (no whole swizzle atoms) decode in registers too, in
// 128-row programs of four warps over 32-key tiles (3.5 chunks a thread,
// the last step unrolled under its test), without spilling.
// CHECK: .visible .entry prefix_e4m3_d112(
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: st.shared.v4.b32
// The producer copies raw K in 8-byte runs of a key from a split-x cache
// of x = 8, and in 16-byte ones, one a key's run, from vLLM's x = 16
// (prefix_e5m2's cache): on an H200 477 against 465 TFLOP/s. Raw V^T
// goes in runs of 16 keys of a page (the cache walk starting at a
// multiple of 16) with either
// (bench/results/2026-11-29-h200-prefix-schedules.md).
// RAW: .visible .entry prefix_e4m3(
// RAW-DAG: cp.async.ca.shared.global [{{.*}}], [{{.*}}], 8,
// RAW-DAG: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16,
// RAW: .visible .entry prefix_e5m2(
// RAW-NOT: cp.async.ca.shared.global
// RAW: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16,
// RAW-NOT: cp.async.ca.shared.global
// RAW: .visible .entry prefix_e4m3_d256(
// Decode over fp8 NHD pages (unified) copies each key's raw bytes in
// 16-byte runs too (on an H200 2175 -> 2434 GB/s, B=64 ctx 4096,
// bench/results/2026-11-29-h200-fp8-decode-raw-runs-16.log).
// CHECK: .visible .entry unified_e4m3(
// CHECK-NOT: cp.async.ca.shared.global
// CHECK: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16,
// CHECK-NOT: cp.async.ca.shared.global
// Decode rows (attn.decode_rows): four warps split each tile's keys, the
// raw ring two tiles ahead (the loop's wait leaves one group in flight),
// and warp 0 merges the others' state (f32 words through shared memory)
// before it stores the rows; so with f16 queries, heads of 80 (K decoded,
// not read raw), softcap, window and sinks, and in split-KV segments.
// CHECK: .visible .entry unified_e4m3_decode(
// CHECK: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16,
// CHECK: cp.async.wait_group 1;
// CHECK: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK: bar.sync 0;
// CHECK: st.shared.b32
// CHECK: bar.sync 0;
// CHECK: ld.shared.b32
// CHECK: ex2.approx.ftz.f32
// CHECK: .visible .entry unified_e5m2_decode_d80(
// CHECK: cp.async.wait_group 1;
// CHECK: ex2.approx.ftz.f32
// CHECK: .visible .entry unified_e4m3_decode_split(
// CHECK: cp.async.wait_group 1;
// CHECK: ex2.approx.ftz.f32
// No 2-byte shared store in the producer warpgroup's kernels.
// B16: .visible .entry prefix_e4m3(
// B16-NOT: st.shared.b16
// B16: .visible .entry prefix_e5m2(
// B16-NOT: st.shared.b16
// B16: .visible .entry prefix_e4m3_d256(
// Unified prefill rows over fp8 NHD pages (attn.prefill_rows) on the same
// producer: the raw K and V rows of whole tiles' pages by TMA (4-D boxes
// of the caches), a ragged tile's 16 bytes a copy; K decoded into bf16
// tiles (times the sign of k_scale), V rows into exact f16 ones (a
// conversion a pair, no scale), whose PV multiplies f16 P and V; v_scale
// multiplies O after the last PV. (ptxas places the consumers' code
// first.)
// CHECK: .visible .entry unified_e4m3_prefill_rows(
// CHECK: setmaxnreg.dec.sync.aligned.u32 56;
// CHECK: setmaxnreg.inc.sync.aligned.u32 224;
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: cvt.rn.f16x2.f32
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// CHECK: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK-NOT: mul.rn.f32
// CHECK: st.shared.v4.b32
// CHECK: mbarrier.arrive.shared.b64
// CHECK: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16, {{.*}};
// CHECK: mbarrier.try_wait.parity
// CHECK: xor.b32
// CHECK: cvt.rn.bf16x2.f32
// CHECK: mbarrier.arrive.shared.b64
// B16: .visible .entry unified_e4m3_prefill_rows(
// B16-NOT: st.shared.b16
// PTXAS-NOT: bytes spill stores
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads

func.func @prefix_e4m3(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>, %k_cache: memref<?x8x16x16x8xf8E4M3FN>, %v_cache: memref<?x8x128x16xf8E4M3FN>, %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %k_scale: memref<1xf32>, %v_scale: memref<1xf32>, %out: memref<?x32x128xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x128xbf16>) k(%k : memref<?x8x128xbf16>) v(%v : memref<?x8x128xbf16>) k_cache(%k_cache : memref<?x8x16x16x8xf8E4M3FN>) v_cache(%v_cache : memref<?x8x128x16xf8E4M3FN>) block_table(%block_table : memref<?x?xi32>) query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>) scale(%scale) k_scale(%k_scale : memref<1xf32>) v_scale(%v_scale : memref<1xf32>) out(%out : memref<?x32x128xbf16>)
  return
}

func.func @prefix_e5m2(%q: memref<?x32x128xf16>, %k: memref<?x8x128xf16>, %v: memref<?x8x128xf16>, %k_cache: memref<?x8x8x16x16xf8E5M2>, %v_cache: memref<?x8x128x16xf8E5M2>, %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %k_scale: memref<1xf32>, %v_scale: memref<1xf32>, %out: memref<?x32x128xf16>) {
  attn.prefix_prefill q(%q : memref<?x32x128xf16>) k(%k : memref<?x8x128xf16>) v(%v : memref<?x8x128xf16>) k_cache(%k_cache : memref<?x8x8x16x16xf8E5M2>) v_cache(%v_cache : memref<?x8x128x16xf8E5M2>) block_table(%block_table : memref<?x?xi32>) query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>) scale(%scale) k_scale(%k_scale : memref<1xf32>) v_scale(%v_scale : memref<1xf32>) out(%out : memref<?x32x128xf16>)
  return
}

func.func @prefix_e4m3_d256(%q: memref<?x16x256xbf16>, %k: memref<?x8x256xbf16>, %v: memref<?x8x256xbf16>, %k_cache: memref<?x8x16x16x16xf8E4M3FN>, %v_cache: memref<?x8x256x16xf8E4M3FN>, %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %k_scale: memref<1xf32>, %v_scale: memref<1xf32>, %out: memref<?x16x256xbf16>) {
  attn.prefix_prefill q(%q : memref<?x16x256xbf16>) k(%k : memref<?x8x256xbf16>) v(%v : memref<?x8x256xbf16>) k_cache(%k_cache : memref<?x8x16x16x16xf8E4M3FN>) v_cache(%v_cache : memref<?x8x256x16xf8E4M3FN>) block_table(%block_table : memref<?x?xi32>) query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>) scale(%scale) k_scale(%k_scale : memref<1xf32>) v_scale(%v_scale : memref<1xf32>) out(%out : memref<?x16x256xbf16>)
  return
}

func.func @prefix_e4m3_d112(%q: memref<?x32x112xbf16>, %k: memref<?x8x112xbf16>, %v: memref<?x8x112xbf16>, %k_cache: memref<?x8x7x16x16xf8E4M3FN>, %v_cache: memref<?x8x112x16xf8E4M3FN>, %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>, %scale: f32, %k_scale: memref<1xf32>, %v_scale: memref<1xf32>, %out: memref<?x32x112xbf16>) {
  attn.prefix_prefill q(%q : memref<?x32x112xbf16>) k(%k : memref<?x8x112xbf16>) v(%v : memref<?x8x112xbf16>) k_cache(%k_cache : memref<?x8x7x16x16xf8E4M3FN>) v_cache(%v_cache : memref<?x8x112x16xf8E4M3FN>) block_table(%block_table : memref<?x?xi32>) query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>) scale(%scale) k_scale(%k_scale : memref<1xf32>) v_scale(%v_scale : memref<1xf32>) out(%out : memref<?x32x112xbf16>)
  return
}

func.func @unified_e4m3(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

func.func @unified_e4m3_decode(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>) out(%o : memref<?x32x128xbf16>) {attn.decode_rows}
  return
}

func.func @unified_e5m2_decode_d80(%q: memref<?x64x80xf16>, %kc: memref<?x16x8x80xf8E5M2>, %vc: memref<?x16x8x80xf8E5M2>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %cap: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %sinks: memref<64xf32>, %o: memref<?x64x80xf16>) {
  attn.unified q(%q : memref<?x64x80xf16>) k_cache(%kc : memref<?x16x8x80xf8E5M2>) v_cache(%vc : memref<?x16x8x80xf8E5M2>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) softcap(%cap) k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>) sinks(%sinks : memref<64xf32>) out(%o : memref<?x64x80xf16>) {sliding_window = 31 : i64, attn.decode_rows}
  return
}

func.func @unified_e4m3_decode_split(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>) out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>) {attn.decode_rows}
  return
}

func.func @unified_e4m3_prefill_rows(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>) out(%o : memref<?x32x128xbf16>) {attn.long_queries, attn.prefill_rows}
  return
}
