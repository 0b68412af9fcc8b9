#!/usr/bin/env bash
# onnx-amp set-up, build, demo and tests. On a fresh Debian 12 machine (as root, with a C++
# toolchain and optionally the CUDA toolkit at /usr/local/cuda):
#   bash setup.sh demo    install what is needed, build, run the demo
#   bash setup.sh test    install what is needed, build, run every test (what .ci/run does)
# Other verbs: deps (install only), build, bench.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
BUILD=${AMP_BUILD_DIR:-$ROOT/build}
JOBS=${AMP_JOBS:-$(nproc)}

DEBS=(
  build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev libfuzzer-14-dev
  libonnx-dev libonnx-testdata python3-onnx python3-torch python3-torchvision python3-numpy
  libprotobuf-dev protobuf-compiler libspdlog-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libdnnl-dev libzip-dev zlib1g-dev graphviz
  dataset-fashion-mnist openmpi-bin libopenmpi-dev
  librsvg2-bin fonts-dejavu-core tesseract-ocr libpng-dev tmux
  libgraphviz-dev chromium pybind11-dev python3-dev python3-pytest
)

deps() {
  local missing=()
  for p in "${DEBS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
  # ONNX Runtime (CPU) for the reference runs; skip its post-install, which fetches CUDA providers.
  if [ ! -d tests/ort/node_modules/onnxruntime-node ] && [ -f tests/ort/package.json ]; then
    (cd tests/ort && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --loglevel=error)
  fi
  # playwright-core drives Debian's Chromium for the --html page tests; it downloads no browser.
  if [ ! -d tests/browser/node_modules/playwright-core ] && [ -f tests/browser/package.json ]; then
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

build() {
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  ninja -C "$BUILD" -j"$JOBS"
  install_python
}

# `import onnx_amp` for Debian's /usr/bin/python3: a .pth file in its site-packages
# (/usr/local/lib/python3.11/dist-packages, AMP_PYTHON_SITE overrides) naming $BUILD/python, where
# the build assembles the package (the extension module beside the .py files). A rebuild is then
# what python3 imports, with nothing to copy, and the extension finds the CUDA backend's module
# in the build folder it was built in.
install_python() {
  local site=${AMP_PYTHON_SITE:-$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')}
  local sudo=""; [ -w "$(dirname "$site")" ] || [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo mkdir -p "$site"
  echo "$BUILD/python" | $sudo tee "$site/onnx_amp.pth" >/dev/null
  /usr/bin/python3 -c "import site; site.addsitedir('$site'); import onnx_amp" ||
    { echo "setup: python3 cannot import onnx_amp from $BUILD/python" >&2; return 1; }
}

run_tests() {
  ctest --test-dir "$BUILD" -j"$JOBS" --output-on-failure --no-tests=error --timeout 1500
  # The graph and import tests (bad input, fuzz regressions included) again under ASan + UBSan.
  local asan=$ROOT/build-asan
  cmake -S . -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAMP_SANITIZE=ON -DAMP_ENABLE_CUDA=OFF \
    -DAMP_BUILD_BENCH=OFF >/dev/null
  ninja -C "$asan" -j"$JOBS" test_graph
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$asan" -L graph -j"$JOBS" --output-on-failure --no-tests=error --timeout 1500
}

demo() {
  bash "$ROOT/models/demo.sh" "$BUILD"
}

case "${1:-}" in
  deps) deps ;;
  build) deps; build ;;
  test) deps; build; run_tests ;;
  demo) deps; build; demo ;;
  bench) deps; build; "$BUILD/tests/bench_rewrite" ;;
  *) echo "usage: bash setup.sh demo|test|deps|build|bench" >&2; exit 2 ;;
esac
