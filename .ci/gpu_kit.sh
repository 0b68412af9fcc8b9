#!/usr/bin/env bash
# GPU session kit, part 1 (run HERE, on the development machine): builds what the GPU checks need
# and packs it with the shared libraries a bare GPU machine lacks.
#
#   bash .ci/gpu_kit.sh [BUILD_DIR] [KIT_DIR]        (defaults: build-kit, .gpu-kit)
#
# Builds (CUDA on, Ninja, Release at -O2: the optimisation level of the default build, without
# debug info) test_backends, test_frontends, amp-train, amp-run, amp-rewrite, amp-inspect and
# bench_cuda_train_step into BUILD_DIR, then writes KIT_DIR/kit.tar.xz:
#   kit/bin/           the executables, stripped, without RUNPATH (-DCMAKE_SKIP_BUILD_RPATH=ON), and
#                      the CUDA backend's module libamp_cuda_backend.so, which they load from beside
#                      themselves (backends/cuda_module.h); the module links the CUDA libraries
#   kit/lib/           every shared library they load (ldd) except the C runtime and the CUDA
#                      libraries (cudart, cuBLAS(Lt), NVRTC, cuDNN, NCCL: the GPU machine's own, so that
#                      they fit its driver)
#   kit/lib-fallback/  libstdc++, libgcc_s, libz: used there only if its own are missing or too old
#   kit/MANIFEST       what was built from what; kit/SOURCES.sha256 the compiled sources used;
#   kit/CUDA_NEEDED    the CUDA libraries the executables link
#   kit/BUILD_VERSIONS the versions of the CUDA headers built with (driver and NVRTC: the toolkit's),
#                      which gpu_run.sh holds the GPU machine's libraries to (.ci/cuda_versions.py)
# KIT_DIR is ignored by git: carry it to the GPU machine and run `bash .ci/gpu_run.sh` there.
# JOBS=N overrides ninja's -j (default 2: the development machine has two shared cores).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-build-kit}
KIT=${2:-.gpu-kit}
JOBS=${JOBS:-2}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
case $KIT in /*) ;; *) KIT=$ROOT/$KIT ;; esac

TOOLS=(amp-train amp-run amp-rewrite amp-inspect)
TESTS=(test_backends test_frontends bench_cuda_train_step)
MODULE=libamp_cuda_backend.so
CUDA_LIBS_RE='^(libcuda|libcudart|libcublas|libcublasLt|libnvrtc|libnvrtc-builtins|libcudnn[a-z_]*|libnvJitLink|libnccl)\.so'
SYSTEM_RE='^(linux-vdso|linux-gate|ld-linux[-a-z0-9_]*|libc|libm|libdl|libpthread|librt|libutil|libresolv|libmvec|libstdc\+\+|libgcc_s|libz)\.so'
FALLBACK=(libstdc++.so.6 libgcc_s.so.1 libz.so.1)

[ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu_kit: /usr/local/cuda/bin/nvcc not found: the kit needs the CUDA build" >&2; exit 1; }

echo "== configure $BUILD"
# ccache when present: a rebuild between two device calls takes seconds, and the Release flags are
# the main build's, so its cached objects serve the kit too.
LAUNCH=()
if command -v ccache >/dev/null 2>&1; then
  for l in C CXX CUDA; do LAUNCH+=("-DCMAKE_${l}_COMPILER_LAUNCHER=ccache"); done
fi
cmake -S "$ROOT" -B "$BUILD" -G Ninja "${LAUNCH[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O3 -DNDEBUG" \
  -DCMAKE_SKIP_BUILD_RPATH=ON -DAMP_ENABLE_CUDA=ON -DAMP_BUILD_TESTS=ON -DAMP_BUILD_BENCH=ON >/dev/null
grep -q '^AMP_CUDNN_LIBRARY:FILEPATH=/' "$BUILD/CMakeCache.txt" ||
  { echo "gpu_kit: $BUILD was configured without the CUDA backend" >&2; exit 1; }

echo "== build (ninja -j$JOBS): ${TOOLS[*]} ${TESTS[*]}"
start=$(date +%s)
ninja -C "$BUILD" -j"$JOBS" "${TOOLS[@]}" "${TESTS[@]}" amp_cuda_backend
echo "   built in $(( $(date +%s) - start )) s"

BINS=()
for t in "${TOOLS[@]}"; do BINS+=("$BUILD/$t"); done
for t in "${TESTS[@]}"; do BINS+=("$BUILD/tests/$t"); done
BINS+=("$BUILD/$MODULE")

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/gpu-kit.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/kit/bin" "$STAGE/kit/lib" "$STAGE/kit/lib-fallback"

echo "== strip"
for b in "${BINS[@]}"; do
  strip --strip-all -o "$STAGE/kit/bin/$(basename "$b")" "$b"
  if readelf -d "$STAGE/kit/bin/$(basename "$b")" | grep -qE 'R(UN)?PATH'; then
    echo "gpu_kit: $(basename "$b") still has an RPATH/RUNPATH" >&2; exit 1
  fi
done

# ldd here needs the CUDA libraries to resolve (the executables have no RUNPATH any more); they are
# not packed.
CUDA_HERE=/usr/local/cuda/lib64:/usr/local/cuda/lib:/usr/local/cuda/targets/x86_64-linux/lib
echo "== shared libraries"
declare -A seen=()
for b in "$STAGE"/kit/bin/*; do
  out=$(LD_LIBRARY_PATH=$CUDA_HERE ldd "$b")
  if grep -q 'not found' <<<"$out"; then
    echo "gpu_kit: unresolved libraries of $b here:" >&2; grep 'not found' <<<"$out" >&2; exit 1
  fi
  while read -r name _ path _; do
    [[ $path == /* ]] || continue
    [[ $name =~ $CUDA_LIBS_RE || $name =~ $SYSTEM_RE ]] && continue
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=$path
    cp -L "$path" "$STAGE/kit/lib/$name"
    chmod u+w "$STAGE/kit/lib/$name"
    strip --strip-unneeded "$STAGE/kit/lib/$name" 2>/dev/null || true
  done <<<"$out"
done
for name in $(printf '%s\n' "${!seen[@]}" | sort); do printf '   %-28s %s\n' "$name" "${seen[$name]}"; done
ldconfig -p >"$STAGE/ldconfig.txt"
for name in "${FALLBACK[@]}"; do
  path=$(awk -v n="$name" '$1 == n && /x86-64/ {print $NF; exit}' "$STAGE/ldconfig.txt")
  [ -n "$path" ] || { echo "gpu_kit: $name not found by ldconfig" >&2; exit 1; }
  cp -L "$path" "$STAGE/kit/lib-fallback/$name"
done
rm "$STAGE/ldconfig.txt"

# The CUDA libraries the executables and the module link, for gpu_run.sh to find there (without needing readelf).
for b in "$STAGE"/kit/bin/*; do readelf -d "$b"; done | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
  grep -E "$CUDA_LIBS_RE" | sort -u >"$STAGE/kit/CUDA_NEEDED"
[ -s "$STAGE/kit/CUDA_NEEDED" ] || { echo "gpu_kit: the executables and $MODULE link no CUDA library" >&2; exit 1; }

# The versions of the CUDA headers, in each library's own encoding (.ci/cuda_versions.py).
INC=/usr/local/cuda/include
define() { sed -n "s/^#define $1 \{1,\}\([0-9]\{1,\}\).*/\1/p" "$INC/$2" | head -1; }
dotted() { echo $(( $(define "$1_MAJOR" "$3") * 10000 + $(define "$1_MINOR" "$3") * 100 + $(define "$1_$2" "$3") )); }
{
  echo "driver $(define CUDA_VERSION cuda.h)"
  echo "cudart $(define CUDART_VERSION cuda_runtime_api.h)"
  echo "cublasLt $(dotted CUBLAS_VER PATCH cublas_api.h)"
  echo "cudnn $(dotted CUDNN PATCHLEVEL cudnn_version.h)"
  echo "nvrtc $(define CUDA_VERSION cuda.h)"
} >"$STAGE/kit/BUILD_VERSIONS"
awk 'NF != 2 || $2 !~ /^[1-9][0-9]*$/ {exit 1}' "$STAGE/kit/BUILD_VERSIONS" ||
  { echo "gpu_kit: cannot read the CUDA versions from $INC:" >&2; cat "$STAGE/kit/BUILD_VERSIONS" >&2; exit 1; }

# The newest symbol versions the kit needs from the GPU machine's C runtime.
need() { objdump -T "$STAGE"/kit/bin/* "$STAGE"/kit/lib/*.so* 2>/dev/null | grep -o "$1_[0-9.]*" | sort -uV | tail -1; }

echo "== manifest"
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(. /etc/os-release && echo "$PRETTY_NAME"))"
  if git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1; then
    echo "commit: $(git -C "$ROOT" rev-parse HEAD)$(git -C "$ROOT" diff --quiet HEAD -- . ':!.ci' ':!README.md' || echo ' + uncommitted changes')"
  fi
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version | grep -o 'release [0-9.]*')"
  echo "cudnn built against: $(grep -hE '#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ' /usr/local/cuda/include/cudnn_version.h 2>/dev/null | awk '{printf "%s ", $3}')"
  echo "build: $(grep -E '^CMAKE_BUILD_TYPE:' "$BUILD/CMakeCache.txt" | cut -d= -f2), CXX flags -O2 -DNDEBUG, CUDA code $(grep -o 'code=\[[^]]*\]' "$BUILD/build.ninja" | sort -u | tr '\n' ' ')"
  echo "needs from the GPU machine: $(need GLIBC) $(need GLIBCXX) $(need CXXABI); CUDA: $(echo $(cat "$STAGE/kit/CUDA_NEEDED"))"
  echo "executables: $(cd "$STAGE/kit/bin" && echo *)"
  echo "libraries: $(cd "$STAGE/kit/lib" && echo *)"
} | tee "$STAGE/kit/MANIFEST" | sed 's/^/   /'
# The compiled sources the binaries were built from, so that gpu_run.sh can say when the tree it
# runs in has others (scripts, models and test data are read from that tree at run time).
if git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1; then
  git -C "$ROOT" ls-files -z --cached --others --exclude-standard -- \
      'CMakeLists.txt' '*/CMakeLists.txt' '*.cmake' '*.cc' '*.h' '*.cu' '*.cuh' '*.inc' |
    while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done | xargs -0 sha256sum >"$STAGE/kit/SOURCES.sha256"
fi

echo "== pack"
mkdir -p "$KIT"
rm -f "$KIT/kit.tar.xz"
(cd "$STAGE" && tar -cf - kit | xz -T"$JOBS" -6 >"$KIT/kit.tar.xz")
bytes=$(stat -c %s "$KIT/kit.tar.xz")
echo "   $KIT/kit.tar.xz: $(( bytes / 1024 )) KiB ($(du -sh "$STAGE/kit" | cut -f1) unpacked)"
if [ "$bytes" -gt $(( 50 * 1024 * 1024 )) ]; then
  echo "gpu_kit: the kit is over 50 MiB; it travels with the working tree (64 MiB in all)" >&2; exit 1
fi
# What one device call carries: the working tree (tracked and untracked-not-ignored files) with the
# kit and one benchmark's folder. On 2026-11-27 a fresh machine's kit (its OpenBLAS and oneDNN
# larger than before) with .gpu-scale and the tree came to 31 KB over the device tool's 64 MiB.
tree=$(git -C "$ROOT" ls-files -z --cached --others --exclude-standard 2>/dev/null |
         (cd "$ROOT" && xargs -0 stat -c %s 2>/dev/null) | awk '{s += $1} END {print s + 0}')
for extra in .gpu-scale .gpu-gpt2; do
  [ -d "$ROOT/$extra" ] || continue
  with=$(( tree + bytes + $(du -sb "$ROOT/$extra" | cut -f1) ))
  echo "   a call carrying the kit and $extra: $(( with / 1024 / 1024 )) MiB of the device tool's 64 MiB"
  [ "$with" -le $(( 64 * 1024 * 1024 )) ] || echo "gpu_kit: WARNING: the tree, the kit and $extra are over 64 MiB: the call will be refused" >&2
done
echo "gpu_kit: done. On the GPU machine: bash .ci/gpu_run.sh ${KIT#"$ROOT"/}  (carry ${KIT#"$ROOT"/})"
