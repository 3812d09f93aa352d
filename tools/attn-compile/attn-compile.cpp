//===- attn-compile.cpp - an attn kernel to a CPU object file ---*- C++ -*-===//
//
// One process from MLIR text to machine code: the CPU pipeline
// (attn-lower-to-cpu-pipeline), translation to LLVM IR, LLVM's -O3 and code
// generation for the host, replacing attn-opt | mlir-translate | opt | llc
// (four processes, four parses) for attn_mlir's CPU kernels. The object is
// then linked into a shared library by the caller.
//
//   attn-compile kernel.mlir -o kernel.o [--plan-target=T --plan-chip=C]
//
//===----------------------------------------------------------------------===//

#include "attn/InitAll.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;

static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                            llvm::cl::desc("<kernel.mlir>"),
                                            llvm::cl::Required);
static llvm::cl::opt<std::string> outputFile("o", llvm::cl::desc("object file"),
                                             llvm::cl::Required);
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

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAllPasses();
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "attn kernel to a host object file\n");
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
  // (pm is anchored on builtin.module: the pipeline goes in without one.)
  std::string pipeline =
      "attn-lower-to-cpu-pipeline{plan-target=" + planTarget +
      (planChip.empty() ? "" : " plan-chip=" + planChip) + "}";
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    return fail("bad pipeline " + pipeline);
  if (failed(pm.run(*module)))
    return 1; // the passes reported it

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

  std::error_code ec;
  llvm::ToolOutputFile out(outputFile, ec, llvm::sys::fs::OF_None);
  if (ec)
    return fail(outputFile + ": " + ec.message());
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, out.os(), nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return fail("the target cannot emit object files");
  codegen.run(*llvmModule);
  out.keep();
  return 0;
}
