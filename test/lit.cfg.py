# -*- Python -*-
# lit configuration for attn-mlir.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "ATTN"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.attn_obj_root, "test")
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "mutate_ops.py", "vllm_grid_kernels.mlir",
                   "regressions", "Inputs"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%attn_src_root", config.attn_src_root))

llvm_config.use_default_substitutions()
# Every FileCheck run checks that [[VAR:...]] captures stay in their
# CHECK-LABEL block.
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [config.attn_tools_dir, config.llvm_tools_dir]
tools = ["attn-opt", "attn-compile", "attn-capi-test"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
config.substitutions.append(("%python", config.python_executable))

# ptxas (CUDA toolkit) assembles the PTX for the resource checks when present.
import shutil as _shutil
_ptxas = next((p for p in ("/usr/local/cuda/bin/ptxas", _shutil.which("ptxas"))
               if p and os.path.exists(p)), None)
if _ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", _ptxas))

# attn-compile built with LLD's libraries links shared libraries itself.
import subprocess as _subprocess
if _subprocess.run([os.path.join(config.attn_tools_dir, "attn-compile"),
                    "--can-link"], capture_output=True).returncode == 0:
    config.available_features.add("attn-compile-lld")

# The GPU backends built in (CMake ATTN_ENABLE_NVVM / ATTN_ENABLE_ROCDL).
if config.attn_enable_nvvm:
    config.available_features.add("nvvm-backend")
if config.attn_enable_rocdl:
    config.available_features.add("rocdl-backend")

# Stock mlir-opt from the LLVM the project was built against, and the plugin
# it loads (test/Plugin).
_mlir_opt = os.path.join(config.llvm_tools_dir, "mlir-opt")
if os.path.exists(_mlir_opt):
    config.available_features.add("stock-mlir-opt")
    config.substitutions.append(("%stock_mlir_opt", _mlir_opt))
# mlir-runner and its support libraries run whole programs on the CPU
# (test/Pipelines/attn-raise-sdpa-cpu.mlir).
_runner = os.path.join(config.llvm_tools_dir, "mlir-runner")
_libdir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
if os.path.exists(_runner) and os.path.exists(
        os.path.join(_libdir, "libmlir_c_runner_utils.so")):
    config.available_features.add("mlir-runner")
    config.substitutions.append(("%mlir_runner_utils",
                                 os.path.join(_libdir, "libmlir_runner_utils.so")))
    config.substitutions.append(("%mlir_c_runner_utils",
                                 os.path.join(_libdir, "libmlir_c_runner_utils.so")))
    config.substitutions.append(("%mlir_runner", _runner))
config.substitutions.append(
    ("%attn_plugin", os.path.join(config.attn_obj_root, "lib", "AttnPlugin.so")))
