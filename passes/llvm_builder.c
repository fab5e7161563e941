// LLVM-dialect ops through the generic MLIR C API (llvm_builder.h).
#include "llvm_builder.h"

#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/LLVM.h"

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

static MlirNamedAttribute named(lb_builder *b, const char *name, MlirAttribute a) {
  return mlirNamedAttributeGet(mlirIdentifierGet(b->ctx, str(name)), a);
}

lb_builder lb_create(MlirContext ctx, MlirBlock block, MlirLocation loc) {
  return (lb_builder){.ctx = ctx,
                      .block = block,
                      .loc = loc,
                      .ptr = mlirLLVMPointerTypeGet(ctx, 0),
                      .i1 = mlirIntegerTypeGet(ctx, 1),
                      .i32 = mlirIntegerTypeGet(ctx, 32),
                      .i64 = mlirIntegerTypeGet(ctx, 64),
                      .f64 = mlirF64TypeGet(ctx)};
}

// Creates `name` with the given operands, results and attributes, with
// `nregions` empty regions, and appends it to the builder's block.
static MlirOperation op(lb_builder *b, const char *name, intptr_t nops, const MlirValue *ops,
                        intptr_t nres, const MlirType *res, intptr_t nattrs,
                        const MlirNamedAttribute *attrs, intptr_t nregions) {
  MlirOperationState st = mlirOperationStateGet(str(name), b->loc);
  mlirOperationStateAddOperands(&st, nops, ops);
  mlirOperationStateAddResults(&st, nres, res);
  mlirOperationStateAddAttributes(&st, nattrs, attrs);
  MlirRegion regions[1];
  for (intptr_t i = 0; i < nregions; ++i)
    regions[i] = mlirRegionCreate();
  mlirOperationStateAddOwnedRegions(&st, nregions, regions);
  MlirOperation o = mlirOperationCreate(&st);
  mlirBlockAppendOwnedOperation(b->block, o);
  return o;
}

static MlirValue result(MlirOperation o) { return mlirOperationGetResult(o, 0); }

// A new block in region 0 of `o` with the given arguments.
static MlirBlock body_of(lb_builder *b, MlirOperation o, intptr_t nargs, const MlirType *types) {
  MlirLocation *locs = calloc((size_t)nargs + 1, sizeof *locs);
  for (intptr_t i = 0; i < nargs; ++i)
    locs[i] = b->loc;
  MlirBlock blk = mlirBlockCreate(nargs, types, locs);
  free(locs);
  mlirRegionAppendOwnedBlock(mlirOperationGetRegion(o, 0), blk);
  return blk;
}

//===----------------------------------------------------------------------===//
// Module level
//===----------------------------------------------------------------------===//

MlirOperation lb_func(lb_builder *b, const char *name, MlirType type, MlirBlock *body) {
  MlirNamedAttribute attrs[] = {
      named(b, "sym_name", mlirStringAttrGet(b->ctx, str(name))),
      named(b, "function_type", mlirTypeAttrGet(type)),
      named(b, "linkage", mlirLLVMLinkageAttrGet(b->ctx, MlirLLVMLinkageExternal)),
  };
  MlirOperation f = op(b, "llvm.func", 0, NULL, 0, NULL, 3, attrs, 1);
  if (body) {
    intptr_t n = mlirLLVMFunctionTypeGetNumInputs(type);
    MlirType *inputs = calloc((size_t)n + 1, sizeof *inputs);
    for (intptr_t i = 0; i < n; ++i)
      inputs[i] = mlirLLVMFunctionTypeGetInput(type, i);
    *body = body_of(b, f, n, inputs);
    free(inputs);
  }
  return f;
}

static MlirOperation global(lb_builder *b, const char *name, MlirType type, bool external,
                            MlirAttribute value) {
  MlirNamedAttribute attrs[6] = {
      named(b, "sym_name", mlirStringAttrGet(b->ctx, str(name))),
      named(b, "global_type", mlirTypeAttrGet(type)),
      named(b, "linkage", mlirLLVMLinkageAttrGet(b->ctx, external ? MlirLLVMLinkageExternal
                                                                  : MlirLLVMLinkagePrivate)),
      named(b, "constant", mlirUnitAttrGet(b->ctx)),
      named(b, "addr_space", mlirIntegerAttrGet(b->i32, 0)),
  };
  int n = 5;
  if (!mlirAttributeIsNull(value))
    attrs[n++] = named(b, "value", value);
  return op(b, "llvm.mlir.global", 0, NULL, 0, NULL, n, attrs, 1);
}

MlirOperation lb_global_string(lb_builder *b, const char *name, const char *data, size_t len) {
  char *bytes = malloc(len + 1);
  if (len) // an empty MLIR string may have no data pointer
    memcpy(bytes, data, len);
  bytes[len] = '\0';
  MlirAttribute value = mlirStringAttrGet(b->ctx, mlirStringRefCreate(bytes, len + 1));
  free(bytes);
  MlirType type = mlirLLVMArrayTypeGet(mlirIntegerTypeGet(b->ctx, 8), (unsigned)(len + 1));
  return global(b, name, type, false, value);
}

MlirOperation lb_global(lb_builder *b, const char *name, MlirType type, bool external,
                        MlirBlock *init) {
  MlirOperation g = global(b, name, type, external, (MlirAttribute){NULL});
  if (init)
    *init = body_of(b, g, 0, NULL);
  return g;
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

MlirValue lb_const_int(lb_builder *b, MlirType type, int64_t v) {
  MlirNamedAttribute a = named(b, "value", mlirIntegerAttrGet(type, v));
  return result(op(b, "llvm.mlir.constant", 0, NULL, 1, &type, 1, &a, 0));
}

MlirValue lb_const_f64(lb_builder *b, double v) {
  MlirNamedAttribute a = named(b, "value", mlirFloatAttrDoubleGet(b->ctx, b->f64, v));
  return result(op(b, "llvm.mlir.constant", 0, NULL, 1, &b->f64, 1, &a, 0));
}

MlirValue lb_zero(lb_builder *b, MlirType type) {
  return result(op(b, "llvm.mlir.zero", 0, NULL, 1, &type, 0, NULL, 0));
}

MlirValue lb_undef(lb_builder *b, MlirType type) {
  return result(op(b, "llvm.mlir.undef", 0, NULL, 1, &type, 0, NULL, 0));
}

MlirValue lb_address_of(lb_builder *b, const char *name) {
  MlirNamedAttribute a =
      named(b, "global_name", mlirFlatSymbolRefAttrGet(b->ctx, str(name)));
  return result(op(b, "llvm.mlir.addressof", 0, NULL, 1, &b->ptr, 1, &a, 0));
}

MlirValue lb_insert(lb_builder *b, MlirValue agg, MlirValue v, int n, const int64_t *position) {
  MlirNamedAttribute a = named(b, "position", mlirDenseI64ArrayGet(b->ctx, n, position));
  MlirValue ops[2] = {agg, v};
  MlirType t = mlirValueGetType(agg);
  return result(op(b, "llvm.insertvalue", 2, ops, 1, &t, 1, &a, 0));
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

MlirValue lb_call(lb_builder *b, const char *callee, int n, const MlirValue *args,
                  MlirType res) {
  int32_t segments[2] = {n, 0}; // callee operands, operand-bundle operands
  MlirNamedAttribute attrs[] = {
      named(b, "callee", mlirFlatSymbolRefAttrGet(b->ctx, str(callee))),
      named(b, "operandSegmentSizes", mlirDenseI32ArrayGet(b->ctx, 2, segments)),
      named(b, "op_bundle_sizes", mlirDenseI32ArrayGet(b->ctx, 0, NULL)),
  };
  return result(op(b, "llvm.call", n, args, 1, &res, 3, attrs, 0));
}

MlirValue lb_icmp_ne(lb_builder *b, MlirValue a, MlirValue c) {
  MlirNamedAttribute p = named(b, "predicate", mlirIntegerAttrGet(b->i64, 1)); // ne
  MlirValue ops[2] = {a, c};
  return result(op(b, "llvm.icmp", 2, ops, 1, &b->i1, 1, &p, 0));
}

void lb_cond_br(lb_builder *b, MlirValue cond, MlirBlock yes, int nargs,
                const MlirValue *args, MlirBlock no) {
  int32_t segments[3] = {1, nargs, 0}; // condition, true operands, false operands
  MlirNamedAttribute a =
      named(b, "operandSegmentSizes", mlirDenseI32ArrayGet(b->ctx, 3, segments));
  MlirValue *ops = calloc((size_t)nargs + 1, sizeof *ops);
  ops[0] = cond;
  for (int i = 0; i < nargs; ++i)
    ops[1 + i] = args[i];
  MlirOperationState st = mlirOperationStateGet(str("llvm.cond_br"), b->loc);
  mlirOperationStateAddOperands(&st, 1 + nargs, ops);
  mlirOperationStateAddAttributes(&st, 1, &a);
  MlirBlock succ[2] = {yes, no};
  mlirOperationStateAddSuccessors(&st, 2, succ);
  mlirBlockAppendOwnedOperation(b->block, mlirOperationCreate(&st));
  free(ops);
}

void lb_return(lb_builder *b, MlirValue v) {
  op(b, "llvm.return", mlirValueIsNull(v) ? 0 : 1, &v, 0, NULL, 0, NULL, 0);
}
