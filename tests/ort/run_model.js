#!/usr/bin/env node
// Runs ONNX models in ONNX Runtime (onnxruntime-node, CPU) so C++ tests can compare against an
// independent implementation. Tensors travel as ONNX TensorProto files, the format of
// libonnx-testdata's test_data_set_*/input_N.pb, because the C++ side reads and writes them with
// onnx_proto and no third format is needed.
//
// Usage:
//   node run_model.js MODEL IN_DIR OUT_DIR [MODEL IN_DIR OUT_DIR ...]
//   node run_model.js --jobs FILE      (one job per line: MODEL<TAB>IN_DIR<TAB>OUT_DIR)
//   node run_model.js --serve          (jobs as --jobs lines on stdin, one status line each as they
//                                       finish: a caller pays node's start-up once, as a Python
//                                       process pays `import onnxruntime` once; EOF ends it)
// Use --jobs for many jobs: onnxruntime-node 1.30 was seen to crash (SIGSEGV) after a few dozen
// sessions when the command line was over ~32 KB.
//
// For each triple: reads IN_DIR/input_0.pb, input_1.pb, ... (matched to the session's inputs by the
// TensorProto's name when it names one, else by position), runs MODEL, and writes OUT_DIR/output_K.pb
// for every model output in graph order (raw_data, little-endian, name set). A job that fails writes
// OUT_DIR/error.txt with ONNX Runtime's message instead; the others still run. One status line per
// job goes to stdout ("ok MODEL" or "error MODEL: message"); the exit code is 1 if any job failed.
// fp16 tensors are passed to ONNX Runtime as Uint16Array holding the raw bits.
// ORT_GRAPH_OPTIMIZATION=disabled|basic|extended|all sets the sessions' graph optimization level
// (default: ONNX Runtime's, all), to tell a refusal by one of its fusions from one by the model.
// ORT_OPTIMIZED_MODEL=PATH saves the graph the session runs (after its optimizations and the Casts
// its CPU provider inserts around float16 nodes it has no float16 kernel for) to PATH.
// Setup (once): cd tests/ort && ONNXRUNTIME_NODE_INSTALL=skip npm install
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

ort.env.logLevel = 'error';  // opset and optimizer warnings would drown the status lines

// TensorProto.DataType -> ONNX Runtime type name and typed array.
const TYPES = {
  1: ['float32', Float32Array], 2: ['uint8', Uint8Array], 3: ['int8', Int8Array],
  4: ['uint16', Uint16Array], 5: ['int16', Int16Array], 6: ['int32', Int32Array],
  7: ['int64', BigInt64Array], 8: ['string', null], 9: ['bool', Uint8Array],
  10: ['float16', Uint16Array], 11: ['float64', Float64Array], 12: ['uint32', Uint32Array],
  13: ['uint64', BigUint64Array],
};
const TYPE_CODES = Object.fromEntries(Object.entries(TYPES).map(([code, [name]]) => [name, Number(code)]));

// ---- protobuf wire format, just enough for TensorProto

function readVarint(buf, pos) {
  let result = 0n, shift = 0n;
  for (;;) {
    const b = buf[pos++];
    result |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return [result, pos];
    shift += 7n;
  }
}

function parseTensorProto(buf) {
  const t = { dims: [], dataType: 0, name: '', raw: null, floats: [], ints32: [], ints64: [], doubles: [],
              uints64: [], strings: [] };
  let pos = 0;
  // A repeated numeric field arrives packed (wire type 2) or one element at a time.
  const repeated = (wire, list, readOne) => {
    if (wire !== 2) { list.push(readOne()); return; }
    let len; [len, pos] = readVarint(buf, pos);
    const end = pos + Number(len);
    while (pos < end) list.push(readOne());
  };
  const varint = () => { let v; [v, pos] = readVarint(buf, pos); return v; };
  const f32 = () => { const v = buf.readFloatLE(pos); pos += 4; return v; };
  const f64 = () => { const v = buf.readDoubleLE(pos); pos += 8; return v; };
  const bytes = () => { const len = Number(varint()); const b = buf.subarray(pos, pos + len); pos += len; return b; };
  while (pos < buf.length) {
    const key = Number(varint());
    const field = key >> 3, wire = key & 7;
    switch (field) {
      case 1: repeated(wire, t.dims, () => BigInt.asIntN(64, varint())); break;
      case 2: t.dataType = Number(varint()); break;
      case 4: repeated(wire, t.floats, f32); break;
      case 5: repeated(wire, t.ints32, () => Number(BigInt.asIntN(32, varint()))); break;
      case 6: t.strings.push(bytes().toString('utf8')); break;
      case 7: repeated(wire, t.ints64, () => BigInt.asIntN(64, varint())); break;
      case 8: t.name = bytes().toString('utf8'); break;
      case 9: t.raw = bytes(); break;
      case 10: repeated(wire, t.doubles, f64); break;
      case 11: repeated(wire, t.uints64, () => BigInt.asUintN(64, varint())); break;
      default:  // fields this runner does not need (segment, doc_string, external data)
        if (wire === 0) varint();
        else if (wire === 1) pos += 8;
        else if (wire === 2) bytes();
        else if (wire === 5) pos += 4;
        else throw new Error(`unsupported wire type ${wire} in TensorProto`);
    }
  }
  return t;
}

function toOrtTensor(t) {
  const entry = TYPES[t.dataType];
  if (!entry) throw new Error(`tensor '${t.name}': unsupported data type ${t.dataType}`);
  const [type, Arr] = entry;
  const dims = t.dims.map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  if (type === 'string') return new ort.Tensor('string', t.strings, dims);
  let data;
  if (t.raw) {
    data = new Arr(count);  // copy: raw_data need not be aligned for the typed array
    Buffer.from(data.buffer).set(t.raw.subarray(0, count * Arr.BYTES_PER_ELEMENT));
  } else if (type === 'float32') data = Float32Array.from(t.floats);
  else if (type === 'float64') data = Float64Array.from(t.doubles);
  else if (type === 'int64') data = BigInt64Array.from(t.ints64);
  else if (type === 'uint64') data = BigUint64Array.from(t.uints64);
  else if (type === 'uint32') data = Uint32Array.from(t.uints64.map(Number));
  else data = Arr.from(t.ints32);  // int32, int16, int8, uint16, uint8, bool, float16 bits
  return new ort.Tensor(type, data, dims);
}

function writeVarint(out, v) {
  let x = BigInt.asUintN(64, BigInt(v));
  do {
    let b = Number(x & 0x7fn);
    x >>= 7n;
    if (x) b |= 0x80;
    out.push(b);
  } while (x);
}

function encodeTensorProto(name, tensor) {
  const code = TYPE_CODES[tensor.type];
  if (!code) throw new Error(`output '${name}': unsupported type ${tensor.type}`);
  const out = [];
  const field = (num, wire) => writeVarint(out, (num << 3) | wire);
  const lengthDelimited = (num, bytes) => { field(num, 2); writeVarint(out, bytes.length); for (const b of bytes) out.push(b); };
  const packedDims = [];
  for (const d of tensor.dims) writeVarint(packedDims, d);
  lengthDelimited(1, packedDims);
  field(2, 0); writeVarint(out, code);
  lengthDelimited(8, Buffer.from(name, 'utf8'));
  if (tensor.type === 'string') {
    for (const s of tensor.data) lengthDelimited(6, Buffer.from(s, 'utf8'));
  } else {
    const d = tensor.data;
    lengthDelimited(9, Buffer.from(d.buffer, d.byteOffset, d.byteLength));
  }
  return Buffer.from(out);
}

async function runJob(model, inDir, outDir) {
  // One thread: jobs are small, and results then do not depend on the machine's core count.
  const options = { intraOpNumThreads: 1, interOpNumThreads: 1 };
  if (process.env.ORT_GRAPH_OPTIMIZATION) options.graphOptimizationLevel = process.env.ORT_GRAPH_OPTIMIZATION;
  if (process.env.ORT_OPTIMIZED_MODEL) options.optimizedModelFilePath = process.env.ORT_OPTIMIZED_MODEL;
  const session = await ort.InferenceSession.create(model, options);
  try {
    await runSession(session, inDir, outDir);
  } finally {
    await session.release();  // hundreds of jobs run in one process
  }
}

async function runSession(session, inDir, outDir) {
  const feeds = {};
  for (let k = 0; fs.existsSync(path.join(inDir, `input_${k}.pb`)); ++k) {
    const proto = parseTensorProto(fs.readFileSync(path.join(inDir, `input_${k}.pb`)));
    const name = session.inputNames.includes(proto.name) ? proto.name : session.inputNames[k];
    if (name === undefined) throw new Error(`input_${k}.pb has no matching model input`);
    feeds[name] = toOrtTensor(proto);
  }
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  session.outputNames.forEach((name, k) => {
    fs.writeFileSync(path.join(outDir, `output_${k}.pb`), encodeTensorProto(name, results[name]));
  });
}

async function runJobReporting(model, inDir, outDir) {
  try {
    await runJob(model, inDir, outDir);
    process.stdout.write(`ok ${model}\n`);
    return true;
  } catch (e) {
    const msg = String(e && e.message ? e.message : e).replace(/\s+/g, ' ');
    fs.mkdirSync(outDir, { recursive: true });
    fs.writeFileSync(path.join(outDir, 'error.txt'), msg + '\n');
    process.stdout.write(`error ${model}: ${msg}\n`);
    return false;
  }
}

async function serve() {
  const lines = require('readline').createInterface({ input: process.stdin, terminal: false });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const [model, inDir, outDir] = line.split('\t');
    await runJobReporting(model, inDir, outDir);
  }
  return 0;
}

async function main(args) {
  if (args.length === 1 && args[0] === '--serve') return serve();
  if (args.length === 2 && args[0] === '--jobs') {
    args = fs.readFileSync(args[1], 'utf8').split('\n').filter((l) => l.trim()).flatMap((l) => l.split('\t'));
  }
  if (args.length === 0 || args.length % 3 !== 0) {
    process.stderr.write('usage: node run_model.js MODEL IN_DIR OUT_DIR [MODEL IN_DIR OUT_DIR ...] | --jobs FILE\n');
    return 2;
  }
  let failed = 0;
  for (let i = 0; i < args.length; i += 3) {
    const [model, inDir, outDir] = args.slice(i, i + 3);
    if (!(await runJobReporting(model, inDir, outDir))) ++failed;
  }
  return failed ? 1 : 0;
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
