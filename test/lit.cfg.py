# lit configuration for the shard test suite: FileCheck tests of our tools.
import os
import lit.formats

config.name = "shard"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "unit", "CMakeLists.txt", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.shard_obj_root, "test")

# Our tools first, then LLVM's (FileCheck, not, mlir-opt, split-file).
config.environment["PATH"] = os.pathsep.join(
    [config.shard_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

config.substitutions.append(("%shard-opt", os.path.join(config.shard_tools_dir, "shard-opt")))
config.substitutions.append(("%shard-import", os.path.join(config.shard_tools_dir, "shard-import")))
config.substitutions.append(("%shard-compile", os.path.join(config.shard_tools_dir, "shard-compile")))
config.substitutions.append(("%shard-tokens", os.path.join(config.shard_tools_dir, "shard-tokens")))
config.substitutions.append(("%mlir-opt", os.path.join(config.llvm_tools_dir, "mlir-opt")))
config.substitutions.append(("%mlir-translate", os.path.join(config.llvm_tools_dir, "mlir-translate")))
config.substitutions.append(("%models", config.shard_models_dir))

# Tests that make private device nodes (mknod) need root.
if hasattr(os, "geteuid") and os.geteuid() == 0:
    config.available_features.add("root")
