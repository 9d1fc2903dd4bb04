#!/usr/bin/env bash
# build_rapidsnark.sh - builds iden3's rapidsnark `prover` (bn128 only, x86-64 assembly
# field arithmetic, OpenMP) from its public sources, for bench/prove_vs_peers and
# bench/worker_throughput. Nothing here is used by zkqueue itself.
#
#   bench/build_rapidsnark.sh            # prints the path of the prover binary last
#
# Sources are git repositories (bare or not) of iden3/rapidsnark, iden3/ffiasm and
# nlohmann/json, found at $RAPIDSNARK_GIT, $FFIASM_GIT and $NLOHMANN_JSON_GIT (defaults:
# the mirrors under /work/.mirror, else a `git clone` from GitHub). rapidsnark pins an
# ffiasm commit; when the pinned commit is missing from the ffiasm repository its newest
# commit is used (it builds and proves correctly; the bench checks every proof).
# GMP is the system one (Debian: libgmp-dev); rapidsnark's own GMP download is not used.
# Needs: git, cmake, g++, nasm, libgmp-dev.
#
# Output: $RAPIDSNARK_CACHE (default ~/.cache/zkqueue/rapidsnark)/bin/prover. Rebuilt only
# when the source commits change (recorded in the cache's stamp file).
set -euo pipefail

CACHE=${RAPIDSNARK_CACHE:-$HOME/.cache/zkqueue/rapidsnark}
MIRROR=${MIRROR_DIR:-/work/.mirror}
RAPIDSNARK_GIT=${RAPIDSNARK_GIT:-$MIRROR/iden3+rapidsnark/repo}
FFIASM_GIT=${FFIASM_GIT:-$MIRROR/iden3+ffiasm/repo}
NLOHMANN_JSON_GIT=${NLOHMANN_JSON_GIT:-$MIRROR/nlohmann+json/repo}

for tool in git cmake g++ nasm; do
  command -v "$tool" >/dev/null || { echo "build_rapidsnark: '$tool' not found (apt-get install cmake g++ nasm)" >&2; exit 2; }
done
if ! echo '#include <gmp.h>' | g++ -x c++ -fsyntax-only - 2>/dev/null; then
  echo "build_rapidsnark: gmp.h not found (apt-get install libgmp-dev)" >&2; exit 2
fi

mkdir -p "$CACHE"
# Use the local repository when there is one; clone from GitHub otherwise.
repo() {  # repo VAR_PATH OWNER/NAME -> prints a git dir
  local path=$1 slug=$2
  if git --git-dir="$path" rev-parse HEAD >/dev/null 2>&1; then echo "$path"; return; fi
  if git -C "$path" rev-parse HEAD >/dev/null 2>&1; then git -C "$path" rev-parse --absolute-git-dir; return; fi
  local dst="$CACHE/git/${slug/\//+}"
  [ -d "$dst" ] || git clone -q --bare "https://github.com/$slug" "$dst" >&2
  echo "$dst"
}
RS=$(repo "$RAPIDSNARK_GIT" iden3/rapidsnark)
FA=$(repo "$FFIASM_GIT" iden3/ffiasm)
JS=$(repo "$NLOHMANN_JSON_GIT" nlohmann/json)

rs_commit=$(git --git-dir="$RS" rev-parse HEAD)
pin() { git --git-dir="$RS" ls-tree HEAD "$1" | awk '{print $3}'; }
pick() {  # pick GITDIR PINNED -> the pinned commit when present, else HEAD
  if git --git-dir="$1" cat-file -e "$2^{commit}" 2>/dev/null; then echo "$2"
  else git --git-dir="$1" rev-parse HEAD; fi
}
fa_commit=$(pick "$FA" "$(pin depends/ffiasm)")
js_commit=$(pick "$JS" "$(pin depends/json)")
[ "$fa_commit" = "$(pin depends/ffiasm)" ] || \
  echo "build_rapidsnark: ffiasm $(pin depends/ffiasm) (pinned) not in $FA; using its HEAD $fa_commit" >&2
stamp="rapidsnark=$rs_commit ffiasm=$fa_commit json=$js_commit"

if [ -x "$CACHE/bin/prover" ] && [ "$(cat "$CACHE/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$CACHE/bin/prover"; exit 0
fi

src="$CACHE/src"
rm -rf "$src" "$CACHE/build" "$CACHE/bin"
mkdir -p "$src/depends/ffiasm" "$src/depends/json" "$CACHE/bin"
git --git-dir="$RS" archive "$rs_commit" | tar -x -C "$src"
git --git-dir="$FA" archive "$fa_commit" | tar -x -C "$src/depends/ffiasm"
# Only the single header is needed; the whole json tree is large.
git --git-dir="$JS" archive "$js_commit" single_include | tar -x -C "$src/depends/json"

# Release build with rapidsnark's x86-64 assembly (build/fr.asm, fq.asm) and OpenMP;
# GMP_PREFIX points nowhere so platform.cmake falls back to the system libgmp.
cmake -S "$src" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release -DUSE_ASM=ON -DUSE_OPENMP=ON \
      >"$CACHE/cmake.log" 2>&1 || { tail -30 "$CACHE/cmake.log" >&2; exit 1; }
cmake --build "$CACHE/build" --target prover -j"$(nproc)" >"$CACHE/make.log" 2>&1 || \
  { tail -30 "$CACHE/make.log" >&2; exit 1; }
cp "$CACHE/build/src/prover" "$CACHE/bin/prover"
echo "$stamp" >"$CACHE/stamp"
echo "$CACHE/bin/prover"
