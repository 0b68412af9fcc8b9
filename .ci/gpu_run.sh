#!/usr/bin/env bash
# GPU session kit, part 2 (run THERE, on the GPU machine, from the repository root): every GPU check
# and the GPU benchmarks in one command of under ~9 minutes.
#
#   bash .ci/gpu_run.sh [KIT_DIR]        (default .gpu-kit, made here by .ci/gpu_kit.sh and carried)
#
# 1. unpacks KIT_DIR/kit.tar.xz into a temporary folder; finds the CUDA libraries the executables
#    need (cudart, cuBLASLt, NVRTC, cuDNN, NCCL and the parts cuDNN/NVRTC load later) in the CUDA toolkit
#    (/usr/local/cuda*) and in Python's nvidia-* packages; fails naming any that is missing, or
#    any library ldd cannot resolve; reports the versions of the driver, cudart, cuBLASLt, cuDNN
#    and NVRTC the executables load and fails naming any older than the kit was built with
#    (.ci/cuda_versions.py)
# 2. tests:  test_backends --gtest_filter='Cuda*:Nvrtc*:*Gpu*:MakeBackend.*-CudaCodegenHost.*' (tests/backends/cuda_*,
#            make_backend; the host-emulated kernels need a C++ compiler and already ran in CI),
#            test_frontends --gtest_filter='AmpRun.*' (amp-run --device cuda / auto),
#            a smoke run: amp-run --device cuda on the models/ demo models (fp32 vs PyTorch's outputs,
#            fp16 rewrite vs the CPU backend) and amp-train --device cuda vs --device cpu
# 3. bench:  bench_cuda_train_step (JSON), python3 tests/bench/bench_gpu_train.py (table + JSON)
# 4. kernels: .ci/kernel_times.py, one training step's GPU time by kernel under ncu (kernel_times.txt)
# 5. zoo:    when GPU_RUN_ZOO (default .gpu-zoo, made here by `tests/zoo/gpu_zoo.py prepare` and
#            carried) holds models: gpu_zoo.py run (amp-run/amp-train --device cuda on torchvision
#            models; its gpu_zoo_N.tar go back to `gpu_zoo.py check` here) and bench_gpu_train.py
#            --zoo (those models' training step against PyTorch's, bench_gpu_zoo.json)
# Logs: ${OUT:-/tmp/gpu-out}/gpu_tests.log, gpu_bench.log and summary.txt, which ends with the
# versions and the device's capabilities (.ci/device_report.py); the gpu_zoo_N.tar; everything
# else in more.tar.xz (the device tool brings back 8 files): gtest XML, the benchmarks' JSON,
# kernel_times.txt and the device report of each smoke step (device_report/*.jsonl: what cuBLASLt
# and cuDNN accepted and what fell back, AMP_CUDA_REPORT). Every step has a timeout (GPU_RUN_BUDGET, default 540 s in all). Exit status: 2 when
# the set-up failed (kit, libraries), 1 when a test or benchmark step failed or timed out (the
# benchmarks run regardless), 0 when all passed. PYTHON names the Python with torch and numpy
# (default python3); SMOKE_DEVICE=cpu runs the smoke step without a GPU, to check this script.
# GPU_RUN_TEST_FILTER replaces step 2's gtest filter (to rerun what failed);
# GPU_RUN_BENCH_FILTER (bench_cuda_train_step's --benchmark_filter), GPU_RUN_BENCH_MODELS (default
# "mlp cnn gpt") and GPU_RUN_KERNEL_CONFIGS (kernel_times.py's --configs) narrow steps 3 and 4 when
# little device time is left; GPU_RUN_STEPS (default "tests smoke bench kernels zoo") picks steps;
# GPU_RUN_ZOO_MODELS (default: every prepared model, torchvision's first) the zoo models run, in
# that order; GPU_RUN_ZOO_BENCH_MODELS (default "resnet50 mobilenet_v2") the ones benchmarked (each
# costs its start-up three times: about a minute for mobilenet_v2 on an H200); GPU_RUN_KERNEL_ZOO
# (e.g. "zoo/resnet50:fp32,zoo/resnet50:fp16", default none) profiles zoo models' steps under ncu;
# ZOO_DEVICE=cpu runs step 5's gpu_zoo.py on the CPU, to check this script. GPU_RUN_STEPS=scale
# runs step 6 alone (ResNet-50 at 224 against PyTorch, tests/bench/bench_scale.py, scale_table.md;
# GPU_RUN_BUDGET=420 fits it to one lease with machine start); SCALE_DEVICE=cpu checks it here.
# GPU_RUN_STEPS=gpt2 runs step 7 alone (GPT-2-small at T = 1024 against PyTorch, issue 29,
# tests/bench/bench_gpt2.py, gpt2_table.md; GPU_RUN_BUDGET=420); GPT2_DEVICE=cpu checks it here.
set -uo pipefail
START=$(date +%s)
cd "$(dirname "$0")/.."
ROOT=$PWD
KIT=${1:-.gpu-kit}
case $KIT in /*) ;; *) KIT=$ROOT/$KIT ;; esac
OUT=${OUT:-/tmp/gpu-out}
PYTHON=${PYTHON:-python3}  # the Python with torch (and numpy)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TLOG=$OUT/gpu_tests.log
BLOG=$OUT/gpu_bench.log
: >"$TLOG"
: >"$BLOG"
DEADLINE=$(( START + ${GPU_RUN_BUDGET:-540} ))
RESULTS=()
FAILED=0

say() { echo "$*" | tee -a "$TLOG"; }
die() { say "gpu_run: FAIL: $*"; printf 'setup failed: %s\n' "$*" >"$OUT/summary.txt"; exit 2; }

# --- 1. the kit and the CUDA libraries -------------------------------------------------------
[ -f "$KIT/kit.tar.xz" ] || die "$KIT/kit.tar.xz not found: run 'bash .ci/gpu_kit.sh' on the development machine and carry ${KIT#"$ROOT"/}"
WORK=$(mktemp -d /tmp/gpu-run.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# tar needs xz for this; Python's lzma does without.
if ! { command -v xz >/dev/null 2>&1 && tar -xJf "$KIT/kit.tar.xz" -C "$WORK"; }; then
  "$PYTHON" -c 'import sys, tarfile
t = tarfile.open(sys.argv[1])
t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' "$KIT/kit.tar.xz" "$WORK" ||
    die "cannot unpack $KIT/kit.tar.xz"
fi
K=$WORK/kit
say "== kit: $K ($(du -sh "$K" | cut -f1)), unpacked in $(( $(date +%s) - START )) s"
sed 's/^/   /' "$K/MANIFEST" | tee -a "$TLOG"
say "== machine: $(uname -srm); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"); $(ldd --version 2>&1 | head -1); $(nproc) cores"
say "   python: $(command -v "$PYTHON") ($("$PYTHON" --version 2>&1))"
"$PYTHON" -c 'import numpy' 2>/dev/null ||
  say "   WARNING: $PYTHON has no numpy: the tests' references and the smoke checks need it (set PYTHON=...)"
if [ -f "$K/SOURCES.sha256" ]; then
  if differ=$(cd "$ROOT" && sha256sum --quiet -c "$K/SOURCES.sha256" 2>&1); then
    say "   sources: the compiled sources here are the ones the kit was built from"
  else
    say "   WARNING: compiled sources here differ from the kit's (built from another tree: rebuild the kit?):"
    echo "$differ" | head -20 | sed 's/^/     /' | tee -a "$TLOG"
  fi
fi

# Candidate folders, in order of preference: the CUDA toolkit, Python's nvidia-* wheels (torch's
# CUDA 13 libraries, nvidia-cudnn-cu13), then whatever ldconfig knows.
candidates() {
  local d
  for d in ${CUDA_HOME:+"$CUDA_HOME"/lib64 "$CUDA_HOME"/lib} /usr/local/cuda/lib64 /usr/local/cuda/lib \
           /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/lib \
           /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/local/cuda*/lib64 /usr/local/cuda*/lib \
           /usr/local/cuda*/targets/x86_64-linux/lib; do
    [ -d "$d" ] && echo "$d"
  done
  local py
  for py in "$PYTHON" python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" - <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = []
try:
    import nvidia
    roots += list(nvidia.__path__)
except Exception:
    pass
places = list(sys.path)
try:
    places += site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    pass
for sp in places:
    if os.path.isdir(os.path.join(sp, "nvidia")):
        roots.append(os.path.join(sp, "nvidia"))
    if os.path.isdir(os.path.join(sp, "torch", "lib")):
        roots.append(os.path.join(sp, "torch"))
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "lib")) + glob.glob(os.path.join(r, "*", "lib")) + glob.glob(os.path.join(r, "*", "lib64"))):
        print(d)
EOF
  done
  ldconfig -p 2>/dev/null | awk '/(libcudart|libcublasLt|libnvrtc|libcudnn|libnccl)[^ ]*\.so/ && /x86-64/ {print $NF}' | xargs -r -n1 dirname
}
mapfile -t CANDS < <(candidates | while read -r d; do [ -d "$d" ] && realpath "$d"; done | awk '!seen[$0]++')
say "== CUDA library search path (in order):"
printf '   %s\n' "${CANDS[@]}" | tee -a "$TLOG"

declare -A FOUND=()
CUDA_DIRS=()
find_lib() {  # find_lib SONAME: the first candidate folder that has it
  local d
  for d in "${CANDS[@]}"; do
    if [ -e "$d/$1" ]; then
      FOUND[$1]=$d/$1
      [[ " ${CUDA_DIRS[*]} " == *" $d "* ]] || CUDA_DIRS+=("$d")
      return 0
    fi
  done
  return 1
}
# What the executables link (read from them), then what cuDNN and NVRTC load at run time.
mapfile -t NEEDED <"$K/CUDA_NEEDED"
MISSING=()
for lib in "${NEEDED[@]}"; do find_lib "$lib" || MISSING+=("$lib"); done
if [ -n "${FOUND[libcudnn.so.9]:-}" ]; then
  cudnn_dir=$(dirname "${FOUND[libcudnn.so.9]}")
  for part in graph ops cnn heuristic engines_precompiled engines_runtime_compiled; do
    [ -e "$cudnn_dir/libcudnn_$part.so.9" ] || MISSING+=("libcudnn_$part.so.9 (next to $cudnn_dir/libcudnn.so.9)")
  done
fi
if [ -n "${FOUND[libnvrtc.so.13]:-}" ]; then
  nvrtc_dir=$(dirname "${FOUND[libnvrtc.so.13]}")
  compgen -G "$nvrtc_dir/libnvrtc-builtins.so.13*" >/dev/null || MISSING+=("libnvrtc-builtins.so.13.* (next to $nvrtc_dir/libnvrtc.so.13)")
fi
find_lib libcublas.so.13 || true  # cuDNN may load it; not required
for lib in "${!FOUND[@]}"; do printf '   %-24s %s\n' "$lib" "$(readlink -f "${FOUND[$lib]}")"; done | sort | tee -a "$TLOG"
{ command -v nvcc >/dev/null 2>&1 && echo "   nvcc: $(nvcc --version | grep -o 'release [0-9.]*')"
  "$PYTHON" -c 'import importlib.metadata as m
print("   pip:", " ".join(sorted(n + "==" + d.version for d in m.distributions() for n in [d.metadata["Name"] or ""]
                                 if n.lower().startswith(("nvidia-", "torch")))))' 2>/dev/null; } | tee -a "$TLOG"
[ ${#MISSING[@]} -eq 0 ] || die "CUDA libraries not found: ${MISSING[*]} (searched the folders above)"

ORIG_LD=${LD_LIBRARY_PATH:-}
join() { local IFS=:; echo "$*"; }
LDP=$(join "$K/lib" "${CUDA_DIRS[@]}" ${ORIG_LD:+"$ORIG_LD"})
unresolved() { for b in "$K"/bin/* "${FOUND[@]}"; do env LD_LIBRARY_PATH="$1" ldd "$b" 2>&1 | grep -E 'not found|version .* not' | sed "s|^|$(basename "$b"): |"; done | sort -u; }
bad=$(unresolved "$LDP")
if [ -n "$bad" ] && grep -qE 'libstdc\+\+|libgcc_s|libz\.so|GLIBCXX|CXXABI|GCC_' <<<"$bad"; then
  say "   this machine's libstdc++/libgcc_s/libz do not fit; using the kit's (lib-fallback):"
  echo "$bad" | sed 's/^/     /' | tee -a "$TLOG"
  LDP=$(join "$K/lib" "$K/lib-fallback" "${CUDA_DIRS[@]}" ${ORIG_LD:+"$ORIG_LD"})
  bad=$(unresolved "$LDP")
fi
if [ -n "$bad" ]; then
  say "   unresolved with LD_LIBRARY_PATH=$LDP:"
  echo "$bad" | sed 's/^/     /' | tee -a "$TLOG"
  grep -q 'GLIBC_' <<<"$bad" && say "   (this machine's C library is older than the kit needs: see 'needs' in the MANIFEST above)"
  die "libraries do not resolve (see above)"
fi
say "   every library resolves (LD_LIBRARY_PATH=$LDP)"

# The versions the executables will load, against the kit's build (BUILD_VERSIONS, from the headers).
[ -f "$K/BUILD_VERSIONS" ] || die "$K has no BUILD_VERSIONS: rebuild the kit with this tree's .ci/gpu_kit.sh"
say "== CUDA library versions (as the executables load them; built with)"
VERSIONS=$(env LD_LIBRARY_PATH="$LDP" "$PYTHON" "$ROOT/.ci/cuda_versions.py" "$K/BUILD_VERSIONS" 2>&1)
versions_rc=$?
echo "$VERSIONS" | tee -a "$TLOG"
if [ "$versions_rc" -ne 0 ]; then
  older=$(grep '^FAIL: ' <<<"$VERSIONS" | sed 's/^FAIL: //' | paste -sd';' -)
  die "${older:-cannot read the versions of the CUDA libraries (see above)}"
fi

# The kit's executables see LD_LIBRARY_PATH=$LDP; Python keeps the machine's own environment, and
# reaches bench_cuda_train_step through a wrapper that sets it.
mkdir -p "$WORK/wrap"
cat >"$WORK/wrap/bench_cuda_train_step" <<EOF
#!/bin/sh
LD_LIBRARY_PATH='$LDP' exec '$K/bin/bench_cuda_train_step' "\$@"
EOF
chmod +x "$WORK/wrap/bench_cuda_train_step"
for b in amp-run amp-train; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "'$LDP'" "'$K/bin/$b'" >"$WORK/wrap/$b"
  chmod +x "$WORK/wrap/$b"
done
STEPS=" ${GPU_RUN_STEPS:-tests smoke bench kernels zoo} "
want() { [[ $STEPS == *" $1 "* ]]; }
export AMP_SOURCE_DIR=$ROOT            # models/, test data (tests/support/test_support.cc)
export AMP_BINARY_DIR=$K/bin           # amp-run, amp-train, ... and test-tmp/
export AMP_PYTHON=${AMP_PYTHON:-$(command -v "$PYTHON" || echo /usr/bin/python3)}  # numpy for the test references
export GPU_RUN_ORIG_LD=$ORIG_LD

say "== nvidia-smi"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >>"$TLOG" 2>&1; then
  HAVE_GPU=1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1 | tee -a "$TLOG"
elif [ -e /dev/nvidia0 ]; then
  HAVE_GPU=1
  say "   no usable nvidia-smi, but /dev/nvidia0 is here: a GPU is expected"
else
  HAVE_GPU=0
  say "   no usable nvidia-smi: no GPU here, the GPU tests are expected to skip"
fi
"$PYTHON" -c 'import torch; print("   torch", torch.__version__, "CUDA", torch.version.cuda, "available:", torch.cuda.is_available())' 2>&1 | tail -1 | tee -a "$TLOG"

# --- steps ------------------------------------------------------------------------------------
# step NAME MAX_SECONDS LOG CMD...: runs CMD with LD_LIBRARY_PATH=$LDP (unless NAME starts with
# "py:"), at most MAX_SECONDS and never past the deadline; records the outcome.
step() {
  local name=$1 max=$2 log=$3; shift 3
  local now left t rc s
  now=$(date +%s); left=$(( DEADLINE - now )); t=$(( max < left ? max : left ))
  if [ "$t" -lt 10 ]; then
    echo "== $name: NOT RUN, the time budget is spent" | tee -a "$log"
    RESULTS+=("$name: NOT RUN (time budget spent)"); FAILED=1; return 1
  fi
  echo "== $name (timeout ${t}s): $*" | tee -a "$log"
  s=$(date +%s)
  if [[ $name == py:* ]]; then
    timeout -k 10 "$t" "$@" 2>&1 | tee -a "$log"
  else
    timeout -k 10 "$t" env LD_LIBRARY_PATH="$LDP" "$@" 2>&1 | tee -a "$log"
  fi
  rc=${PIPESTATUS[0]}
  local took=$(( $(date +%s) - s ))
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "== $name: TIMED OUT after ${t}s" | tee -a "$log"
    RESULTS+=("$name: TIMED OUT after ${t}s"); FAILED=1
  elif [ "$rc" -ne 0 ]; then
    echo "== $name: FAILED (exit $rc, ${took}s)" | tee -a "$log"
    RESULTS+=("$name: FAILED (exit $rc, ${took}s)"); FAILED=1
  else
    echo "== $name: ok (${took}s)" | tee -a "$log"
    RESULTS+=("$name: ok (${took}s)")
  fi
  return "$rc"
}
# gtest's counts for the summary, and a failure when a GPU is here but the GPU tests skipped.
gtest_counts() {  # gtest_counts NAME XML
  local xml=$2
  [ -f "$xml" ] || return 0
  local tests fail skip
  tests=$(grep -o '<testsuites [^>]*' "$xml" | grep -o ' tests="[0-9]*"' | grep -o '[0-9]*')
  fail=$(grep -o '<testsuites [^>]*' "$xml" | grep -o ' failures="[0-9]*"' | grep -o '[0-9]*')
  skip=$(grep -c '<skipped' "$xml")
  RESULTS+=("  $1: ${tests:-?} tests, ${fail:-?} failed, $skip skipped")
  if [ "$HAVE_GPU" = 1 ] && grep -q 'no usable CUDA device' "$xml"; then
    RESULTS+=("  $1: a GPU is here but tests skipped with 'no usable CUDA device'"); FAILED=1
  fi
}

# --- 2. tests ---------------------------------------------------------------------------------
if want tests; then
step "gtest test_backends (CUDA)" 200 "$TLOG" "$K/bin/test_backends" --gtest_filter="${GPU_RUN_TEST_FILTER:-Cuda*:Nvrtc*:*Gpu*:MakeBackend.*-CudaCodegenHost.*}" \
  --gtest_output="xml:$OUT/gtest_backends_cuda.xml"
gtest_counts "test_backends" "$OUT/gtest_backends_cuda.xml"
step "gtest test_frontends (amp-run)" 60 "$TLOG" "$K/bin/test_frontends" --gtest_filter='AmpRun.*' \
  --gtest_output="xml:$OUT/gtest_frontends_amprun.xml"
gtest_counts "test_frontends" "$OUT/gtest_frontends_amprun.xml"
fi

# Smoke: the commands themselves with --device cuda.
cat >"$WORK/smoke.sh" <<'EOF'
set -u
B=$AMP_BINARY_DIR; M=$AMP_SOURCE_DIR/models; W=$1; D=$2; R=$3; PY=$AMP_PYTHON
mkdir -p "$W" "$R"; rc=0
run() { echo "\$ ${*#$B/}"; "$@" >"$W/last.log" 2>&1 || { echo "  exit $?:"; tail -20 "$W/last.log"; rc=1; }; }
# Every step on the device writes its device report (AMP_CUDA_REPORT) to $R/STEP.jsonl.
for m in mlp cnn gpt; do
  AMP_CUDA_REPORT=$R/amp-run.$m.fp32.jsonl run "$B/amp-run" "$M/$m.onnx" --inputs "$M/$m.sample.npz" --outputs "$W/$m.$D.npz" --device $D
  run "$B/amp-rewrite" "$M/$m.onnx" -o "$W/$m.fp16.onnx" --dtype fp16
  run "$B/amp-run" "$W/$m.fp16.onnx" --inputs "$M/$m.sample.npz" --outputs "$W/$m.fp16.cpu.npz" --device cpu
  AMP_CUDA_REPORT=$R/amp-run.$m.fp16.jsonl run "$B/amp-run" "$W/$m.fp16.onnx" --inputs "$M/$m.sample.npz" --outputs "$W/$m.fp16.$D.npz" --device $D
done
LD_LIBRARY_PATH=$GPU_RUN_ORIG_LD "$PY" - "$W" <<'PYEOF' || rc=1
import numpy as np, os, sys
w = sys.argv[1]
np.random.seed(0)
np.savez(os.path.join(w, "img.npz"), input=np.random.rand(256, 1, 28, 28).astype(np.float32),
         labels=np.random.randint(0, 10, 256).astype(np.int64))
np.savez(os.path.join(w, "tok.npz"), tokens=np.random.randint(0, 64, (64, 32)).astype(np.int64),
         labels=np.random.randint(0, 64, (64, 32)).astype(np.int64))
PYEOF
for dt in fp32 fp16 bf16; do
  for dev in cpu $D; do
    AMP_CUDA_REPORT=$R/amp-train.mlp.$dt.jsonl run "$B/amp-train" "$M/mlp.train.onnx" --data "$W/img.npz" \
      --loss cross_entropy --steps 16 --batch-size 32 --optimizer adamw --lr 0.001 --no-shuffle --seed 0 --dtype $dt \
      --device $dev --metrics "$W/mlp.$dt.$dev.jsonl"
  done
done
for dt in fp16 bf16; do
  AMP_CUDA_REPORT=$R/amp-train.cnn.$dt.jsonl run "$B/amp-train" "$M/cnn.train.onnx" --data "$W/img.npz" \
    --loss cross_entropy --steps 16 --batch-size 32 --optimizer adamw --lr 0.001 --seed 0 --dtype $dt --device $D \
    --metrics "$W/cnn.$dt.$D.jsonl"
  AMP_CUDA_REPORT=$R/amp-train.gpt.$dt.jsonl run "$B/amp-train" "$M/gpt.train.onnx" --data "$W/tok.npz" \
    --loss cross_entropy --steps 16 --batch-size 16 --optimizer adamw --lr 0.001 --seed 0 --dtype $dt --device $D \
    --metrics "$W/gpt.$dt.$D.jsonl"
done
LD_LIBRARY_PATH=$GPU_RUN_ORIG_LD "$PY" - "$W" "$M" "$D" <<'PYEOF' || rc=1
import json, os, sys
import numpy as np
w, m, d = sys.argv[1], sys.argv[2], sys.argv[3]
bad = []
def check(what, got, want, tol):
    scale = max(float(np.max(np.abs(want))), 1e-12)
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale
    ok = got.shape == want.shape and np.all(np.isfinite(got)) and err <= tol
    print(f"  {'ok  ' if ok else 'FAIL'} {what}: max |diff| / max |ref| = {err:.3g} (tolerance {tol:g})")
    if not ok: bad.append(what)
def load(path, key):
    if not os.path.exists(path):
        print(f"  FAIL {os.path.basename(path)} was not written"); bad.append(path); return None
    return np.load(path)[key]
for name in ("mlp", "cnn", "gpt"):
    ref = np.load(os.path.join(m, name + ".sample.npz"))["logits"]
    got = load(os.path.join(w, f"{name}.{d}.npz"), "logits")
    if got is not None: check(f"amp-run {name} fp32 {d} vs PyTorch", got, ref, 1e-4)
    cpu = load(os.path.join(w, name + ".fp16.cpu.npz"), "logits")
    cuda = load(os.path.join(w, f"{name}.fp16.{d}.npz"), "logits")
    if cpu is not None and cuda is not None: check(f"amp-run {name} fp16 rewrite {d} vs cpu", cuda, cpu, 2e-2)
def losses(path):
    if not os.path.exists(path):
        print(f"  FAIL {os.path.basename(path)} was not written"); bad.append(path); return None
    return np.array([r["loss"] for r in map(json.loads, open(path)) if "loss" in r], dtype=np.float64)
for dt, tol in (("fp32", 1e-4), ("fp16", 2e-2), ("bf16", 5e-2)):
    cpu, cuda = losses(f"{w}/mlp.{dt}.cpu.jsonl"), losses(f"{w}/mlp.{dt}.{d}.jsonl")
    if cpu is None or cuda is None: continue
    print(f"  amp-train mlp {dt} losses cpu : {np.array2string(cpu[[0, len(cpu) // 2, -1]], precision=5)}")
    print(f"  amp-train mlp {dt} losses {d:4}: {np.array2string(cuda[[0, len(cuda) // 2, -1]], precision=5)}")
    check(f"amp-train mlp {dt} 16 steps, {d} vs cpu losses", cuda, cpu, tol)
for run in (f"cnn.fp16.{d}", f"cnn.bf16.{d}", f"gpt.fp16.{d}", f"gpt.bf16.{d}"):
    l = losses(f"{w}/{run}.jsonl")
    if l is None: continue
    ok = len(l) == 16 and np.all(np.isfinite(l))
    print(f"  {'ok  ' if ok else 'FAIL'} amp-train {run}: {len(l)} steps, loss {l[0]:.4f} -> {l[-1]:.4f}")
    if not ok: bad.append(run)
sys.exit(1 if bad else 0)
PYEOF
exit $rc
EOF
# SMOKE_DEVICE=cpu runs the smoke steps without a GPU (to check this script).
if ! want smoke; then
  :
elif [ "$HAVE_GPU" = 1 ] || [ -n "${SMOKE_DEVICE:-}" ]; then
  step "smoke amp-run/amp-train --device ${SMOKE_DEVICE:-cuda}" 150 "$TLOG" bash "$WORK/smoke.sh" "$WORK/smoke" \
    "${SMOKE_DEVICE:-cuda}" "$OUT/device_report"
else
  say "== smoke amp-run/amp-train --device cuda: skipped, no GPU"
  RESULTS+=("smoke amp-run/amp-train --device cuda: skipped (no GPU)")
fi

# --- 3. benchmarks ----------------------------------------------------------------------------
if want bench; then
step "bench_cuda_train_step" 120 "$BLOG" "$K/bin/bench_cuda_train_step" \
  --benchmark_out="$OUT/bench_cuda_train_step.json" --benchmark_out_format=json \
  ${GPU_RUN_BENCH_FILTER:+--benchmark_filter="$GPU_RUN_BENCH_FILTER"}
[ "$HAVE_GPU" = 1 ] && grep -q '"error_occurred": true' "$OUT/bench_cuda_train_step.json" 2>/dev/null &&
  { RESULTS+=("  bench_cuda_train_step: some benchmarks reported an error (see gpu_bench.log)"); FAILED=1; }
step "py:bench_gpu_train.py" 420 "$BLOG" "$PYTHON" \
  "$ROOT/tests/bench/bench_gpu_train.py" --bench-bin "$WORK/wrap/bench_cuda_train_step" --json "$OUT/bench_gpu_train.json" \
  --models ${GPU_RUN_BENCH_MODELS:-mlp cnn gpt}
fi

# --- 4. where a step's GPU time goes: ncu's kernel times (.ci/kernel_times.py) ------------------
if want kernels && [ "$HAVE_GPU" = 1 ] && [ -f "$WORK/smoke/img.npz" ]; then
  step "py:kernel_times.py (ncu)" 150 "$BLOG" "$PYTHON" "$ROOT/.ci/kernel_times.py" --bin "$K/bin" \
    --models "$ROOT/models" --data "$WORK/smoke" --ld-library-path "$LDP" --out "$OUT/kernel_times.txt" \
    ${GPU_RUN_KERNEL_CONFIGS:+--configs "$GPU_RUN_KERNEL_CONFIGS"}
fi

# --- 5. the model zoo on the device (tests/zoo/gpu_zoo.py) --------------------------------------
ZOO=${GPU_RUN_ZOO:-$ROOT/.gpu-zoo}
if want zoo && compgen -G "$ZOO/*/model.onnx" >/dev/null; then
  # A copy to work in: the run draws the large models' weights beside their graphs.
  cp -r "$ZOO" "$WORK/zoo" && ZOO=$WORK/zoo
  if [ "$HAVE_GPU" = 1 ] || [ -n "${ZOO_DEVICE:-}" ]; then
    now=$(date +%s)
    step "py:gpu_zoo.py run" 300 "$TLOG" "$PYTHON" "$ROOT/tests/zoo/gpu_zoo.py" run --bin "$WORK/wrap" --zoo "$ZOO" \
      --out "$OUT" --device "${ZOO_DEVICE:-cuda}" --budget $(( (DEADLINE - now) * 3 / 5 )) \
      ${GPU_RUN_ZOO_MODELS:+--models $GPU_RUN_ZOO_MODELS}
  else
    RESULTS+=("py:gpu_zoo.py run: skipped (no GPU)")
  fi
  if [ "$HAVE_GPU" = 1 ]; then
    step "py:bench_gpu_train.py --zoo" 300 "$BLOG" "$PYTHON" "$ROOT/tests/bench/bench_gpu_train.py" \
      --bench-bin "$WORK/wrap/bench_cuda_train_step" --json "$OUT/bench_gpu_zoo.json" --models --zoo "$ZOO" \
      --zoo-models ${GPU_RUN_ZOO_BENCH_MODELS:-resnet50 mobilenet_v2}
  fi
  # Where a zoo model's step goes, kernel by kernel (off unless asked: about a minute a configuration).
  if [ "$HAVE_GPU" = 1 ] && [ -n "${GPU_RUN_KERNEL_ZOO:-}" ]; then
    step "py:kernel_times.py (ncu, zoo)" 240 "$BLOG" "$PYTHON" "$ROOT/.ci/kernel_times.py" --bin "$K/bin" \
      --models "$ROOT/models" --data "$WORK/smoke" --zoo "$ZOO" --ld-library-path "$LDP" \
      --out "$OUT/kernel_times_zoo.txt" --configs "$GPU_RUN_KERNEL_ZOO"
  fi
elif want zoo; then
  say "== zoo: no models in $ZOO (tests/zoo/gpu_zoo.py prepare makes them), skipped"
fi

# --- 6. scale: ResNet-50 at ImageNet size against PyTorch (tests/bench/bench_scale.py) -----------
# Asked for by name (GPU_RUN_STEPS=scale): about 7 minutes. GPU_RUN_SCALE (default .gpu-scale, made
# here by `bench_scale.py prepare` and carried) holds the exports; SCALE_DEVICE=cpu runs it without
# a GPU, to check this script.
SCALE=${GPU_RUN_SCALE:-$ROOT/.gpu-scale}
if want scale && compgen -G "$SCALE/*/model.onnx" >/dev/null; then
  cp -r "$SCALE" "$WORK/scale"  # the weights are drawn beside the graphs
  if [ "$HAVE_GPU" = 1 ] || [ -n "${SCALE_DEVICE:-}" ]; then
    now=$(date +%s)
    step "py:bench_scale.py run" 600 "$BLOG" "$PYTHON" "$ROOT/tests/bench/bench_scale.py" run --bin "$WORK/wrap" \
      --scale "$WORK/scale" --out "$OUT" --device "${SCALE_DEVICE:-cuda}" --budget $(( DEADLINE - now - 30 )) \
      ${GPU_RUN_SCALE_ARGS:-}
  else
    RESULTS+=("py:bench_scale.py run: skipped (no GPU)")
  fi
elif want scale; then
  say "== scale: no models in $SCALE (tests/bench/bench_scale.py prepare makes them), skipped"
fi

# --- 7. gpt2: GPT-2-small at T = 1024 against PyTorch (tests/bench/bench_gpt2.py, issue 29) --------
# Asked for by name (GPU_RUN_STEPS=gpt2; GPU_RUN_BUDGET=420 fits it to one lease with machine
# start). GPU_RUN_GPT2 (default .gpu-gpt2, made here by `bench_gpt2.py prepare` and carried) holds
# the export; GPT2_DEVICE=cpu runs it without a GPU, to check this script.
GPT2=${GPU_RUN_GPT2:-$ROOT/.gpu-gpt2}
if want gpt2 && [ -f "$GPT2/model.onnx" ]; then
  cp -r "$GPT2" "$WORK/gpt2"  # the weights are drawn beside the graph
  if [ "$HAVE_GPU" = 1 ] || [ -n "${GPT2_DEVICE:-}" ]; then
    now=$(date +%s)
    step "py:bench_gpt2.py run" 600 "$BLOG" "$PYTHON" "$ROOT/tests/bench/bench_gpt2.py" run --bin "$WORK/wrap" \
      --gpt2 "$WORK/gpt2" --out "$OUT" --device "${GPT2_DEVICE:-cuda}" --budget $(( DEADLINE - now - 30 )) \
      ${GPU_RUN_GPT2_ARGS:-}
  else
    RESULTS+=("py:bench_gpt2.py run: skipped (no GPU)")
  fi
elif want gpt2; then
  say "== gpt2: no model in $GPT2 (tests/bench/bench_gpt2.py prepare makes it), skipped"
fi

# --- summary ----------------------------------------------------------------------------------
{
  echo "== summary ($(( $(date +%s) - START )) s; logs in $OUT)"
  printf '   %s\n' "${RESULTS[@]}"
  if [ "$FAILED" = 0 ]; then echo "   ALL OK"; else echo "   SOMETHING FAILED (see above)"; fi
  echo "== CUDA library versions (as the executables load them; built with)"
  echo "$VERSIONS"
  echo "== device capabilities, per smoke step (device_report/*.jsonl)"
  "$PYTHON" "$ROOT/.ci/device_report.py" "$OUT/device_report" 2>&1 | sed 's/^/   /'
} | tee "$OUT/summary.txt" | tee -a "$TLOG" | tee -a "$BLOG"
# The device tool brings back 8 files: the logs, the summary and the zoo's parts stay as they are,
# the rest goes into more.tar.xz.
( cd "$OUT" && rest=$(ls -A | grep -vE '^(summary\.txt|gpu_tests\.log|gpu_bench\.log|gpu_zoo_[0-9]+\.tar|scale_table\.md|gpt2_table\.md|more\.tar\.xz)$') &&
  if [ -n "$rest" ]; then tar -cJf more.tar.xz $rest && rm -rf $rest; fi )
exit "$FAILED"
