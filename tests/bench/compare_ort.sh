#!/bin/sh
# CPU forward time and peak memory of the demo models: this project's CPU backend
# (bench_cpu_forward) against ONNX Runtime (onnxruntime-node, CPU) on the same models, shapes and
# thread count. Peak memory is each process's maximum resident set (/usr/bin/time), so it includes
# the runtime itself (node + ONNX Runtime, or the benchmark binary), not just tensors.
#
#   tests/bench/compare_ort.sh [BUILD_DIR (build-cpu)] [THREADS (all cores)]
#
# Needs: the bench_cpu_forward target built; cd tests/ort && ONNXRUNTIME_NODE_INSTALL=skip npm install.
# Both sides wait for work as they do by default: ONNX Runtime's pool spins between ops, OpenMP's
# threads spin a while and then sleep. (OMP_WAIT_POLICY=passive in the environment, passed on,
# makes every one of our parallel regions wake its threads through the kernel: the cnn's forward
# at 2 threads took 2.5 ms so, 1.45 ms without.)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-cpu}
THREADS=${2:-$(nproc)}
BENCH=$BUILD/tests/bench_cpu_forward
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

json_field() {  # FILE FIELD: the first numeric value of "FIELD" in a JSON file
  node -e "const t=require('fs').readFileSync(process.argv[1],'utf8');const m=t.match(new RegExp('\"'+process.argv[2]+'\"\\\\s*:\\\\s*([0-9.e+-]+)'));console.log(m?m[1]:'nan')" "$1" "$2"
}

printf '%-5s %-18s %10s %10s %8s %12s %12s\n' model shape amp_ms ort_ms amp/ort amp_rss_MiB ort_rss_MiB
for spec in "mlp input float32 256,1,28,28" "cnn input float32 64,1,28,28" "gpt tokens int64 16,32"; do
  set -- $spec
  AMP_SOURCE_DIR=$ROOT AMP_THREADS=$THREADS /usr/bin/time -f %M -o "$TMP/amp.rss" \
    "$BENCH" --benchmark_filter="BM_Forward/$1_fp32/" --benchmark_format=json --benchmark_min_time=1 >"$TMP/amp.json" 2>/dev/null
  /usr/bin/time -f %M -o "$TMP/ort.rss" node "$ROOT/tests/bench/ort_forward.js" "$ROOT/models/$1.onnx" "$2" "$3" "$4" \
    "$THREADS" >"$TMP/ort.json"
  amp_ms=$(json_field "$TMP/amp.json" real_time)
  ort_ms=$(json_field "$TMP/ort.json" ms)
  awk -v m="$1" -v s="$4" -v a="$amp_ms" -v o="$ort_ms" -v ar="$(cat "$TMP/amp.rss")" -v orr="$(cat "$TMP/ort.rss")" \
    'BEGIN { printf "%-5s %-18s %10.3f %10.3f %8.2f %12.1f %12.1f\n", m, "[" s "]", a, o, a / o, ar / 1024, orr / 1024 }'
done
echo "threads: $THREADS; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
