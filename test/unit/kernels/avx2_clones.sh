#!/usr/bin/env bash
# The x86-64-v3 (AVX2) clones of the hot kernel loops are vector code: each
# named clone in libshardrt.a holds packed ymm arithmetic, at least a third
# as many packed as scalar operations (a vectorised loop keeps a scalar
# remainder; a scalar one has a few packed ones from inlined helpers such
# as srt_max, which the previous build's attention rows showed). A select whose
# arm the compiler may not speculate (runtime/cpu/vmath.h, runtime/
# CMakeLists.txt's -fno-trapping-math) once left these scalar on every
# AVX2-only CPU, 4-7x slower, while the AVX-512 clones hid it. Skips (77)
# where the clones do not exist (a non-GCC or non-x86-64 build).
# usage: avx2_clones.sh LIBSHARDRT_A
set -u
lib=$1
command -v objdump >/dev/null || { echo "SKIP: no objdump"; exit 77; }
dis=$(objdump -d --no-show-raw-insn "$lib" 2>/dev/null) || { echo "FAIL: objdump $lib"; exit 1; }
grep -q 'arch_x86_64_v3>:' <<<"$dis" || { echo "SKIP: no x86-64-v3 clones in $lib"; exit 77; }
# clone names: glu.c's srt_cpu_glu_forward_serial, ... (names repeat across
# files, so each is looked for in its own object's part of the listing).
status=0
check() { # OBJECT FUNCTION
  local n
  local n s
  read -r n s < <(awk -v obj="$1:" -v fn="<$2.arch_x86_64_v3>:" '
    /file format/ { in_obj = ($1 == obj) }
    in_obj && /^[0-9a-f]+ <.*>:$/ { in_fn = ($2 == fn); next }
    in_obj && in_fn && /v(fmadd|fnmadd|fmsub|mul|add|sub|div|max|min)[0-9]*ps.*%ymm/ { n++ }
    in_obj && in_fn && /v(fmadd|fnmadd|fmsub|mul|add|sub|div)[0-9]*ss/ { s++ }
    END { print n + 0, s + 0 }' <<<"$dis")
  if [ "$n" -gt 0 ] && [ $((3 * n)) -ge "$s" ]; then
    echo "ok: $1 $2 (AVX2): $n packed ymm operations, $s scalar"
  else
    echo "FAIL: $1 $2 (AVX2 clone): $n packed ymm and $s scalar operations: the loop runs scalar"
    status=1
  fi
}
check glu.c.o srt_cpu_glu_forward_serial
check glu.c.o srt_cpu_glu_backward_serial
check glu.c.o srt_cpu_glu_forward_bf16_serial
check glu.c.o srt_cpu_glu_backward_bf16_serial
check add.c.o srt_cpu_add_bf16_serial
check adamw.c.o adamw_chunk
check cross_entropy.c.o row_sum_exp
check cross_entropy.c.o softmax_grad_row
check attention.c.o online_softmax_row
check attention.c.o backward_row
check attention.c.o softcap_row
check rms_norm.c.o backward_row
check relu2.c.o forward_chunk
exit $status
