/*===- attn-capi-test.c - a C program on attn-mlir's C API ----------------===*\
|*                                                                            *|
|* Registers the dialects and passes, parses attn IR, runs the CPU pipeline  *|
|* through its entry point and the NVVM pipeline by name, and checks that   *|
|* bad pipeline options fail with a message. Run by test/CAPI/capi.test.     *|
\*===----------------------------------------------------------------------===*/

#include "attn-c/Dialects.h"
#include "mlir-c/RegisterEverything.h"

#include <stdio.h>
#include <string.h>

static void printToStdout(MlirStringRef text, void *userData) {
  (void)userData;
  fwrite(text.data, 1, text.length, stdout);
}

static const char *kFlash =
    "func.func @kernel(%q: memref<?x4x64xf16>, %k: memref<?x2x64xf16>,\n"
    "                  %v: memref<?x2x64xf16>, %cu_q: memref<?xi32>,\n"
    "                  %cu_k: memref<?xi32>, %scale: f32,\n"
    "                  %out: memref<?x4x64xf16>) {\n"
    "  attn.flash q(%q : memref<?x4x64xf16>) k(%k : memref<?x2x64xf16>)\n"
    "      v(%v : memref<?x2x64xf16>) cu_seqlens_q(%cu_q : memref<?xi32>)\n"
    "      cu_seqlens_k(%cu_k : memref<?xi32>) scale(%scale)\n"
    "      out(%out : memref<?x4x64xf16>) {causal}\n"
    "  return\n"
    "}\n";

/* Parses kFlash, runs `pipeline` (built by `add`, or parsed from `text`),
 * and prints the result; returns 0 on success. */
static int lower(MlirContext ctx, const char *label,
                 MlirLogicalResult (*add)(MlirOpPassManager, MlirStringRef,
                                          MlirStringCallback, void *),
                 const char *options, const char *text) {
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kFlash));
  if (mlirModuleIsNull(module)) {
    printf("%s: parse failed\n", label);
    return 1;
  }
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  MlirLogicalResult built =
      add ? add(opm, mlirStringRefCreateFromCString(options), printToStdout,
                NULL)
          : mlirParsePassPipeline(opm, mlirStringRefCreateFromCString(text),
                                  printToStdout, NULL);
  int rc = 1;
  if (mlirLogicalResultIsSuccess(built)) {
    MlirOperation op = mlirModuleGetOperation(module);
    if (mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, op))) {
      printf("== %s\n", label);
      mlirOperationPrint(op, printToStdout, NULL);
      printf("\n");
      rc = 0;
    } else {
      printf("%s: pipeline failed\n", label);
    }
  } else {
    printf("\n%s: pipeline not built\n", label);
  }
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  return rc;
}

int main(void) {
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  attnRegisterAllDialects(registry);
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  mlirRegisterAllPasses();
  attnRegisterAllPasses();
  attnRegisterAllPasses(); /* a second call is harmless */

  MlirDialect attn =
      mlirDialectHandleLoadDialect(mlirGetDialectHandle__attn__(), ctx);
  MlirStringRef ns = mlirDialectGetNamespace(attn);
  printf("loaded dialect: %.*s\n", (int)ns.length, ns.data);

  int failures = 0;
  failures += lower(ctx, "cpu", attnAddLowerToCpuPipeline, "", NULL);
  failures += lower(ctx, "nvvm by name", NULL, NULL,
                    "builtin.module(attn-lower-to-nvvm-pipeline{chip=sm_90a "
                    "format=isa})");
  /* Expected to fail: the message is printed, nothing runs. */
  if (lower(ctx, "bad option", attnAddLowerToNvvmPipeline, "chip=sm_90a "
            "no-such-option=1", NULL) == 0)
    ++failures;

  mlirContextDestroy(ctx);
  printf("failures: %d\n", failures);
  return failures != 0;
}
