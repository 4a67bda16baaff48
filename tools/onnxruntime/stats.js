#!/usr/bin/env node
// INT8 calibration statistics (docs/export.md "INT8"): runs an ONNX file in
// ONNX Runtime (CPU execution provider, the onnxruntime-node package, as
// run.js) on raw float32 inputs and writes statistics of every float output
// over all runs instead of the tensors themselves — a calibration model
// exposes ~100 activations per image, too many to pass as files.
//
//   node stats.js SPEC.json MODEL.onnx OUT_DIR RUN...
//       RUN = NAME=D0,D1,...=FILE as for run.js. SPEC.json = {"bins": B,
//       "ranges": {OUTPUT: [LO, HI]}}. OUT_DIR/stats.json = {"onnxruntime",
//       "runs": n, "outputs": {OUTPUT: {"min", "max", "count", "hist"}}}:
//       min/max/count of every float output; "hist" only for the outputs in
//       "ranges": counts in B equal bins over [LO, HI] (values outside, and
//       NaN, go to the end bins).
//
// Exit status 0 on success; otherwise 1 with the reason on stderr.
'use strict';

const fs = require('fs');
const path = require('path');

function fail(message) {
  process.stderr.write(`kestrel-ort-stats: ${message}\n`);
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
  const data = new Float32Array(count);
  new Uint8Array(data.buffer).set(bytes);
  return data;
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length < 4) fail('usage: stats.js SPEC.json MODEL.onnx OUT_DIR NAME=D0,D1,...=FILE...');
  const [specFile, model, outDir, ...specs] = args;
  let spec;
  try {
    spec = JSON.parse(fs.readFileSync(specFile, 'utf8'));
  } catch (e) {
    fail(`cannot read ${specFile}: ${e.message}`);
  }
  if (!Number.isInteger(spec.bins) || spec.bins < 1) fail(`${specFile}: bins must be a positive integer`);
  const ranges = spec.ranges || {};
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    fail(`cannot load onnxruntime-node: ${e.message}`);
  }
  const version = ort.env.versions.node || ort.env.versions.common || 'unknown';
  const runs = specs.map(parseRun);
  const session = await ort.InferenceSession.create(model, {executionProviders: ['cpu']});
  const acc = {};
  for (const run of runs) {
    const feeds = {[run.name]: new ort.Tensor('float32', readFloat32(run.file, run.shape), run.shape)};
    const results = await session.run(feeds);
    for (const name of session.outputNames) {
      const t = results[name];
      if (t.type !== 'float32') continue;
      const range = ranges[name];
      let a = acc[name];
      if (!a) {
        a = acc[name] = {min: Infinity, max: -Infinity, count: 0};
        if (range) a.hist = new Float64Array(spec.bins);
      }
      const d = t.data;
      let lo = a.min;
      let hi = a.max;
      for (let i = 0; i < d.length; ++i) {
        const v = d[i];
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
      a.min = lo;
      a.max = hi;
      a.count += d.length;
      if (range) {
        const [r0, r1] = range;
        const bins = spec.bins;
        const h = a.hist;
        const k = r1 > r0 ? bins / (r1 - r0) : 0;
        for (let i = 0; i < d.length; ++i) {
          let b = Math.floor((d[i] - r0) * k);
          if (!(b >= 0)) b = 0;
          if (b >= bins) b = bins - 1;
          h[b] += 1;
        }
      }
    }
  }
  const outputs = {};
  for (const [name, a] of Object.entries(acc)) {
    // JSON has no infinities: an output that saw no values gets null min/max.
    outputs[name] = {min: a.count ? a.min : null, max: a.count ? a.max : null, count: a.count};
    if (a.hist) outputs[name].hist = Array.from(a.hist);
  }
  fs.writeFileSync(path.join(outDir, 'stats.json'),
                   JSON.stringify({onnxruntime: version, runs: runs.length, outputs}) + '\n');
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
