// REQUIRES: rocdl-backend
// convert-attn-to-gpu with target=rocdl: wave programs on AMD matrix cores.
// RUN: attn-opt %s --split-input-file --attn-plan="target=rocdl chip=gfx942" --convert-attn-to-gpu="target=rocdl chip=gfx942" --verify-diagnostics | FileCheck %s --check-prefix=CDNA
// RUN: attn-opt %s --split-input-file --attn-plan="target=rocdl chip=gfx1100" --convert-attn-to-gpu="target=rocdl chip=gfx1100" --verify-diagnostics | FileCheck %s --check-prefix=RDNA
// RUN: attn-opt %s --split-input-file --attn-plan="target=rocdl chip=gfx90a" --convert-attn-to-gpu="target=rocdl chip=gfx90a" --verify-diagnostics | FileCheck %s --check-prefix=CDNA

// On CDNA, 4 waves of 64 lanes, 2 fragments of 16 rows each; Q [128 x 64] and
// K [64 x 64] rows padded by 8, V transposed [64 x 72]: 36864 bytes of LDS.
// S^T = K Q^T on 16x16x16 MFMAs (K the A operand, Q the B operand), row
// statistics over the lanes 16 and 32 apart, exp2 on v_exp_f32, and
// O^T += V^T P^T with P as it came out of QK.
// CDNA: module attributes {attn.manifest = "{\22format_version\22:2,\22kernels\22:[{\22grid\22:
// CDNA-SAME: \22name\22:\22flash\22,\22op\22:\22attn.flash\22,\22params\22:
// CDNA-SAME: \22shared_bytes\22:36864,\22threads\22:256}
// CDNA-LABEL: func.func @flash
// CDNA: gpu.launch_func @attn_kernels::@flash blocks in (%{{.*}}, %c2{{.*}}, %c1{{.*}}) threads in (%c256{{.*}}, %c1{{.*}}, %c1{{.*}}) dynamic_shared_memory_size
// CDNA: gpu.func @flash({{.*}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CDNA: memref.alloca() : memref<32xf32>
// CDNA: memref.view {{.*}} to memref<128x72xbf16, #gpu.address_space<workgroup>>
// CDNA: memref.view {{.*}} to memref<64x72xbf16, #gpu.address_space<workgroup>>
// CDNA: memref.view {{.*}} to memref<64x72xbf16, #gpu.address_space<workgroup>>
// CDNA: vector.load %arg0{{.*}} : memref<?x8x64xbf16>, vector<8xbf16>
// CDNA: gpu.barrier
// CDNA: scf.for
// CDNA: llvm.inline_asm has_side_effects "v_mov_b32 $0, $1", "=v,v"
// CDNA: amdgpu.mfma 16x16x16 {{.*}} : vector<4xbf16>, vector<4xbf16>, vector<4xf32>
// CDNA: gpu.shuffle  xor %{{.*}}, %c16{{.*}}, %c64
// CDNA: gpu.shuffle  xor %{{.*}}, %c32{{.*}}, %c64
// CDNA: rocdl.exp2
// CDNA: amdgpu.mfma 16x16x16 {{.*}} : vector<4xbf16>, vector<4xbf16>, vector<4xf32>
// CDNA-NOT: amdgpu.wmma
// CDNA-NOT: math.exp2
// CDNA: gpu.return

// On RDNA3, 4 waves of 32 lanes, one fragment each; WMMA operands of 16
// elements, P's other half of the keys from the lane 16 apart, and a
// scheduling fence between k steps.
// RDNA: \22threads\22:128
// RDNA-LABEL: func.func @flash
// RDNA: gpu.func @flash({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// RDNA: amdgpu.wmma 16x16x16 {{.*}} : vector<16xbf16>, vector<16xbf16>, vector<8xf32>
// RDNA: amdgpu.sched_barrier allow = <none>
// RDNA: gpu.shuffle  xor %{{.*}}, %c16{{.*}}, %c32
// RDNA: rocdl.exp2
// RDNA: amdgpu.wmma 16x16x16 {{.*}} : vector<16xbf16>, vector<16xbf16>, vector<8xf32>
// RDNA-NOT: amdgpu.mfma
// RDNA: gpu.return
func.func @flash(%q: memref<?x8x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>,
                 %cq: memref<?xi32>, %ck: memref<?xi32>, %scale: f32, %o: memref<?x8x64xbf16>) {
  attn.flash q(%q : memref<?x8x64xbf16>) k(%k : memref<?x2x64xbf16>) v(%v : memref<?x2x64xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%scale)
      out(%o : memref<?x8x64xbf16>) {causal}
  return
}

// -----

// Paged caches: fp8 K and V chunks are loaded as 8 bytes and decoded in
// registers (no device library), then the same matrix code runs on f16.
// CDNA-LABEL: func.func @prefix_fp8_cache
// CDNA: vector.load %arg3{{.*}} : memref<?x2x8x16x8xf8E4M3FN>, vector<8xf8E4M3FN>
// CDNA: amdgpu.mfma 16x16x16 {{.*}} : vector<4xbf16>, vector<4xbf16>, vector<4xf32>
// RDNA-LABEL: func.func @prefix_fp8_cache
// RDNA: amdgpu.wmma 16x16x16 {{.*}} : vector<16xbf16>, vector<16xbf16>, vector<8xf32>
func.func @prefix_fp8_cache(
    %q: memref<?x8x64xbf16>, %k: memref<?x2x64xbf16>, %v: memref<?x2x64xbf16>,
    %k_cache: memref<?x2x8x16x8xf8E4M3FN>, %v_cache: memref<?x2x64x16xf8E4M3FN>,
    %block_table: memref<?x?xi32>, %query_start: memref<?xi32>, %seq_lens: memref<?xi32>,
    %scale: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %out: memref<?x8x64xbf16>) {
  attn.prefix_prefill q(%q : memref<?x8x64xbf16>) k(%k : memref<?x2x64xbf16>)
      v(%v : memref<?x2x64xbf16>) k_cache(%k_cache : memref<?x2x8x16x8xf8E4M3FN>)
      v_cache(%v_cache : memref<?x2x64x16xf8E4M3FN>) block_table(%block_table : memref<?x?xi32>)
      query_start(%query_start : memref<?xi32>) seq_lens(%seq_lens : memref<?xi32>)
      scale(%scale) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      out(%out : memref<?x8x64xbf16>)
  return
}

// -----

// merge_states: a workgroup per (token, head), threads over the head dim.
// CDNA-LABEL: func.func @merge
// CDNA: gpu.launch_func @attn_kernels::@merge
// CDNA: gpu.func @merge
// CDNA: rocdl.exp2
// RDNA-LABEL: func.func @merge
// RDNA: gpu.func @merge
func.func @merge(%p: memref<?x4x3x64xf32>, %m: memref<?x4x3xf32>, %s: memref<?x4x3xf32>, %o: memref<?x4x64xf16>) {
  attn.merge_states partial(%p : memref<?x4x3x64xf32>) segment_max(%m : memref<?x4x3xf32>)
      segment_sum(%s : memref<?x4x3xf32>) out(%o : memref<?x4x64xf16>)
  return
}

// -----

// A pinned schedule whose tiles do not fit in the 64 KB of LDS.
func.func @too_big(%q: memref<?x8x256xbf16>, %k: memref<?x2x256xbf16>, %v: memref<?x2x256xbf16>,
                   %cq: memref<?xi32>, %ck: memref<?xi32>, %scale: f32, %o: memref<?x8x256xbf16>) {
  // expected-error @+1 {{304128 bytes of shared memory; rocdl allows 1024 and 65536}}
  attn.flash q(%q : memref<?x8x256xbf16>) k(%k : memref<?x2x256xbf16>) v(%v : memref<?x2x256xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%scale)
      out(%o : memref<?x8x256xbf16>)
      {schedule = #attn.schedule<block_q = 64, block_n = 256, heads_per_program = 1, warps = 4>}
  return
}

// -----

// A pinned M tile of 1024 rows on 4 waves: 16 unrolled fragments per wave
// (once minutes of compile time) is beyond the body budget.
func.func @body_beyond_budget(%q: memref<?x8x16xbf16>, %k: memref<?x2x16xbf16>, %v: memref<?x2x16xbf16>,
                   %cq: memref<?xi32>, %ck: memref<?xi32>, %scale: f32, %o: memref<?x8x16xbf16>) {
  // expected-error @+1 {{unrolls 256 rows per warp}}
  attn.flash q(%q : memref<?x8x16xbf16>) k(%k : memref<?x2x16xbf16>) v(%v : memref<?x2x16xbf16>)
      cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%scale)
      out(%o : memref<?x8x16xbf16>)
      {schedule = #attn.schedule<block_q = 1024, block_n = 64, heads_per_program = 1, warps = 4>}
  return
}

// -----

// Programs over two layout rows are sm_90a's only.
func.func @blocksparse_two_layout_rows(%q: memref<?x4x128xbf16>, %cq: memref<?xi32>, %crow: memref<4x?xi32>, %col: memref<4x?xi32>, %s: f32, %o: memref<?x4x128xbf16>) {
  // expected-error @+1 {{walks two layout rows a program (block_q twice the query block)}}
  attn.blocksparse q(%q : memref<?x4x128xbf16>) k(%q : memref<?x4x128xbf16>) v(%q : memref<?x4x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%cq : memref<?xi32>) crow(%crow : memref<4x?xi32>) col(%col : memref<4x?xi32>) scale(%s) out(%o : memref<?x4x128xbf16>) {block_size = 64 : i64, schedule = #attn.schedule<block_q = 128, block_n = 32, heads_per_program = 1, warps = 4>}
  return
}
