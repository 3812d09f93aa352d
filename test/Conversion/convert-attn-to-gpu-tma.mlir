// REQUIRES: nvvm-backend
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_90a" --convert-attn-to-gpu=chip=sm_90a | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-plan="target=nvvm chip=sm_80" --convert-attn-to-gpu=chip=sm_80 | FileCheck %s --check-prefix=AMPERE

// sm_90a flash of bf16 K/V with a head dim of 64-column atoms: K and V come
// through tensor maps, the kernel's two leading parameters. The manifest
// names the operand each describes and its box; the host models them with
// upstream's descriptor op. Each tile's four boxes (K and V, two atoms)
// complete on a full mbarrier that the threads wait on; every thread
// arrives on the buffer's empty mbarrier when done with it.
// CHECK: module attributes {attn.manifest = "{\22format_version\22:2,
// CHECK-SAME: \22params\22:[{\22arg\22:1,\22box\22:[128,1,64],\22dtype\22:\22bf16\22,\22kind\22:\22tensor_map\22,\22operand\22:1,\22swizzle\22:128},{\22arg\22:2,\22box\22:[128,1,64],\22dtype\22:\22bf16\22,\22kind\22:\22tensor_map\22,\22operand\22:2,\22swizzle\22:128},{\22arg\22:0,
// CHECK-LABEL: func.func @dense
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%{{.*}}, %{{.*}}, %{{.*}}] : memref<*xbf16> -> <tensor = memref<128x1x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: gpu.launch_func @attn_kernels::@dense {{.*}} args(%{{.*}} : !llvm.ptr, %{{.*}} : !llvm.ptr, %arg0 : memref<?x16x128xbf16>
// CHECK: gpu.func @dense(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: memref<?x16x128xbf16>
// CHECK-SAME: attn.tensor_map_params = 2 : i64
// CHECK: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
// CHECK: nvgpu.mbarrier.init
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%{{.*}}], %c65536
// CHECK-COUNT-4: nvgpu.tma.async.load
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-COUNT-4: nvgpu.tma.async.load
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.mbarrier.arrive %
// AMPERE-LABEL: func.func @dense
// AMPERE-NOT: tensor_map
// AMPERE-NOT: nvgpu.tma
// AMPERE: nvgpu.device_async_copy
func.func @dense(%q: memref<?x16x128xbf16>, %k: memref<?x16x128xbf16>, %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x16x128xbf16>) {
  attn.flash q(%q : memref<?x16x128xbf16>) k(%k : memref<?x16x128xbf16>) v(%v : memref<?x16x128xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x16x128xbf16>) {causal}
  return
}

// -----

// fp8 K/V (dequantized while staged) and head dims that do not fill whole
// 64-column atoms keep per-thread staging.
// CHECK-LABEL: func.func @fp8_kv
// CHECK-NOT: nvgpu.tma
// CHECK: gpu.func @fp8_kv(%{{.*}}: memref<?x8x128xf8E4M3FN>
// CHECK-NOT: nvgpu.tma.async.load
// CHECK: return
func.func @fp8_kv(%q: memref<?x8x128xf8E4M3FN>, %k: memref<?x8x128xf8E4M3FN>, %v: memref<?x8x128xf8E4M3FN>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %qs: memref<1xf32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %ps: memref<1xf32>, %o: memref<?x8x128xbf16>) {
  attn.flash q(%q : memref<?x8x128xf8E4M3FN>) k(%k : memref<?x8x128xf8E4M3FN>) v(%v : memref<?x8x128xf8E4M3FN>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) q_scale(%qs : memref<1xf32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) p_scale(%ps : memref<1xf32>) out(%o : memref<?x8x128xbf16>)
  return
}

// -----

// CHECK-LABEL: func.func @head_dim_96
// CHECK-NOT: nvgpu.tma
// CHECK: return
func.func @head_dim_96(%q: memref<?x8x96xbf16>, %k: memref<?x8x96xbf16>, %v: memref<?x8x96xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>, %s: f32, %o: memref<?x8x96xbf16>) {
  attn.flash q(%q : memref<?x8x96xbf16>) k(%k : memref<?x8x96xbf16>) v(%v : memref<?x8x96xbf16>) cu_seqlens_q(%cq : memref<?xi32>) cu_seqlens_k(%ck : memref<?xi32>) scale(%s) out(%o : memref<?x8x96xbf16>)
  return
}
