#!/usr/bin/env node
// Runs an ONNX file in ONNX Runtime (CPU execution provider, the build that
// the onnxruntime-node package ships) on raw float32 tensors: the second
// runtime `kestrel export` checks an export in (docs/export.md).
//
//   node run.js --version
//       prints {"onnxruntime": "<version>"} (loads the native binding, so a
//       broken install fails here)
//   node run.js MODEL.onnx OUT_DIR RUN...
//       RUN = NAME=D0,D1,...=FILE: one inference per RUN, feeding input NAME
//       the little-endian float32 file FILE of shape [D0, D1, ...]. Run i's
//       outputs go to OUT_DIR/run<i>.<output name>.f32 (raw float32), and
//       OUT_DIR/manifest.json lists them:
//       {"onnxruntime": "...", "runs": [{"outputs": [{"name", "shape", "file"}]}]}
//   node run.js --serve MODEL.onnx OUT_DIR
//       loads MODEL once, prints one line {"ready": true, "onnxruntime": "..."}
//       and then answers requests, one JSON line each on stdin, until EOF:
//       {"id": N, "inputs": [{"name", "shape", "file"}]} runs the model once
//       (float32 files as above) and prints one JSON line
//       {"id": N, "outputs": [{"name", "shape", "file"}], "ms": T} (T: the
//       milliseconds session.run took) with the outputs in
//       OUT_DIR/out<N>.<output name>.f32, or {"id": N, "error": "..."} when
//       that run failed (the helper keeps serving). The batch inference of
//       `kestrel export data=` (mAP per runtime): one process for a whole
//       validation set.
//
// Exit status 0 on success; otherwise 1 with the reason on stderr.
'use strict';

const fs = require('fs');
const path = require('path');
const readline = require('readline');

function fail(message) {
  process.stderr.write(`kestrel-ort-run: ${message}\n`);
  process.exit(1);
}

function parseRun(spec) {
  const parts = spec.split('=');
  if (parts.length !== 3) fail(`bad run '${spec}': expected NAME=D0,D1,...=FILE`);
  const [name, dims, file] = parts;
  const shape = dims.split(',').map((d) => Number(d));
  if (shape.some((d) => !Number.isInteger(d) || d < 1)) fail(`bad shape '${dims}' in '${spec}'`);
  return {name, shape, file};
}

function readFloat32(file, shape) {
  const bytes = fs.readFileSync(file);
  const count = shape.reduce((a, b) => a * b, 1);
  if (bytes.length !== count * 4) {
    fail(`${file}: ${bytes.length} bytes, expected ${count * 4} for [${shape.join(', ')}]`);
  }
  // Copy into an aligned buffer: a Buffer's offset into its pool need not be a multiple of 4.
  const data = new Float32Array(count);
  new Uint8Array(data.buffer).set(bytes);
  return data;
}

// Reads an input tensor as readFloat32 does, but throws instead of exiting:
// a bad request is answered with an error line and the helper keeps serving.
function readInput(spec) {
  if (typeof spec !== 'object' || spec === null) throw new Error('an input is not an object');
  const {name, shape, file} = spec;
  if (typeof name !== 'string' || typeof file !== 'string') throw new Error('an input needs name and file');
  if (!Array.isArray(shape) || shape.length === 0 || shape.some((d) => !Number.isInteger(d) || d < 1)) {
    throw new Error(`bad shape ${JSON.stringify(shape)} for input ${name}`);
  }
  const bytes = fs.readFileSync(file);
  const count = shape.reduce((a, b) => a * b, 1);
  if (bytes.length !== count * 4) {
    throw new Error(`${file}: ${bytes.length} bytes, expected ${count * 4} for [${shape.join(', ')}]`);
  }
  const data = new Float32Array(count);
  new Uint8Array(data.buffer).set(bytes);
  return [name, data, shape];
}

async function serve(ort, version, model, outDir) {
  const session = await ort.InferenceSession.create(model, {executionProviders: ['cpu']});
  const reply = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
  reply({ready: true, onnxruntime: version});
  const lines = readline.createInterface({input: process.stdin, crlfDelay: Infinity});
  for await (const line of lines) {
    if (line.trim() === '') continue;
    let id = null;
    try {
      const request = JSON.parse(line);
      id = Number.isInteger(request.id) ? request.id : null;
      if (id === null || id < 0) throw new Error('a request needs an integer id >= 0');
      if (!Array.isArray(request.inputs) || request.inputs.length === 0) throw new Error('a request needs inputs');
      const feeds = {};
      for (const spec of request.inputs) {
        const [name, data, shape] = readInput(spec);
        feeds[name] = new ort.Tensor('float32', data, shape);
      }
      const start = process.hrtime.bigint();
      const results = await session.run(feeds);
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      const outputs = [];
      for (const name of session.outputNames) {
        const t = results[name];
        if (t.type !== 'float32') throw new Error(`output ${name} has type ${t.type}, expected float32`);
        const file = path.join(outDir, `out${id}.${name}.f32`);
        fs.writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
        outputs.push({name, shape: t.dims.map(Number), file});
      }
      reply({id, outputs, ms});
    } catch (e) {
      reply({id, error: e && e.message ? e.message : String(e)});
    }
  }
}

async function main() {
  const args = process.argv.slice(2);
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    fail(`cannot load onnxruntime-node: ${e.message}`);
  }
  const version = ort.env.versions.node || ort.env.versions.common || 'unknown';
  if (args.length === 1 && args[0] === '--version') {
    process.stdout.write(JSON.stringify({onnxruntime: version}) + '\n');
    return;
  }
  if (args[0] === '--serve') {
    if (args.length !== 3) fail('usage: run.js --serve MODEL.onnx OUT_DIR');
    await serve(ort, version, args[1], args[2]);
    return;
  }
  if (args.length < 3) {
    fail('usage: run.js --version | run.js MODEL.onnx OUT_DIR NAME=D0,D1,...=FILE... | run.js --serve MODEL.onnx OUT_DIR');
  }
  const [model, outDir, ...specs] = args;
  const runs = specs.map(parseRun);
  const session = await ort.InferenceSession.create(model, {executionProviders: ['cpu']});
  const manifest = {onnxruntime: version, runs: []};
  for (let i = 0; i < runs.length; ++i) {
    const run = runs[i];
    const feeds = {[run.name]: new ort.Tensor('float32', readFloat32(run.file, run.shape), run.shape)};
    const results = await session.run(feeds);
    const outputs = [];
    for (const name of session.outputNames) {
      const t = results[name];
      if (t.type !== 'float32') fail(`output ${name} has type ${t.type}, expected float32`);
      const file = path.join(outDir, `run${i}.${name}.f32`);
      fs.writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      outputs.push({name, shape: t.dims.map(Number), file});
    }
    manifest.runs.push({outputs});
  }
  fs.writeFileSync(path.join(outDir, 'manifest.json'), JSON.stringify(manifest) + '\n');
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
