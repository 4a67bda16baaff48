// The browser's detection pre/post-processing (web/src/tryit/detect.js)
// alone, in Node: Kestrel's letterbox geometry and roundings, OpenCV's 8-bit
// INTER_LINEAR resize, decode, class-aware NMS, mapping back, and the ONNX
// metadata reader. The end-to-end check against `kestrel predict` is
// tryit.test.mjs (a browser).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import {
  computeLetterbox,
  decodeYoloOutput,
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
