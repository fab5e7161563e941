// Reading the argument sequences of the op table (shardrt/ops.def): an
// SRT_OP row's `args` is a sequence of (kind, name, src) tuples, walked by
// SRT_OP_PARAMS / SRT_OP_ARGS into the C parameters and call arguments of
// the op's entry points. A consumer that needs another view of the
// arguments (checks, lowering) defines its own walk the same way: a pair of
// macros that call each other once per tuple (the "ping-pong" idiom of
// preprocessor sequences), continued by SRT_OP_NEXT_<kind> and stopped by
// the (END, _, _) tuple the walk appends.
#ifndef SHARDRT_OP_TABLE_H
#define SHARDRT_OP_TABLE_H

/// The continuation after a tuple of `kind`: the next step, or nothing at
/// the end of the sequence.
#define SRT_OP_NEXT_BUF(next) next
#define SRT_OP_NEXT_OPT_BUF(next) next
#define SRT_OP_NEXT_SIZE(next) next
#define SRT_OP_NEXT_INT(next) next
#define SRT_OP_NEXT_AXIS(next) next
#define SRT_OP_NEXT_DTYPE(next) next
#define SRT_OP_NEXT_F64(next) next
#define SRT_OP_NEXT_ATTENTION(next) next
#define SRT_OP_NEXT_BUCKET(next) next
#define SRT_OP_NEXT_PROGRAM(next) next
#define SRT_OP_NEXT_OPTIONS(next) next
#define SRT_OP_NEXT_RESULT(next) next
#define SRT_OP_NEXT_REQUIRE(next) next
#define SRT_OP_NEXT_END(next)

/// The C type of an argument of `kind` (REQUIRE and END have none).
#define SRT_OP_TYPE_BUF int64_t
#define SRT_OP_TYPE_OPT_BUF int64_t
#define SRT_OP_TYPE_SIZE int64_t
#define SRT_OP_TYPE_INT int64_t
#define SRT_OP_TYPE_AXIS int64_t
#define SRT_OP_TYPE_DTYPE int64_t
#define SRT_OP_TYPE_F64 double
#define SRT_OP_TYPE_ATTENTION const srt_op_attention_config *
#define SRT_OP_TYPE_BUCKET const int64_t *
#define SRT_OP_TYPE_PROGRAM const srt_program *
#define SRT_OP_TYPE_OPTIONS const srt_step_options *
#define SRT_OP_TYPE_RESULT srt_step_result *

/// `args` as parameters, each with its leading comma: `f(srt_exec *e
/// SRT_OP_PARAMS(args))`.
#define SRT_OP_PARAMS(args) SRT_OP_PARAMS_A args(END, _, _)
#define SRT_OP_PARAMS_A(kind, name, src) SRT_OP_PARAM_##kind(name) SRT_OP_NEXT_##kind(SRT_OP_PARAMS_B)
#define SRT_OP_PARAMS_B(kind, name, src) SRT_OP_PARAM_##kind(name) SRT_OP_NEXT_##kind(SRT_OP_PARAMS_A)
#define SRT_OP_PARAM_BUF(name) , SRT_OP_TYPE_BUF name
#define SRT_OP_PARAM_OPT_BUF(name) , SRT_OP_TYPE_OPT_BUF name
#define SRT_OP_PARAM_SIZE(name) , SRT_OP_TYPE_SIZE name
#define SRT_OP_PARAM_INT(name) , SRT_OP_TYPE_INT name
#define SRT_OP_PARAM_AXIS(name) , SRT_OP_TYPE_AXIS name
#define SRT_OP_PARAM_DTYPE(name) , SRT_OP_TYPE_DTYPE name
#define SRT_OP_PARAM_F64(name) , SRT_OP_TYPE_F64 name
#define SRT_OP_PARAM_ATTENTION(name) , SRT_OP_TYPE_ATTENTION name
#define SRT_OP_PARAM_BUCKET(name) , SRT_OP_TYPE_BUCKET name
#define SRT_OP_PARAM_PROGRAM(name) , SRT_OP_TYPE_PROGRAM name
#define SRT_OP_PARAM_OPTIONS(name) , SRT_OP_TYPE_OPTIONS name
#define SRT_OP_PARAM_RESULT(name) , SRT_OP_TYPE_RESULT name
#define SRT_OP_PARAM_REQUIRE(name)
#define SRT_OP_PARAM_END(name)

/// `args` as the call arguments that pass a function's own parameters on,
/// each with its leading comma: `g(e SRT_OP_ARGS(args))`.
#define SRT_OP_ARGS(args) SRT_OP_ARGS_A args(END, _, _)
#define SRT_OP_ARGS_A(kind, name, src) SRT_OP_ARG_##kind(name) SRT_OP_NEXT_##kind(SRT_OP_ARGS_B)
#define SRT_OP_ARGS_B(kind, name, src) SRT_OP_ARG_##kind(name) SRT_OP_NEXT_##kind(SRT_OP_ARGS_A)
#define SRT_OP_ARG_BUF(name) , name
#define SRT_OP_ARG_OPT_BUF(name) , name
#define SRT_OP_ARG_SIZE(name) , name
#define SRT_OP_ARG_INT(name) , name
#define SRT_OP_ARG_AXIS(name) , name
#define SRT_OP_ARG_DTYPE(name) , name
#define SRT_OP_ARG_F64(name) , name
#define SRT_OP_ARG_ATTENTION(name) , name
#define SRT_OP_ARG_BUCKET(name) , name
#define SRT_OP_ARG_PROGRAM(name) , name
#define SRT_OP_ARG_OPTIONS(name) , name
#define SRT_OP_ARG_RESULT(name) , name
#define SRT_OP_ARG_REQUIRE(name)
#define SRT_OP_ARG_END(name)

/// Declares `prefix`<name> for every op: a backend's entry points
/// (srt_cpu_op_, srt_cuda_op_), with the arguments of srt_op_<name>.
#define SRT_OP_DECLARE(prefix, name, args) srt_status prefix##name(srt_exec *e SRT_OP_PARAMS(args));

#endif // SHARDRT_OP_TABLE_H
