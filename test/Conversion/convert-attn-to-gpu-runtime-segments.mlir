// REQUIRES: nvvm-backend
// RUN: attn-opt %s --attn-plan=target=nvvm --convert-attn-to-gpu | FileCheck %s
// RUN: attn-opt %s --attn-plan=target=cpu --convert-attn-to-scf | FileCheck %s --check-prefix=CPU

// Split-KV with the segment count chosen at run time (no num_segments
// attribute): out's dim 2. One kernel serves every segment count: the grid's
// third extent is that dim (manifest term [operand 7 = out, dim 2, 1]) and
// the kernel reads it for the pages per segment.
// CHECK: \22grid\22:{{.*}},{\22add\22:8,\22terms\22:[]},{\22add\22:0,\22terms\22:{{\[\[}}7,2,1]]}]
// CHECK-LABEL: func.func @unified_runtime_segments
// CHECK-SAME: %[[OUT:arg7]]: memref<?x32x?x128xf32>
// CHECK: %[[S:.*]] = memref.dim %[[OUT]], %c2
// CHECK: gpu.launch_func @attn_kernels::@unified_runtime_segments blocks in (%{{.*}}, %c8, %{{.*}})
// CHECK: gpu.func @unified_runtime_segments
// CHECK: memref.dim %{{.*}}, %c2{{.*}} : memref<?x32x?x128xf32>
// CPU-LABEL: func.func @unified_runtime_segments
// CPU: memref.dim %{{.*}}, %c2{{.*}} : memref<?x32x?x128xf32>
func.func @unified_runtime_segments(%q: memref<?x32x128xbf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %su: memref<?xi32>, %s: f32, %o: memref<?x32x?x128xf32>, %m: memref<?x32x?xf32>, %l: memref<?x32x?xf32>) {
  attn.unified q(%q : memref<?x32x128xbf16>) k_cache(%kc : memref<?x16x8x128xbf16>) v_cache(%vc : memref<?x16x8x128xbf16>) block_table(%bt : memref<?x?xi32>) cu_seqlens_q(%cu : memref<?xi32>) seqused_k(%su : memref<?xi32>) scale(%s) out(%o : memref<?x32x?x128xf32>) segment_max(%m : memref<?x32x?xf32>) segment_sum(%l : memref<?x32x?xf32>)
  return
}
