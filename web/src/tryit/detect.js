// Kestrel's detection pre- and post-processing, in the browser, for "try it
// in the browser" (docs/server.md "Try it in the browser"): the same steps,
// roundings and float32 arithmetic as `kestrel predict model=X.onnx`, so the
// boxes drawn here are the ones predict writes.
//   letterbox:  src/eval/postprocess.cc ComputeLetterbox (scale = min(in/w,
//               in/h), sizes rounded half-to-even, pads round(half - 0.1)),
//               one OpenCV INTER_LINEAR resize (8-bit fixed point, emulated
//               below), grey 114 around it, RGB / 255 in CHW planes
//               (src/eval/val_shapes.cc ValLetterboxToChw).
//   decode:     DecodeYoloOutput: output0 [1, 4+nc, A]; best class per anchor
//               (the first class wins ties), kept when its score > conf.
//   NMS:        Nms: stable sort by score (descending), at most max_nms
//               candidates, class-aware greedy suppression at IoU > iou in
//               float32 (IouF), at most max_det boxes.
//   back:       ScaleToOriginal: (x - pad) / scale, clipped to the image.
// Every variant `kestrel export` writes (docs/export.md) is told apart by
// describeExport from the file's metadata_props and its graph's input and
// output shapes, never guessed: fixed or dynamic=true (the input side is the
// file's imgsz either way, as predict letterboxes into its imgsz), half=true
// and int8=true (float32 in and out, nothing changes here), batch=N (the
// image in slot 0, grey 114 in the others, as predict fills a short batch),
// and nms=true (output0 [batch, max_det, 6] = final detections: no decode or
// NMS here, only the mapping back and the confidence threshold).
// No DOM and no onnxruntime here: tests/web/detect.test.mjs runs it in Node.

const f32 = Math.fround

// Python's round() / std::nearbyint in the default mode: half to even.
export function roundHalfEven(x) {
  const r = Math.round(x)
  return (Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r) + 0 // + 0: no -0
}

// How an image of width x height is placed in an inputWidth x inputHeight
// input: input = original * scale + pad (pads: left/top borders).
export function computeLetterbox(width, height, inputWidth, inputHeight) {
  if (!(width > 0 && height > 0 && inputWidth > 0 && inputHeight > 0)) {
    throw new Error(`letterbox: bad sizes ${width}x${height} -> ${inputWidth}x${inputHeight}`)
  }
  const scale = Math.min(inputHeight / height, inputWidth / width)
  const newW = roundHalfEven(width * scale)
  const newH = roundHalfEven(height * scale)
  return {
    scale,
    resizedWidth: newW,
    resizedHeight: newH,
    padX: roundHalfEven((inputWidth - newW) / 2 - 0.1),
    padY: roundHalfEven((inputHeight - newH) / 2 - 0.1),
  }
}

const COEF_BITS = 11 // OpenCV's INTER_RESIZE_COEF_BITS
const COEF_SCALE = 1 << COEF_BITS

// cvRound of a float coefficient times 2048 (saturate_cast<short>).
const fixedCoef = (c) => roundHalfEven(f32(f32(c) * COEF_SCALE))

// Source index and fixed-point weights per destination index, as
// cv::resize computes them for INTER_LINEAR.
function linearTaps(srcSize, dstSize) {
  const scale = srcSize / dstSize // OpenCV: 1 / (dst / src), in double
  const idx = new Int32Array(dstSize)
  const w0 = new Int32Array(dstSize)
  const w1 = new Int32Array(dstSize)
  for (let d = 0; d < dstSize; d++) {
    let fx = f32((d + 0.5) * scale - 0.5)
    let sx = Math.floor(fx)
    fx = f32(fx - sx)
    if (sx < 0) {
      fx = 0
      sx = 0
    }
    if (sx >= srcSize - 1) {
      fx = 0
      sx = srcSize - 1
    }
    idx[d] = sx
    w0[d] = fixedCoef(1 - fx)
    w1[d] = fixedCoef(fx)
  }
  return { idx, w0, w1 }
}

// cv::resize(src, dst, size, 0, 0, INTER_LINEAR) of an 8-bit RGBA image
// (alpha ignored) into a packed RGB Uint8Array: fixed-point horizontal taps
// (x 2048), then the vertical step of OpenCV's 8-bit path
// ((b0 * (r0 >> 4)) >> 16) + ((b1 * (r1 >> 4)) >> 16) + 2) >> 2. An exact
// 2x reduction is OpenCV's INTER_AREA fast path (it switches to it), the
// rounded mean of each 2x2 block.
export function resizeLinearRgb(rgba, srcW, srcH, dstW, dstH) {
  const out = new Uint8Array(dstW * dstH * 3)
  if (srcW === dstW && srcH === dstH) {
    for (let i = 0, j = 0; i < srcW * srcH * 4; i += 4, j += 3) {
      out[j] = rgba[i]
      out[j + 1] = rgba[i + 1]
      out[j + 2] = rgba[i + 2]
    }
    return out
  }
  if (srcW === 2 * dstW && srcH === 2 * dstH) {
    for (let y = 0; y < dstH; y++) {
      for (let x = 0; x < dstW; x++) {
        const a = ((2 * y) * srcW + 2 * x) * 4
        const b = a + srcW * 4
        for (let c = 0; c < 3; c++) {
          out[(y * dstW + x) * 3 + c] = (rgba[a + c] + rgba[a + 4 + c] + rgba[b + c] + rgba[b + 4 + c] + 2) >> 2
        }
      }
    }
    return out
  }
  const tx = linearTaps(srcW, dstW)
  const ty = linearTaps(srcH, dstH)
  // Horizontal pass of every source row that some output row reads.
  const rows = new Map()
  const hrow = (sy) => {
    let r = rows.get(sy)
    if (r) return r
    r = new Int32Array(dstW * 3)
    const base = sy * srcW * 4
    for (let x = 0; x < dstW; x++) {
      const s0 = base + tx.idx[x] * 4
      const s1 = tx.idx[x] + 1 < srcW ? s0 + 4 : s0
      for (let c = 0; c < 3; c++) r[x * 3 + c] = rgba[s0 + c] * tx.w0[x] + rgba[s1 + c] * tx.w1[x]
    }
    rows.set(sy, r)
    return r
  }
  for (let y = 0; y < dstH; y++) {
    const sy = ty.idx[y]
    const r0 = hrow(sy)
    const r1 = hrow(Math.min(sy + 1, srcH - 1))
    const b0 = ty.w0[y]
    const b1 = ty.w1[y]
    const o = y * dstW * 3
    for (let i = 0; i < dstW * 3; i++) {
      // Integer arithmetic as OpenCV's (values fit 32 bits: |b * (r >> 4)| < 2^31).
      const v = (((Math.imul(b0, r0[i] >> 4) >> 16) + (Math.imul(b1, r1[i] >> 4) >> 16) + 2) >> 2)
      out[o + i] = v < 0 ? 0 : v > 255 ? 255 : v
    }
  }
  return out
}

// The network input: Float32Array [3, inputHeight, inputWidth], RGB in 0..1,
// the image resized and placed at (padX, padY), grey 114/255 elsewhere.
export function letterboxToChw(rgba, width, height, inputWidth, inputHeight) {
  const lb = computeLetterbox(width, height, inputWidth, inputHeight)
  const rgb = resizeLinearRgb(rgba, width, height, lb.resizedWidth, lb.resizedHeight)
  const plane = inputWidth * inputHeight
  const chw = new Float32Array(3 * plane)
  chw.fill(f32(114 / 255))
  const inv = f32(1 / 255)
  const w = Math.min(lb.resizedWidth, inputWidth - lb.padX)
  const h = Math.min(lb.resizedHeight, inputHeight - lb.padY)
  for (let y = 0; y < h; y++) {
    const o = (y + lb.padY) * inputWidth + lb.padX
    const s = y * lb.resizedWidth * 3
    for (let x = 0; x < w; x++) {
      chw[o + x] = rgb[s + 3 * x] * inv
      chw[plane + o + x] = rgb[s + 3 * x + 1] * inv
      chw[2 * plane + o + x] = rgb[s + 3 * x + 2] * inv
    }
  }
  return { chw, letterbox: lb }
}

export const DEFAULTS = Object.freeze({ conf: 0.25, iou: 0.7, maxDet: 300, maxNms: 30000 })

// Candidates of one image's raw output (Float32Array [(4 + nc) * A]):
// { box: [x1, y1, x2, y2] (input pixels, float32), score, classId }, in
// anchor order.
export function decodeYoloOutput(raw, numClasses, numAnchors, conf = DEFAULTS.conf) {
  const out = []
  const n = numAnchors
  const c32 = f32(conf)
  for (let a = 0; a < n; a++) {
    let best = raw[4 * n + a]
    let arg = 0
    for (let c = 1; c < numClasses; c++) {
      const s = raw[(4 + c) * n + a]
      if (s > best) {
        best = s
        arg = c
      }
    }
    if (best > c32) {
      const cx = raw[a]
      const cy = raw[n + a]
      const w = raw[2 * n + a]
      const h = raw[3 * n + a]
      out.push({ box: [f32(cx - w / 2), f32(cy - h / 2), f32(cx + w / 2), f32(cy + h / 2)], score: best, classId: arg })
    }
  }
  return out
}

const areaF = (b) => f32(Math.max(0, f32(b[2] - b[0])) * Math.max(0, f32(b[3] - b[1])))

function iouF(a, areaA, b, areaB) {
  const iw = f32(Math.min(a[2], b[2]) - Math.max(a[0], b[0]))
  const ih = f32(Math.min(a[3], b[3]) - Math.max(a[1], b[1]))
  if (iw <= 0 || ih <= 0) return 0
  const inter = f32(iw * ih)
  const uni = f32(f32(areaA + areaB) - inter)
  return uni > 0 ? f32(inter / uni) : 0
}

// Greedy class-aware NMS (Kestrel's Nms): result in descending score order.
export function nms(candidates, { iou = DEFAULTS.iou, maxDet = DEFAULTS.maxDet, maxNms = DEFAULTS.maxNms } = {}) {
  const order = candidates.map((_, i) => i)
  order.sort((i, j) => candidates[j].score - candidates[i].score || i - j) // stable, ties by index
  const limit = Math.min(order.length, Math.max(1, maxNms))
  const iou32 = f32(iou)
  const kept = []
  const byClass = new Map()
  for (let k = 0; k < limit && kept.length < maxDet; k++) {
    const d = candidates[order[k]]
    const area = areaF(d.box)
    const group = byClass.get(d.classId) || []
    if (group.some((g) => iouF(g.box, g.area, d.box, area) > iou32)) continue
    group.push({ box: d.box, area })
    byClass.set(d.classId, group)
    kept.push(d)
  }
  return kept
}

// Boxes from input pixels to the original image, clipped to it.
export function scaleToOriginal(dets, lb, width, height) {
  const clip = (v, hi) => Math.min(Math.max(v, 0), hi)
  return dets.map((d) => ({
    ...d,
    box: [
      f32(clip(f32((d.box[0] - lb.padX) / lb.scale), width)),
      f32(clip(f32((d.box[1] - lb.padY) / lb.scale), height)),
      f32(clip(f32((d.box[2] - lb.padX) / lb.scale), width)),
      f32(clip(f32((d.box[3] - lb.padY) / lb.scale), height)),
    ],
  }))
}

// Decode + NMS + mapping back, as predict does per image.
export function postprocess(raw, numClasses, numAnchors, lb, width, height, opts = {}) {
  const o = { ...DEFAULTS, ...opts }
  return scaleToOriginal(nms(decodeYoloOutput(raw, numClasses, numAnchors, o.conf), o), lb, width, height)
}

// The rows of an nms=true file's output0 for one image (Float32Array
// [max_det * 6]: x1, y1, x2, y2 in input pixels, score, class id), in the
// file's order (descending score): the real rows (score > 0; the graph pads
// with zero rows) whose score is > conf, as { box, score, classId }.
// Filtering the graph's result at a conf above the one baked into it gives
// predict's result at that conf: greedy NMS decides a box by better-scored
// boxes only, so dropping the lower-scored ones changes nothing else.
export function decodeNmsOutput(rows, maxDet, numClasses, conf = DEFAULTS.conf) {
  if (rows.length < maxDet * 6) throw new Error(`nms output: ${rows.length} values, expected ${maxDet} rows of 6`)
  const out = []
  const c32 = f32(conf)
  for (let r = 0; r < maxDet; r++) {
    const o = r * 6
    const score = rows[o + 4]
    if (!(score > 0) || !(score > c32)) continue
    const classId = rows[o + 5]
    if (!Number.isInteger(classId) || classId < 0 || (numClasses > 0 && classId >= numClasses)) {
      throw new Error(`nms output row ${r}: class id ${classId} is not one of the file's ${numClasses} classes`)
    }
    out.push({ box: [rows[o], rows[o + 1], rows[o + 2], rows[o + 3]], score, classId })
  }
  return out
}

const isDim = (d) => Number.isInteger(d) && d > 0
const shapeText = (s) => `[${(s || []).map((d) => (isDim(d) ? d : String(d))).join(', ')}]`

// What a Kestrel ONNX export is, from its metadata_props (readOnnxMetadata)
// and the graph's input and output as onnxruntime describes them
// ({ name, type, shape }: a number per fixed axis, a name per dynamic one).
// Throws naming the field when the two disagree or the layout is not one
// `kestrel export` writes. Returns { names, nc, imgsz: [h, w], batch (the
// input's fixed batch, 1 when dynamic), dynamic, half, int8, nms (null, or
// { conf, iou, maxDet } as baked into the graph), variant (a label) }.
export function describeExport(meta, input, output) {
  if (!input || !output) throw new Error('the file has no input or no output')
  if (input.name !== 'images' || output.name !== 'output0') {
    throw new Error(`the file's input/output are '${input.name}'/'${output.name}', a Kestrel export has 'images'/'output0'`)
  }
  if (input.type !== 'float32') throw new Error(`input images is ${input.type}, expected float32 (every Kestrel export takes float32)`)
  if (output.type !== 'float32') throw new Error(`output0 is ${output.type}, expected float32`)
  const names = meta.names === undefined ? [] : parseNames(meta.names)
  const m = /^\[\s*(\d+)\s*,\s*(\d+)\s*\]$/.exec(meta.imgsz || '')
  if (!m) throw new Error(`metadata imgsz '${meta.imgsz ?? ''}' is not [h, w]`)
  const imgsz = [Number(m[1]), Number(m[2])]
  const stride = meta.stride === undefined ? 32 : Number(meta.stride)
  if (!(stride > 0) || imgsz.some((v) => !(v > 0) || v % stride !== 0)) {
    throw new Error(`metadata imgsz ${meta.imgsz} is not a multiple of the stride ${meta.stride}`)
  }
  const is = input.shape || []
  if (is.length !== 4 || is[1] !== 3) throw new Error(`input images has shape ${shapeText(is)}, expected [batch, 3, H, W]`)
  const dynamic = meta.dynamic === 'true'
  const fixedHW = isDim(is[2]) && isDim(is[3])
  if (dynamic === fixedHW) {
    throw new Error(`metadata dynamic is ${dynamic} but input images has shape ${shapeText(is)}`)
  }
  if (fixedHW && (is[2] !== imgsz[0] || is[3] !== imgsz[1])) {
    throw new Error(`input images has shape ${shapeText(is)} but metadata imgsz is ${meta.imgsz}`)
  }
  const batch = isDim(is[0]) ? is[0] : 1
  const half = meta.half === 'true'
  const int8 = meta.int8 === 'true'
  const os = output.shape || []
  if (os.length !== 3) throw new Error(`output0 has shape ${shapeText(os)}, expected 3 axes`)
  let nms = null
  let nc = names.length
  if (meta.nms === 'true') {
    const maxDet = Number(meta.max_det)
    const conf = Number(meta.conf)
    const iou = Number(meta.iou)
    if (!isDim(maxDet)) throw new Error(`metadata max_det '${meta.max_det ?? ''}' is not a positive integer`)
    if (!(conf >= 0 && conf < 1)) throw new Error(`metadata conf '${meta.conf ?? ''}' is not in [0, 1)`)
    if (!(iou >= 0 && iou <= 1)) throw new Error(`metadata iou '${meta.iou ?? ''}' is not in [0, 1]`)
    if (os[1] !== maxDet || os[2] !== 6) {
      throw new Error(`metadata nms is true but output0 has shape ${shapeText(os)}, expected [batch, ${maxDet}, 6]`)
    }
    nms = { conf, iou, maxDet }
  } else {
    if (isDim(os[1])) {
      if (os[1] < 5) throw new Error(`output0 has shape ${shapeText(os)}, expected [batch, 4 + nc, anchors]`)
      if (names.length && os[1] !== 4 + names.length) {
        throw new Error(`output0 has ${os[1]} rows but metadata names has ${names.length} classes (expected 4 + nc)`)
      }
      nc = os[1] - 4
    }
    if (fixedHW && isDim(os[2])) {
      const anchors = [8, 16, 32].reduce((a, s) => a + (imgsz[0] / s) * (imgsz[1] / s), 0)
      if (os[2] !== anchors) {
        throw new Error(`output0 has ${os[2]} anchors, expected ${anchors} for imgsz ${meta.imgsz} (no NMS in a file without metadata nms)`)
      }
    }
  }
  const variant = [
    int8 ? 'INT8' : half ? 'FP16' : 'FP32',
    dynamic ? 'dynamic' : `fixed ${imgsz[1]}×${imgsz[0]}`,
    batch > 1 ? `batch ${batch}` : '',
    nms ? `NMS in the file (conf ${nms.conf}, IoU ${nms.iou}, max ${nms.maxDet})` : '',
  ].filter(Boolean).join(' · ')
  return { names, nc, imgsz, batch, dynamic, half, int8, nms, variant }
}

// The lowest confidence slider value for an nms=true file baked at `conf`:
// conf rounded up to the slider's steps (0.01), within [step, 1 - step]; - 1e-6
// because 0.1 * 100 is 10.000000000000002 in double.
export function confFloor(conf, step = 0.01) {
  const n = Math.min(Math.max(1, Math.ceil(conf / step - 1e-6)), Math.round(1 / step) - 1)
  return Number((n * step).toFixed(6))
}

// The input tensor's data for one image's CHW planes: the image in batch
// slot 0, the other slots of a fixed batch grey 114/255 (predict's filler).
export function batchInput(chw, batch) {
  if (batch <= 1) return chw
  const data = new Float32Array(batch * chw.length)
  data.fill(f32(114 / 255), chw.length)
  data.set(chw, 0)
  return data
}

// The detections of batch slot 0 of output0 (data and dims as onnxruntime
// returns them), mapped to the original image: decode + NMS for a raw file,
// the file's own rows for nms=true. opts: conf, iou (raw files only),
// maxDet, maxNms.
export function detectionsOf(desc, data, dims, lb, width, height, opts = {}) {
  const o = { ...DEFAULTS, ...opts }
  if (!dims || dims.length !== 3 || dims[0] < 1) throw new Error(`output0 has shape ${shapeText(dims)}`)
  const per = dims[1] * dims[2]
  const slot = data.subarray(0, per)
  if (desc.nms) {
    if (dims[1] !== desc.nms.maxDet || dims[2] !== 6) {
      throw new Error(`output0 has shape ${shapeText(dims)}, expected [batch, ${desc.nms.maxDet}, 6]`)
    }
    const rows = decodeNmsOutput(slot, desc.nms.maxDet, desc.nc, o.conf)
    return scaleToOriginal(rows.slice(0, o.maxDet), lb, width, height)
  }
  if (dims[1] < 5 || (desc.nc && dims[1] !== 4 + desc.nc)) {
    throw new Error(`output0 has shape ${shapeText(dims)}, expected [batch, ${desc.nc ? 4 + desc.nc : '4 + nc'}, anchors]`)
  }
  return postprocess(slot, dims[1] - 4, dims[2], lb, width, height, o)
}

// The metadata_props of an ONNX file (ModelProto field 14: repeated
// StringStringEntryProto {key = 1, value = 2}) as { key: value }, read by
// walking the top-level protobuf fields (the graph is skipped, not parsed).
export function readOnnxMetadata(bytes) {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)
  const dec = new TextDecoder()
  const varint = (buf, pos) => {
    let v = 0
    let mul = 1
    for (;;) {
      if (pos.i >= buf.length) throw new Error('ONNX file: truncated varint')
      const b = buf[pos.i++]
      v += (b & 0x7f) * mul
      if (b < 0x80) return v
      mul *= 128
      if (mul > 2 ** 63) throw new Error('ONNX file: bad varint')
    }
  }
  const fields = (buf, visit) => {
    const pos = { i: 0 }
    while (pos.i < buf.length) {
      const tag = varint(buf, pos)
      const field = Math.floor(tag / 8)
      const wire = tag % 8
      if (wire === 0) varint(buf, pos)
      else if (wire === 1) pos.i += 8
      else if (wire === 5) pos.i += 4
      else if (wire === 2) {
        const len = varint(buf, pos)
        if (pos.i + len > buf.length) throw new Error(`ONNX file: field ${field} runs past the end`)
        visit(field, buf.subarray(pos.i, pos.i + len))
        pos.i += len
      } else throw new Error(`ONNX file: unsupported wire type ${wire} at byte ${pos.i}`)
      if (pos.i > buf.length) throw new Error('ONNX file: truncated')
    }
  }
  const meta = {}
  fields(u8, (field, sub) => {
    if (field !== 14) return
    let key = ''
    let value = ''
    fields(sub, (f, s) => {
      if (f === 1) key = dec.decode(s)
      else if (f === 2) value = dec.decode(s)
    })
    meta[key] = value
  })
  return meta
}

// The exporter's "names" property, {0: 'cat', 1: 'dog'} (single-quoted,
// backslash escapes), as an array indexed by class id.
export function parseNames(text) {
  const names = []
  const s = String(text || '').trim()
  if (!s.startsWith('{') || !s.endsWith('}')) throw new Error(`names: not a {id: 'name'} map: ${s.slice(0, 80)}`)
  let i = 1
  const skip = () => {
    while (i < s.length && /[\s,]/.test(s[i])) i++
  }
  for (skip(); i < s.length - 1; skip()) {
    const m = /^(\d+)\s*:\s*/.exec(s.slice(i))
    if (!m) throw new Error(`names: expected a class id at ${i}: ${s.slice(i, i + 20)}`)
    i += m[0].length
    const q = s[i]
    if (q !== "'" && q !== '"') throw new Error(`names: expected a quoted name at ${i}`)
    let name = ''
    for (i++; i < s.length && s[i] !== q; i++) {
      if (s[i] === '\\') i++
      name += s[i]
    }
    if (s[i] !== q) throw new Error('names: unterminated name')
    i++
    names[Number(m[1])] = name
  }
  return names
}

// IoU in double of two [x1, y1, x2, y2] boxes (for comparisons).
export function iou(a, b) {
  const iw = Math.min(a[2], b[2]) - Math.max(a[0], b[0])
  const ih = Math.min(a[3], b[3]) - Math.max(a[1], b[1])
  if (iw <= 0 || ih <= 0) return 0
  const inter = iw * ih
  const u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
  return u > 0 ? inter / u : 0
}
