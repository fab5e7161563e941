# Finds MLIR/LLVM 22 and defines `shard::mlir_capi`, an interface target with
# the MLIR C API: the MLIRCAPI* archives linked against the shared libMLIR and
# libLLVM (linking the archives' own static dependencies would pull all of
# MLIR statically into every tool: slow links, large binaries).
find_package(MLIR REQUIRED CONFIG HINTS /usr/lib/llvm-22/lib/cmake/mlir)
if(NOT LLVM_VERSION_MAJOR EQUAL 22)
  message(FATAL_ERROR "MLIR/LLVM 22 is required, found ${LLVM_PACKAGE_VERSION} "
                      "at ${MLIR_DIR} (run scripts/setup.sh)")
endif()
message(STATUS "Using MLIR ${LLVM_PACKAGE_VERSION} from ${MLIR_DIR}")

set(SHARD_MLIR_CAPI_LIBS
  MLIRCAPIRegisterEverything MLIRCAPITarget MLIRCAPIIRDL MLIRCAPIShard MLIRCAPIFunc
  MLIRCAPILLVM MLIRCAPITransforms MLIRCAPIIR)

add_library(shard_mlir_capi INTERFACE)
add_library(shard::mlir_capi ALIAS shard_mlir_capi)
target_include_directories(shard_mlir_capi SYSTEM INTERFACE ${MLIR_INCLUDE_DIRS}
                           ${LLVM_INCLUDE_DIRS})
foreach(lib ${SHARD_MLIR_CAPI_LIBS})
  target_link_libraries(shard_mlir_capi INTERFACE $<TARGET_FILE:${lib}>)
endforeach()
target_link_libraries(shard_mlir_capi INTERFACE
  ${LLVM_LIBRARY_DIR}/libMLIR.so ${LLVM_LIBRARY_DIR}/libLLVM.so stdc++ m)
set(CMAKE_BUILD_RPATH ${LLVM_LIBRARY_DIR})
set(CMAKE_INSTALL_RPATH ${LLVM_LIBRARY_DIR})

set(SHARD_LLVM_TOOLS_DIR ${LLVM_TOOLS_BINARY_DIR})
