# lit configuration of the downstream example (run by check-downstream).
import os

import lit.formats

config.name = "attn-downstream"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = lit_config.params["exec_root"]
path = [lit_config.params["tools_dir"], lit_config.params["llvm_tools_dir"],
        config.environment.get("PATH", os.environ.get("PATH", ""))]
config.environment["PATH"] = os.pathsep.join(path)
