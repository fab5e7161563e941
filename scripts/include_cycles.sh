#!/usr/bin/env bash
# Finds include cycles between the modules of the repository: a module is a
# source file with its header (x.c/x.cu and x.h/x.cuh of one folder are one
# node), and module A depends on module B when a file of A has
# `#include "..."` of a file of B. A cycle (A needs B and B needs A, perhaps
# through others) means neither can be understood, tested or replaced alone.
# Prints each cycle (a strongly connected group of modules: one shortest
# cycle through it, then every include inside it) and exits 1 if there is
# one, 0 if there is none.
#
# usage: scripts/include_cycles.sh [DIR...]   (default: passes runtime tools)
#
# An include is resolved as the compiler does for the tree's -I folders: the
# including file's folder first, then any file of the scanned folders whose
# path ends with the included name (when several do, the one sharing the
# longest leading path with the includer). Includes of files outside the
# scanned folders (MLIR, generated headers, system headers) are not edges.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dirs=("$@")
((${#dirs[@]})) || dirs=(passes runtime tools)
for d in "${dirs[@]}"; do
  [[ -d $d ]] || { echo "include_cycles.sh: no folder '$d' under $root" >&2; exit 2; }
done

# One line per source file: "F <path>", then one "I <path> <included>" per
# quoted include of it.
find "${dirs[@]}" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
  -o -name '*.cc' -o -name '*.cpp' -o -name '*.def' -o -name '*.inc' \) | LC_ALL=C sort |
  while IFS= read -r f; do
    echo "F $f"
    sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/p' "$f" |
      while IFS= read -r inc; do echo "I $f $inc"; done
  done |
  LC_ALL=C awk '
# The module of a file: its path without a source or header extension.
function module(p) { sub(/\.(c|h|cu|cuh|cc|cpp)$/, "", p); return p }
function modof(p) { return (p in owner) ? owner[p] : module(p) }
# The name a header shares with its source: no folder, extension, _internal.
function stem(p) { sub(/.*\//, "", p); sub(/\.[^.]*$/, "", p); sub(/_internal$/, "", p); return p }
function dirname(p) { if (p !~ /\//) return ""; sub(/\/[^\/]*$/, "", p); return p "/" }
# Collapses "a/b/../c" and "./" so that relative includes find their file.
function normalize(p,   n, parts, out, i, k) {
  n = split(p, parts, "/"); k = 0
  for (i = 1; i <= n; i++) {
    if (parts[i] == "." || parts[i] == "") continue
    if (parts[i] == ".." && k > 0 && stack[k] != "..") { k--; continue }
    stack[++k] = parts[i]
  }
  out = ""
  for (i = 1; i <= k; i++) out = out (i > 1 ? "/" : "") stack[i]
  return out
}
function common(a, b,   i) {
  for (i = 1; i <= length(a) && i <= length(b); i++)
    if (substr(a, i, 1) != substr(b, i, 1)) break
  return i - 1
}
function resolve(from, inc,   p, f, best, bestlen, l) {
  p = normalize(dirname(from) inc)
  if (p in isfile) return p
  best = ""; bestlen = -1
  for (f in isfile)
    if (f == inc || substr(f, length(f) - length(inc)) == "/" inc) {
      l = common(f, from)
      if (l > bestlen || (l == bestlen && f < best)) { best = f; bestlen = l }
    }
  return best
}
$1 == "F" { isfile[$2] = 1; nfiles++; if ($2 ~ /\.(c|cu|cc|cpp)$/) nsrc[stem($2)]++; next }
$1 == "I" { nin++; from[nin] = $2; inc[nin] = $3; next }
END {
  for (i = 1; i <= nin; i++) {
    target[i] = resolve(from[i], inc[i])
    if (target[i] != "" && from[i] ~ /\.(c|cu|cc|cpp)$/ && stem(target[i]) == stem(from[i]) &&
        (dirname(from[i]) == dirname(target[i]) || nsrc[stem(from[i])] == 1))
      owner[target[i]] = module(from[i])
  }
  for (i = 1; i <= nin; i++) {
    to = target[i]
    if (to == "") continue
    a = modof(from[i]); b = modof(to)
    if (a == b) continue
    node[a] = 1; node[b] = 1
    if (!((a, b) in edge)) { edge[a, b] = 1; nout[a]++; out[a, nout[a]] = b }
    why[a, b] = why[a, b] (why[a, b] == "" ? "" : ", ") from[i] " -> " to
  }
  # Tarjan: strongly connected groups of modules.
  n = 0; for (v in node) names[++n] = v
  sortnames(n)
  idx = 0; sp = 0; ngroups = 0
  for (i = 1; i <= n; i++) if (!(names[i] in index_)) strong(names[i])
  for (g = 1; g <= ngroups; g++) report(g)
  if (ngroups == 0) { printf "no include cycle among %d files\n", nfiles; exit 0 }
  printf "%d include cycle(s)\n", ngroups
  exit 1
}
function sortnames(n,   i, j, t) {
  for (i = 2; i <= n; i++) { t = names[i]; for (j = i - 1; j >= 1 && names[j] > t; j--) names[j + 1] = names[j]; names[j + 1] = t }
}
function strong(v,   k, w, size) {
  index_[v] = low[v] = ++idx; st[++sp] = v; on[v] = 1
  for (k = 1; k <= nout[v]; k++) {
    w = out[v, k]
    if (!(w in index_)) { strong(w); if (low[w] < low[v]) low[v] = low[w] }
    else if (on[w] && index_[w] < low[v]) low[v] = index_[w]
  }
  if (low[v] != index_[v]) return
  size = 0
  do { w = st[sp--]; on[w] = 0; size++; group[w] = v; members[v, size] = w } while (w != v)
  if (size > 1) { ngroups++; root_[ngroups] = v; gsize[v] = size }
}
# Prints one shortest cycle through the group (breadth-first from its
# smallest module, inside the group), then every include between its modules.
function report(g,   r, s, i, head, tail, v, k, w, path, first, a, b) {
  r = root_[g]; s = gsize[r]
  first = members[r, 1]
  for (i = 2; i <= s; i++) if (members[r, i] < first) first = members[r, i]
  split("", seen); split("", prev)
  head = 1; tail = 1; queue[1] = first; seen[first] = 1; found = ""
  while (head <= tail && found == "") {
    v = queue[head++]
    for (k = 1; k <= nout[v]; k++) {
      w = out[v, k]
      if (group[w] != r) continue
      if (w == first) { found = v; break }
      if (!(w in seen)) { seen[w] = 1; prev[w] = v; queue[++tail] = w }
    }
  }
  path = first
  for (v = found; v != first; v = prev[v]) path = v " -> " path
  printf "cycle: %s -> %s\n", first, path
  for (i = 1; i <= s; i++) for (k = 1; k <= s; k++) {
    a = members[r, i]; b = members[r, k]
    if ((a, b) in edge) printf "  %s\n", why[a, b]
  }
}
'
