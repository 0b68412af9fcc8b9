#!/usr/bin/env node
// ONNX Runtime's side of compare_ort.sh: times one model's forward on CPU the way
// bench_cpu_forward does (one warm-up run, then runs for at least a second), same shapes.
//
//   node tests/bench/ort_forward.js MODEL INPUT_NAME float32|int64 DIMS(comma-separated) THREADS
//
// Prints one JSON line: {"model": ..., "ms": mean milliseconds per run, "runs": n}.
'use strict';

const path = require('path');
const ort = require(path.join(__dirname, '..', 'ort', 'node_modules', 'onnxruntime-node'));

async function main() {
  const [model, inputName, type, dimsText, threads] = process.argv.slice(2);
  const dims = dimsText.split(',').map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  let data;
  if (type === 'int64') {
    data = new BigInt64Array(count);
    for (let i = 0; i < count; ++i) data[i] = BigInt((i * 7919) % 64);
  } else {
    data = new Float32Array(count);
    for (let i = 0; i < count; ++i) data[i] = ((i * 7919) % 1000) / 1000;
  }
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionProviders: ['cpu'],
  });
  const feeds = { [inputName]: new ort.Tensor(type, data, dims) };
  await session.run(feeds);  // warm-up: allocations and kernel choices
  let runs = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < 1e9 || runs < 5) {
    await session.run(feeds);
    ++runs;
    elapsed = Number(process.hrtime.bigint() - start);
  }
  console.log(JSON.stringify({ model: path.basename(model), ms: elapsed / runs / 1e6, runs }));
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
