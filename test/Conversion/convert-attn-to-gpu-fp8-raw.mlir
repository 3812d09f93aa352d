// REQUIRES: nvvm-backend
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu=chip=sm_90a | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_80" --convert-attn-to-gpu=chip=sm_80 | FileCheck %s --check-prefix=AMPERE

// Decode-shaped sm_90a programs (mma.sync, one K/V buffer) over fp8 pages
// stage through a raw buffer: tile t + 1's bytes are copied by 16-byte
// cp.async (a key's whole runs; nothing waits on them) into fp8 rows
// while tile t computes.
// Under 16-bit queries the tiles are f16 (every fp8 value is one), the
// cache scales apply to the dot products and the output, a bf16 Q is
// staged times a power of two from its largest magnitude (a max over the
// block: xor shuffles, then the exponent's bits), and QK reads K raw: K's
// rows (128 bytes, [64, 64] as f16 pairs, their 16-byte chunks swizzled
// by the row: chunk c of row r at c ^ (r % 8), so that each ldmatrix
// matrix's eight rows fall on eight banks and each row's copies fill one
// line) go through ldmatrix.x2 and a conversion per pair of bytes into
// the B operands; only
// V is decoded into its tile (16 bytes at a time, a pair's halves stored
// as converted), in the K tile's place. Raw K has two slots (QK reads tile
// t's while tile t + 1's bytes land): the launch reserves Q, the V tile,
// two raw K and one raw V: 60416 bytes (77824 with the unused K tile, the
// footprint its record names for small grids). Each eight lanes decode
// units 0-3 of one raw V row and units 4-7 of the next (the other eight of
// the pair of rows the other way round): along one row, units u and u + 4
// of the 272-byte f16 rows shared their banks.
// CHECK-LABEL: func.func @decode_fp8
// CHECK: gpu.launch_func @attn_kernels::@decode_fp8 {{.*}} dynamic_shared_memory_size %c60416_i32
// CHECK: gpu.func @decode_fp8
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: vector.store %{{.*}} : memref<64x136xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: %[[KCHUNK:.*]] = arith.xori %{{.*}}, %{{.*}} : index
// CHECK: %[[KCOL:.*]] = arith.muli %[[KCHUNK]], %c16{{.*}} : index
// CHECK: nvgpu.device_async_copy %arg1{{.*}}, %{{.*}}[%{{.*}}, %[[KCOL]]], 16, %{{.*}} {bypassL1} : memref<?x16x8x128xf8E4M3FN> to memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_copy %arg2{{.*}}, 16, %{{.*}} {bypassL1} : memref<?x16x8x128xf8E4M3FN> to memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
// CHECK: scf.for
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// Raw K is not decoded: V's are the first 16-byte raw loads.
// CHECK-NOT: vector<16xf8E4M3FN>
// CHECK: %[[HALF:.*]] = arith.divui %{{.*}}, %c4{{.*}} : index
// CHECK-NEXT: %c8{{.*}} = arith.constant 8 : index
// CHECK-NEXT: %[[EIGHTS:.*]] = arith.divui %[[Q:.*]], %c8{{.*}} : index
// CHECK-NEXT: %c2{{.*}} = arith.constant 2 : index
// CHECK-NEXT: %[[ODD:.*]] = arith.remui %[[EIGHTS]], %c2{{.*}} : index
// CHECK-NEXT: %[[FLIP:.*]] = arith.xori %[[HALF]], %[[ODD]] : index
// CHECK: %[[PAIR:.*]] = arith.divui %[[Q]], %c16{{.*}} : index
// CHECK: %[[FIRST:.*]] = arith.muli %[[PAIR]], %c2{{.*}} : index
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %[[FIRST]], %[[FLIP]] : index
// CHECK: vector.load %{{.*}}[%[[ROW]], %{{.*}}] {{.*}} : memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>, vector<16xf8E4M3FN>
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK-NOT: arith.mulf
// CHECK: vector.store %{{.*}} : memref<64x136xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_copy %arg1{{.*}} to memref<64x128xf8E4M3FN
// CHECK: %[[ROW8:.*]] = arith.remui %{{.*}}, %c8{{.*}} : index
// CHECK-NEXT: %[[SWZ:.*]] = arith.xori %{{.*}}, %[[ROW8]] : index
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 2 : i32, transpose = false} : memref<64x64xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32)
// sm_80 keeps decoding in registers (no raw buffer).
// AMPERE-LABEL: func.func @decode_fp8
// AMPERE-NOT: to memref<64x128xf8E4M3FN
// AMPERE: gpu.return
func.func @decode_fp8(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>) out(%o : memref<?x32x128xbf16>)
  return
}

// -----

// f16 queries: the same f16 tiles and folded scales, Q staged as it is.
// CHECK-LABEL: func.func @decode_fp8_f16
// CHECK: gpu.func @decode_fp8_f16
// CHECK-NOT: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: scf.for
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK-NOT: arith.mulf
// CHECK: vector.store %{{.*}} : memref<64x136xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32)
func.func @decode_fp8_f16(%q: memref<?x32x128xf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xf16>) {
  attn.unified q(%q : memref<?x32x128xf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>) out(%o : memref<?x32x128xf16>)
  return
}

// -----

// f32 queries keep the register staging (the raw path converts to 16-bit
// tiles only): no raw buffer.
// CHECK-LABEL: func.func @decode_fp8_f32
// CHECK-NOT: to memref<64x128xf8E4M3FN
// CHECK: gpu.return
func.func @decode_fp8_f32(%q: memref<?x32x128xf32>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xf32>) {
  attn.unified q(%q : memref<?x32x128xf32>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>) out(%o : memref<?x32x128xf32>)
  return
}

// -----

// Decode rows (attn.decode_rows): one 16-row slab whose four warps each
// compute a quarter of every 64-key tile (16 keys: two S tiles from
// eight raw K reads, one k step of PV), the raw ring two tiles ahead (three K slots, two V), so
// the wait leaves one tile's group in flight. The launch reserves Q
// ([16, 136] f16), the V tile (in the K tile's place) and the ring: 63744
// bytes, three programs an SM. After the
// walk warps 1-3 leave m, l and O (68 words a lane) in shared memory and
// warp 0 merges them into its own and stores the rows.
// CHECK-LABEL: func.func @decode_fp8_key_split
// CHECK: gpu.launch_func @attn_kernels::@decode_fp8_key_split {{.*}} threads in (%c128, {{.*}} dynamic_shared_memory_size %c63744_i32
// CHECK: gpu.func @decode_fp8_key_split
// CHECK: vector.store %{{.*}} : memref<16x136xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: nvgpu.device_async_copy %arg1{{.*}}, 16, %{{.*}} {bypassL1} : memref<?x16x8x128xf8E4M3FN> to memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_copy %arg1{{.*}}, 16, %{{.*}} {bypassL1} : memref<?x16x8x128xf8E4M3FN> to memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_create_group
// CHECK: scf.for
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK-COUNT-8: nvgpu.ldmatrix {{.*}} {numTiles = 2 : i32, transpose = false} : memref<64x64xf16, #gpu.address_space<workgroup>>
// CHECK-NOT: nvgpu.ldmatrix {{.*}} memref<64x64xf16
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<64x136xf16
// CHECK: gpu.barrier
// CHECK: memref.store {{.*}} : memref<204x32xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.load {{.*}} : memref<204x32xf32, #gpu.address_space<workgroup>>
// CHECK: arith.maximumf
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
func.func @decode_fp8_key_split(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xf8E4M3FN>, %vc: memref<?x16x8x128xf8E4M3FN>, %bt: memref<?x?xi32>, %cq: memref<?xi32>, %su: memref<?xi32>, %s: f32, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xbf16>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xf8E4M3FN>) v_cache(%vc : memref<?x16x8x128xf8E4M3FN>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cq : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) k_descale(%ks : memref<1xf32>) v_descale(%vs : memref<1xf32>) out(%o : memref<?x32x128xbf16>) {attn.decode_rows}
  return
}
