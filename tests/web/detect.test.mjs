// The browser's detection pre/post-processing (web/src/tryit/detect.js)
// alone, in Node: Kestrel's letterbox geometry and roundings, OpenCV's 8-bit
// INTER_LINEAR resize, decode, class-aware NMS, mapping back, and the ONNX
// metadata reader, and every export variant's reading (describeExport: fixed,
// dynamic, FP16, INT8, batch, nms=true) and output (the nms=true rows).
// The end-to-end check against `kestrel predict` is
// tryit.test.mjs (a browser).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import {
  batchInput,
  computeLetterbox,
  confFloor,
  decodeNmsOutput,
  decodeYoloOutput,
  describeExport,
  detectionsOf,
  letterboxToChw,
  nms,
  parseNames,
  readOnnxMetadata,
  resizeLinearRgb,
  roundHalfEven,
  scaleToOriginal,
} from '../../web/src/tryit/detect.js'

test('rounding is half to even, like std::nearbyint and Python round()', () => {
  assert.deepEqual([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, 2.6].map(roundHalfEven), [0, 2, 2, 0, -2, 2, 3])
})

test('letterbox geometry is ComputeLetterbox: scale, rounded size, pads round(half - 0.1)', () => {
  // 480x320 into 320: scale 2/3, 320x213.33 -> 213, pad (320-213)/2 - 0.1 = 53.4 -> 53.
  assert.deepEqual(computeLetterbox(480, 320, 320, 320), {
    scale: 320 / 480,
    resizedWidth: 320,
    resizedHeight: 213,
    padX: 0,
    padY: 53,
  })
  // An odd border of 1: (1)/2 - 0.1 = 0.4 -> 0 (the extra pixel goes right/bottom).
  assert.equal(computeLetterbox(319, 319, 320, 320).padX, 0)
  assert.equal(computeLetterbox(100, 50, 64, 64).padY, 16)
  assert.throws(() => computeLetterbox(0, 10, 64, 64), /bad sizes/)
})

test('the resize is OpenCV INTER_LINEAR in 8-bit fixed point', () => {
  // 4x1 -> 2x1: src x = (d + 0.5) * 2 - 0.5 = 0.5, 2.5: halves of neighbours.
  const rgba = new Uint8Array([0, 0, 0, 255, 100, 10, 1, 255, 200, 20, 2, 255, 255, 30, 3, 255])
  const out = resizeLinearRgb(rgba, 4, 1, 2, 1)
  assert.deepEqual([...out], [50, 5, 1, 228, 25, 3])
  // Exact 2x in both directions is OpenCV's INTER_AREA fast path: rounded 2x2 means.
  const sq = new Uint8Array(16).fill(255)
  sq.set([1, 2, 3], 0)
  sq.set([4, 5, 6], 4)
  sq.set([7, 8, 9], 8)
  sq.set([10, 11, 12], 12)
  assert.deepEqual([...resizeLinearRgb(sq, 2, 2, 1, 1)], [6, 7, 8])
  // A constant image stays constant at any scale (weights sum to 2048).
  const flat = new Uint8Array(7 * 5 * 4).fill(77)
  assert.ok(resizeLinearRgb(flat, 7, 5, 13, 3).every((v) => v === 77))
  assert.ok(resizeLinearRgb(flat, 7, 5, 3, 2).every((v) => v === 77))
})

test('letterboxToChw: grey 114/255 around the image, RGB / 255 in CHW planes', () => {
  const rgba = new Uint8Array(2 * 1 * 4)
  rgba.set([255, 0, 51, 255, 0, 255, 102, 255])
  const { chw, letterbox } = letterboxToChw(rgba, 2, 1, 2, 2)
  assert.equal(letterbox.padY, 0) // (2 - 1) / 2 - 0.1 = 0.4 -> 0
  const grey = Math.fround(114 / 255)
  assert.deepEqual([...chw.subarray(0, 4)], [1, 0, grey, grey])
  assert.deepEqual([...chw.subarray(8, 10)], [Math.fround(51 * Math.fround(1 / 255)), Math.fround(102 * Math.fround(1 / 255))])
})

// A raw output [4 + nc, A] from per-anchor rows.
function rawOf(anchors, nc) {
  const a = anchors.length
  const raw = new Float32Array((4 + nc) * a)
  anchors.forEach(([cx, cy, w, h, ...scores], i) => {
    ;[cx, cy, w, h, ...scores].forEach((v, r) => (raw[r * a + i] = v))
  })
  return raw
}

test('decode keeps the best class per anchor above conf; NMS is per class, greedy, stable', () => {
  const raw = rawOf(
    [
      [50, 50, 20, 20, 0.9, 0.1], // class 0
      [51, 50, 20, 20, 0.8, 0.1], // class 0, overlaps the first: suppressed
      [51, 50, 20, 20, 0.1, 0.85], // class 1, same place: kept (class-aware)
      [10, 10, 4, 4, 0.25, 0.2], // not above conf 0.25
      [90, 90, 4, 4, 0.5, 0.5], // a tie: the first class wins
    ],
    2,
  )
  const cands = decodeYoloOutput(raw, 2, 5, 0.25)
  assert.deepEqual(
    cands.map((c) => [c.classId, Number(c.score.toFixed(2))]),
    [[0, 0.9], [0, 0.8], [1, 0.85], [0, 0.5]],
  )
  assert.deepEqual(cands[0].box, [40, 40, 60, 60])
  const kept = nms(cands, { iou: 0.7 })
  assert.deepEqual(
    kept.map((c) => [c.classId, Number(c.score.toFixed(2))]),
    [[0, 0.9], [1, 0.85], [0, 0.5]],
  )
  // IoU of the two class-0 boxes is 19*20 / (2*400 - 380) = 0.905: kept at iou 0.95.
  assert.equal(nms(cands, { iou: 0.95 }).length, 4)
  assert.equal(nms(cands, { iou: 0.95, maxDet: 2 }).length, 2)
})

test('boxes map back through the letterbox and are clipped to the image', () => {
  const lb = computeLetterbox(480, 320, 320, 320)
  const [d] = scaleToOriginal([{ box: [-5, 53, 100, 400], score: 1, classId: 0 }], lb, 480, 320)
  assert.deepEqual(d.box, [0, 0, 150, 320])
})

// Protobuf bytes: tag, length-delimited fields.
function ld(field, bytes) {
  const len = []
  let n = bytes.length
  do {
    len.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0))
    n >>= 7
  } while (n > 0)
  return [(field << 3) | 2, ...len, ...bytes]
}
const str = (s) => [...new TextEncoder().encode(s)]

test('ONNX metadata_props are read without parsing the graph; names parse', () => {
  const graph = ld(7, new Array(300).fill(0x08)) // an opaque field 7, 300 bytes
  const prop = (k, v) => ld(14, [...ld(1, str(k)), ...ld(2, str(v))])
  const bytes = new Uint8Array([
    0x08, 0x08, // ir_version 8 (varint)
    ...graph,
    ...prop('names', "{0: 'circle', 1: 'it\\'s', 2: 'a\\\\b'}"),
    ...prop('imgsz', '[320, 256]'),
  ])
  const meta = readOnnxMetadata(bytes)
  assert.equal(meta.imgsz, '[320, 256]')
  assert.deepEqual(parseNames(meta.names), ['circle', "it's", 'a\\b'])
  assert.throws(() => readOnnxMetadata(new Uint8Array([0x72, 0x05, 0x01])), /runs past the end/)
  assert.throws(() => parseNames('circle'), /not a \{id: 'name'\} map/)
})

// The metadata and onnxruntime's input/output descriptions of the files
// `kestrel export model=shapes imgsz=320` writes (3 classes, 2100 anchors),
// as checked by hand on the reference detector's exports.
const NAMES = "{0: 'circle', 1: 'rectangle', 2: 'triangle'}"
const base = { names: NAMES, imgsz: '[320, 320]', stride: '32', batch: '1', task: 'detect', arch: 'yolov8n' }
const io = (inShape, outShape, type = 'float32') => [
  { name: 'images', isTensor: true, type, shape: inShape },
  { name: 'output0', isTensor: true, type: 'float32', shape: outShape },
]

test('describeExport reads each variant from the metadata and the graph shapes', () => {
  const fixed = describeExport(base, ...io([1, 3, 320, 320], [1, 7, 2100]))
  assert.deepEqual(
    { nc: fixed.nc, imgsz: fixed.imgsz, batch: fixed.batch, dynamic: fixed.dynamic, half: fixed.half, int8: fixed.int8, nms: fixed.nms },
    { nc: 3, imgsz: [320, 320], batch: 1, dynamic: false, half: false, int8: false, nms: null },
  )
  assert.deepEqual(fixed.names, ['circle', 'rectangle', 'triangle'])
  assert.equal(fixed.variant, 'FP32 · fixed 320×320')
  const dyn = describeExport({ ...base, dynamic: 'true', imgsz: '[256, 320]' }, ...io(['batch', 3, 'height', 'width'], ['batch', 7, 'anchors']))
  assert.deepEqual([dyn.dynamic, dyn.imgsz, dyn.batch, dyn.variant], [true, [256, 320], 1, 'FP32 · dynamic'])
  const half = describeExport({ ...base, half: 'true', batch: '2' }, ...io([2, 3, 320, 320], [2, 7, 2100]))
  assert.deepEqual([half.half, half.batch, half.variant], [true, 2, 'FP16 · fixed 320×320 · batch 2'])
  const int8 = describeExport({ ...base, int8: 'true', int8_calibration: 'minmax' }, ...io([1, 3, 320, 320], [1, 7, 2100]))
  assert.deepEqual([int8.int8, int8.variant], [true, 'INT8 · fixed 320×320'])
  const withNms = describeExport({ ...base, nms: 'true', conf: '0.25', iou: '0.7', max_det: '300' }, ...io([1, 3, 320, 320], [1, 300, 6]))
  assert.deepEqual(withNms.nms, { conf: 0.25, iou: 0.7, maxDet: 300 })
  assert.equal(withNms.nc, 3)
  const dynNms = describeExport(
    { ...base, dynamic: 'true', nms: 'true', conf: '0.1', iou: '0.5', max_det: '50' },
    ...io(['batch', 3, 'height', 'width'], ['batch', 50, 6]),
  )
  assert.equal(dynNms.variant, 'FP32 · dynamic · NMS in the file (conf 0.1, IoU 0.5, max 50)')
})

test('describeExport refuses a file whose metadata and graph disagree, naming what', () => {
  const fixedIo = io([1, 3, 320, 320], [1, 7, 2100])
  assert.throws(() => describeExport({ ...base, dynamic: 'true' }, ...fixedIo), /metadata dynamic is true but input images has shape \[1, 3, 320, 320\]/)
  assert.throws(() => describeExport(base, ...io(['batch', 3, 'height', 'width'], ['batch', 7, 'anchors'])), /metadata dynamic is false/)
  assert.throws(() => describeExport({ ...base, imgsz: '[640, 640]' }, ...fixedIo), /shape \[1, 3, 320, 320\] but metadata imgsz is \[640, 640\]/)
  assert.throws(() => describeExport({ ...base, imgsz: '[300, 320]' }, ...fixedIo), /not a multiple of the stride/)
  assert.throws(() => describeExport({ ...base, imgsz: '320' }, ...fixedIo), /imgsz '320' is not \[h, w\]/)
  assert.throws(() => describeExport({ ...base, nms: 'true', conf: '0.25', iou: '0.7', max_det: '300' }, ...fixedIo), /metadata nms is true but output0 has shape \[1, 7, 2100\]/)
  assert.throws(() => describeExport({ ...base, nms: 'true', conf: '0.25', iou: '0.7' }, ...io([1, 3, 320, 320], [1, 300, 6])), /max_det '' is not/)
  assert.throws(() => describeExport({ ...base, nms: 'true', conf: '2', iou: '0.7', max_det: '300' }, ...io([1, 3, 320, 320], [1, 300, 6])), /conf '2'/)
  // An NMS graph without its metadata is not taken for a raw one.
  assert.throws(() => describeExport(base, ...io([1, 3, 320, 320], [1, 300, 6])), /output0 has 300 rows but metadata names has 3 classes/)
  assert.throws(() => describeExport(base, ...io([1, 3, 320, 320], [1, 7, 2000])), /2000 anchors, expected 2100/)
  assert.throws(() => describeExport(base, ...io([1, 3, 320, 320], [1, 7, 2100], 'float16')), /input images is float16, expected float32/)
  assert.throws(() => describeExport(base, { ...fixedIo[0], name: 'input' }, fixedIo[1]), /'input'\/'output0'/)
  assert.throws(() => describeExport({ ...base, names: 'circle' }, ...fixedIo), /names: not a/)
})

test('nms=true rows: zero rows skipped, score > conf kept, ids checked', () => {
  const rows = new Float32Array(4 * 6)
  rows.set([10, 20, 30, 40, 0.9, 2], 0)
  rows.set([50, 60, 70, 80, 0.3, 0], 6) // rows 2 and 3 stay zero: padding
  assert.deepEqual(decodeNmsOutput(rows, 4, 3, 0.25), [
    { box: [10, 20, 30, 40], score: Math.fround(0.9), classId: 2 },
    { box: [50, 60, 70, 80], score: Math.fround(0.3), classId: 0 },
  ])
  assert.equal(decodeNmsOutput(rows, 4, 3, 0.5).length, 1)
  assert.equal(decodeNmsOutput(rows, 4, 3, 0).length, 2, 'a zero row is padding even at conf 0')
  const bad = rows.slice()
  bad[5] = 3
  assert.throws(() => decodeNmsOutput(bad, 4, 3), /row 0: class id 3 is not one of the file's 3 classes/)
  bad[5] = 1.5
  assert.throws(() => decodeNmsOutput(bad, 4, 3), /class id 1.5/)
  assert.throws(() => decodeNmsOutput(rows.subarray(0, 18), 4, 3), /18 values, expected 4 rows of 6/)
})

test('thresholding NMS output at a higher conf is NMS at that conf (why the slider may filter an nms=true file)', () => {
  // Deterministic pseudo-random overlapping boxes of 3 classes.
  let seed = 12345
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648)
  const cands = []
  for (let i = 0; i < 400; i++) {
    const x = rnd() * 100
    const y = rnd() * 100
    cands.push({ box: [x, y, x + 10 + rnd() * 20, y + 10 + rnd() * 20].map(Math.fround), score: Math.fround(0.1 + 0.9 * rnd()), classId: i % 3 })
  }
  const low = nms(cands.filter((c) => c.score > Math.fround(0.1)), { iou: 0.5 })
  for (const conf of [0.25, 0.4, 0.7]) {
    const direct = nms(cands.filter((c) => c.score > Math.fround(conf)), { iou: 0.5 })
    assert.deepEqual(low.filter((c) => c.score > Math.fround(conf)), direct, `conf ${conf}`)
  }
})

test('batchInput puts the image in slot 0 and predict\'s grey in the others', () => {
  const chw = new Float32Array([0.5, 0.25, 1])
  assert.equal(batchInput(chw, 1), chw)
  const grey = Math.fround(114 / 255)
  assert.deepEqual([...batchInput(chw, 3)], [0.5, 0.25, 1, grey, grey, grey, grey, grey, grey])
})

test('detectionsOf: batch slot 0 of a raw or an nms=true output, mapped back through the letterbox', () => {
  const lb = computeLetterbox(480, 320, 320, 320) // scale 2/3, padY 53
  // Raw [2, 6, 2] (nc 2, 2 anchors): slot 0 has one box, slot 1 a better one that must not show.
  const raw = new Float32Array(2 * 6 * 2)
  raw.set(rawOf([[100, 153, 20, 20, 0.9, 0.1], [0, 0, 1, 1, 0, 0]], 2), 0)
  raw.set(rawOf([[200, 200, 20, 20, 0.99, 0], [0, 0, 1, 1, 0, 0]], 2), 12)
  const desc = { nc: 2, nms: null }
  const dets = detectionsOf(desc, raw, [2, 6, 2], lb, 480, 320, { conf: 0.25 })
  assert.equal(dets.length, 1)
  assert.equal(dets[0].classId, 0)
  assert.deepEqual(dets[0].box.map((v) => Number(v.toFixed(3))), [135, 135, 165, 165])
  assert.throws(() => detectionsOf({ nc: 3, nms: null }, raw, [2, 6, 2], lb, 480, 320), /expected \[batch, 7, anchors\]/)
  // nms=true [2, 2, 6]: the same box as a final row; conf filters it.
  const rows = new Float32Array(2 * 2 * 6)
  rows.set([90, 143, 110, 163, 0.9, 1], 0)
  rows.set([0, 0, 50, 50, 0.95, 0], 12)
  const nmsDesc = { nc: 2, nms: { conf: 0.25, iou: 0.7, maxDet: 2 } }
  const fin = detectionsOf(nmsDesc, rows, [2, 2, 6], lb, 480, 320, { conf: 0.25 })
  assert.deepEqual(fin.map((d) => [d.classId, d.box.map((v) => Number(v.toFixed(3)))]), [[1, [135, 135, 165, 165]]])
  assert.equal(detectionsOf(nmsDesc, rows, [2, 2, 6], lb, 480, 320, { conf: 0.95 }).length, 0)
  assert.throws(() => detectionsOf(nmsDesc, rows, [2, 7, 2], lb, 480, 320), /expected \[batch, 2, 6\]/)
})

test('the conf slider of an nms=true file starts at its conf, rounded up to 0.01 steps', () => {
  assert.deepEqual([0.25, 0.1, 0.07, 0.333, 0, 0.001, 0.995].map((c) => confFloor(c)), [0.25, 0.1, 0.07, 0.34, 0.01, 0.01, 0.99])
})
