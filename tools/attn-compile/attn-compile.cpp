//===- attn-compile.cpp - an attn kernel to a CPU object file ---*- C++ -*-===//
//
// One process from MLIR text to machine code: the CPU pipeline
// (attn-lower-to-cpu-pipeline), translation to LLVM IR, LLVM's -O3 and code
// generation for the host, replacing attn-opt | mlir-translate | opt | llc
// (four processes, four parses) for attn_mlir's CPU kernels. Built with
// LLD's libraries, it also links the shared library itself (--shared), so
// that making a CPU kernel needs no C compiler or linker on the machine.
//
//   attn-compile kernel.mlir -o kernel.o [--plan-target=T --plan-chip=C]
//   attn-compile kernel.mlir --shared -o kernel.so
//   attn-compile --can-link      (exit 0: --shared is available)
//
//===----------------------------------------------------------------------===//

#include "attn/InitAll.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#ifdef ATTN_HAVE_LLD
#include "lld/Common/Driver.h"
#include <link.h>
#endif

#include "llvm/ADT/STLExtras.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#ifdef ATTN_HAVE_LLD
LLD_HAS_DRIVER(elf)
#endif

using namespace mlir;

/// Defines __truncsfbf2 (f32 -> bf16, round to nearest even, NaNs kept
/// quiet) in the kernel, hidden and linkonce: x86 code generation calls it
/// where a bf16 value is legalized through f32 (a select of two bf16
/// values, say), and libgcc provides it only from GCC 13 on, so a kernel
/// could link and then fail to load. The pipeline already expands every
/// arith.truncf to bf16 into integer code; this covers the legalizer's own
/// calls. Integer code only, so it cannot call itself.
static void addBf16TruncationHelper(llvm::Module &module) {
  constexpr llvm::StringLiteral name = "__truncsfbf2";
  if (module.getFunction(name))
    return;
  llvm::LLVMContext &ctx = module.getContext();
  auto *type = llvm::FunctionType::get(llvm::Type::getBFloatTy(ctx),
                                       {llvm::Type::getFloatTy(ctx)}, false);
  auto *fn = llvm::Function::Create(type, llvm::GlobalValue::LinkOnceODRLinkage,
                                    name, module);
  fn->setVisibility(llvm::GlobalValue::HiddenVisibility);
  fn->setDoesNotThrow();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value *x = fn->getArg(0);
  llvm::Value *bits = b.CreateBitCast(x, b.getInt32Ty());
  llvm::Value *lsb = b.CreateAnd(b.CreateLShr(bits, 16), 1);
  llvm::Value *rounded =
      b.CreateAdd(bits, b.CreateAdd(lsb, b.getInt32(0x7fff)));
  llvm::Value *high = b.CreateTrunc(b.CreateLShr(rounded, 16), b.getInt16Ty());
  llvm::Value *quiet = b.CreateTrunc(
      b.CreateOr(b.CreateLShr(bits, 16), b.getInt32(0x40)), b.getInt16Ty());
  llvm::Value *isNan = b.CreateFCmpUNO(x, x);
  b.CreateRet(b.CreateBitCast(b.CreateSelect(isNan, quiet, high),
                              llvm::Type::getBFloatTy(ctx)));
}

static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                            llvm::cl::desc("<kernel.mlir>"));
static llvm::cl::opt<std::string>
    outputFile("o", llvm::cl::desc("object file (shared library: --shared)"));
static llvm::cl::opt<bool>
    emitShared("shared",
               llvm::cl::desc("link a shared library (in-process, with LLD)"));
static llvm::cl::opt<bool>
    canLink("can-link", llvm::cl::desc("exit 0 if --shared is available"));
static llvm::cl::opt<std::string>
    planTarget("plan-target", llvm::cl::init("cpu"),
               llvm::cl::desc("tile schedules of this target (attn-plan)"));
static llvm::cl::opt<std::string>
    planChip("plan-chip", llvm::cl::init(""),
             llvm::cl::desc("tile schedules of this chip (attn-plan)"));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "attn-compile: " << message << "\n";
  return 1;
}

#ifdef ATTN_HAVE_LLD
/// The host's C runtime libraries: this process's libc and libm, and
/// libgcc_s (f16 conversions such as __extendhfsf2 are libcalls on CPUs
/// without F16C). The kernel library names them (DT_NEEDED), so its symbols
/// resolve wherever it is loaded, with the versions of the libraries it
/// will run with.
static std::vector<std::string> hostCLibraries() {
  std::vector<std::string> found;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        llvm::StringRef path(info->dlpi_name ? info->dlpi_name : "");
        llvm::StringRef name = llvm::sys::path::filename(path);
        if (name.starts_with("libc.so.") || name.starts_with("libm.so.") ||
            name.starts_with("libgcc_s.so."))
          static_cast<std::vector<std::string> *>(data)->push_back(path.str());
        return 0;
      },
      &found);
  bool haveGcc = llvm::any_of(found, [](const std::string &p) {
    return llvm::sys::path::filename(p).starts_with("libgcc_s.so.");
  });
  if (haveGcc)
    return found;
  // A statically linked libgcc (the wheel's tools) loads no libgcc_s: the
  // system's, from the first of the usual places that has it.
  for (const char *p :
       {"/lib/x86_64-linux-gnu/libgcc_s.so.1",
        "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1", "/lib64/libgcc_s.so.1",
        "/usr/lib64/libgcc_s.so.1", "/lib/aarch64-linux-gnu/libgcc_s.so.1",
        "/usr/lib/libgcc_s.so.1"}) {
    if (llvm::sys::fs::exists(p)) {
      found.push_back(p);
      break;
    }
  }
  return found;
}

/// Links `object` into the shared library `output` with LLD's ELF driver.
static int linkShared(llvm::StringRef object, llvm::StringRef output) {
  std::string out = output.str(), obj = object.str();
  std::vector<std::string> libs = hostCLibraries();
  // -z defs: a symbol none of these libraries defines (an f16 libcall on a
  // libgcc_s older than GCC 12) fails here, not at dlopen; attn_mlir then
  // links with the C compiler.
  std::vector<const char *> args = {"ld.lld", "-shared",   "--hash-style=gnu",
                                    "-z",     "defs",      "--as-needed",
                                    "-o",     out.c_str(), obj.c_str()};
  for (const std::string &lib : libs)
    args.push_back(lib.c_str());
  std::string log;
  llvm::raw_string_ostream logStream(log);
  lld::Result result =
      lld::lldMain(args, logStream, logStream, {{lld::Gnu, &lld::elf::link}});
  if (result.retCode != 0)
    return fail("linking " + output + " failed: " + log);
  return 0;
}
#endif

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAllPasses();
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "attn kernel to a host object file\n");
#ifdef ATTN_HAVE_LLD
  const bool haveLinker = true;
#else
  const bool haveLinker = false;
#endif
  if (canLink)
    return haveLinker ? 0 : 1;
  if (inputFile.empty() || outputFile.empty())
    return fail("usage: attn-compile kernel.mlir [--shared] -o OUT");
  if (emitShared && !haveLinker)
    return fail("--shared: this attn-compile was built without LLD's "
                "libraries (liblld-22-dev); link the object with a C "
                "compiler instead");
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  attn::registerAll(registry);
  MLIRContext context(registry);

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input)
    return fail(error);
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
  if (!module)
    return 1; // the parser reported it

  PassManager pm(&context);
  // The parser verified the input and lit runs every pass verified: the
  // result is verified once below instead of after each pass (which cost
  // the NVVM pipeline 11-18%, this one within noise: bench/results/
  // 2026-11-27-cpu-compile-verify-once.txt).
  pm.enableVerifier(false);
  // (pm is anchored on builtin.module: the pipeline goes in without one.)
  std::string pipeline =
      "attn-lower-to-cpu-pipeline{plan-target=" + planTarget +
      (planChip.empty() ? "" : " plan-chip=" + planChip) + "}";
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    return fail("bad pipeline " + pipeline);
  if (failed(pm.run(*module)))
    return 1; // the passes reported it
  if (failed(verify(*module)))
    return fail("the lowered module does not verify");

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext);
  if (!llvmModule)
    return fail("translation to LLVM IR failed");

  // The host's triple with llc's defaults (generic CPU, PIC): the same code
  // the tool chain made.
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return fail(error);
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "generic", "", options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());

  auto optimize =
      makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, machine.get());
  if (llvm::Error e = optimize(llvmModule.get()))
    return fail(llvm::toString(std::move(e)));

  addBf16TruncationHelper(*llvmModule);

  // The object goes to -o, or to a temporary file beside it for --shared.
  std::string objectFile = outputFile;
  if (emitShared)
    objectFile = outputFile + ".o";
  {
    std::error_code ec;
    llvm::ToolOutputFile out(objectFile, ec, llvm::sys::fs::OF_None);
    if (ec)
      return fail(objectFile + ": " + ec.message());
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, out.os(), nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return fail("the target cannot emit object files");
    codegen.run(*llvmModule);
    out.keep();
  }
#ifdef ATTN_HAVE_LLD
  if (emitShared) {
    int rc = linkShared(objectFile, outputFile);
    llvm::sys::fs::remove(objectFile);
    return rc;
  }
#endif
  return 0;
}
