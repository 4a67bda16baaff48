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
//
// Exit status 0 on success; otherwise 1 with the reason on stderr.
'use strict';

const fs = require('fs');
const path = require('path');

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
  if (args.length < 3) fail('usage: run.js --version | run.js MODEL.onnx OUT_DIR NAME=D0,D1,...=FILE...');
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
