// Kestrel's Label Studio pre-annotations rendered by the Label Studio
// frontend itself (issue 34): `kestrel dataset synth` makes three square
// images, two non-square ones from the reference fixture join them (one in a
// subfolder), `kestrel predict format=label-studio` (the reference shapes
// model) writes the tasks and the labelling config, and each task is loaded,
// with that config, into the real frontend — the prebuilt bundle of npm's
// @heartexlabs/label-studio 1.4.0 (tools/label-studio-frontend,
// scripts/install-node-deps.sh) on a static page served here with the images
// — in Debian's Chromium. Per task, checked in the page:
// - the prediction is shown and has exactly the task's regions (= predict's
//   boxes for that image), each labelled as Kestrel wrote;
// - each region is visible: not hidden, its Konva shape drawn and inside the
//   image;
// - serialising the prediction back (the store's serializeAnnotation) gives
//   every box's x, y, width, height within 0.01 % of the image size of
//   Kestrel's, and the same holds for the annotation an annotator gets from
//   it (addAnnotationFromPrediction);
// - the drawn rectangle is where the box is: the shape's rectangle in stage
//   pixels is Kestrel's box (and predict's pixel box) scaled to the stage,
//   within 1 px, and the stage's canvas has the region's stroke on each
//   edge's midpoint.
// No request leaves the page's origin and the page logs no error.
//   KESTREL_CLI=build/src/cli/kestrel KESTREL_WEB_MODULES=web/node_modules \
//   node tests/web/label_studio.test.mjs
// Exits 77 (ctest: skipped) without chromium, web/node_modules (playwright),
// the Label Studio bundle or ../shared/reference.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { ARTIFACTS, CHROMIUM, CLI, PARITY, chromiumOrSkip, repo, skip } from './harness.mjs'

const MODEL = path.join(PARITY, 'yolov8n_shapes_p.safetensors')
const NONSQUARE = path.join(PARITY, 'nonsquare', 'images', 'val')
const LS_PACKAGE = path.join(repo, 'tools', 'label-studio-frontend', 'node_modules', '@heartexlabs', 'label-studio')
const LS_STATIC = path.join(LS_PACKAGE, 'build', 'static')

const chromium = chromiumOrSkip()
if (!fs.existsSync(path.join(LS_STATIC, 'js', 'main.js'))) skip(`the Label Studio frontend is not installed in ${LS_PACKAGE} (scripts/install-node-deps.sh)`)
if (!fs.existsSync(MODEL) || !fs.existsSync(NONSQUARE)) skip(`no reference model or images in ${PARITY}`)

const WAIT = 20000
// 0.01 % of the image size, in Label Studio's percent units.
const PERCENT_TOL = 0.01
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kestrel-web-ls-'))
const src = path.join(tmp, 'src') // predict's source folder, served as /img/
let tasks = [] // Kestrel's tasks JSON
let config = '' // Kestrel's labelling config
let predicted = [] // predict --json's images, in task order
let server = null
let base = ''
let browser = null
const external = [] // requests that left the origin
const pageErrors = []

function kestrel(...args) {
  return execFileSync(CLI, ['--home', path.join(tmp, 'home'), ...args], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000, maxBuffer: 16 << 20,
  })
}

// The page: the bundle, its stylesheet and an element to mount it in. At
// 760 px the side column leaves the image 372 px, so the 480-px image is
// drawn scaled (0.775) and the pixel check covers the percent-to-stage
// conversion too; the others are drawn at their size.
const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>Kestrel in Label Studio</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="/ls/css/main.css"></head>
<body><div id="label-studio" style="width: 760px"></div><script src="/ls/js/main.js"></script></body></html>`
const TYPES = { '.js': 'text/javascript', '.css': 'text/css', '.jpg': 'image/jpeg', '.png': 'image/png' }

// Serves PAGE at /, the bundle's build/static at /ls/ and the images at /img/
// (what ls_image_root=/img/ makes data.image point to).
function serve(req, res) {
  const url = new URL(req.url, 'http://localhost')
  let file = null
  if (url.pathname === '/') {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
    return res.end(PAGE)
  }
  const roots = { '/ls/': LS_STATIC, '/img/': src }
  for (const [prefix, root] of Object.entries(roots)) {
    if (!url.pathname.startsWith(prefix)) continue
    const rel = decodeURIComponent(url.pathname.slice(prefix.length))
    const full = path.resolve(root, rel)
    if (full.startsWith(root + path.sep)) file = full
  }
  if (!file || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
    res.writeHead(404)
    return res.end()
  }
  res.writeHead(200, { 'content-type': TYPES[path.extname(file)] || 'application/octet-stream' })
  fs.createReadStream(file).pipe(res)
}

before(async () => {
  assert.ok(fs.existsSync(CLI), `${CLI} is not built`)
  const synth = path.join(tmp, 'synth')
  kestrel('dataset', 'synth', synth, '--images', '3', '--imgsz', '160', '--seed', '5')
  fs.mkdirSync(path.join(src, 'wide'), { recursive: true })
  for (const split of ['train', 'val']) {
    const dir = path.join(synth, 'images', split)
    for (const f of fs.existsSync(dir) ? fs.readdirSync(dir) : []) fs.copyFileSync(path.join(dir, f), path.join(src, f))
  }
  // Non-square: 480x320 in a subfolder (a '/' in the image's name), 320x416.
  fs.copyFileSync(path.join(NONSQUARE, '00000.jpg'), path.join(src, 'wide', 'landscape.jpg'))
  fs.copyFileSync(path.join(NONSQUARE, '00001.jpg'), path.join(src, 'portrait.jpg'))
  const run = JSON.parse(kestrel('--json', 'predict', `model=${MODEL}`, `source=${src}`, 'format=label-studio',
    'ls_image_root=/img/', 'imgsz=320', 'conf=0.05', 'max_det=6', `project=${tmp}`, 'name=run'))
  const [tasksFile, configFile] = run.preannotations.files
  tasks = JSON.parse(fs.readFileSync(tasksFile, 'utf8'))
  config = fs.readFileSync(configFile, 'utf8')
  predicted = run.images
  assert.equal(tasks.length, 5)
  assert.equal(predicted.length, 5)
  server = http.createServer(serve)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${server.address().port}`
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] })
  fs.mkdirSync(ARTIFACTS, { recursive: true })
})

after(async () => {
  if (browser) await browser.close()
  if (server) server.close()
  fs.rmSync(tmp, { recursive: true, force: true })
})

// Loads one task into a fresh Label Studio and returns what the page shows:
// the image's sizes, and per region of the shown prediction its state, its
// shape's rectangle in stage pixels and the stroke found on the canvas; the
// prediction serialised, and the annotation made from it serialised.
async function renderTask(page, task) {
  await page.goto(`${base}/`)
  await page.evaluate(({ config, task }) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('Label Studio did not call onLabelStudioLoad')), 15000)
    window.labelStudio = new window.LabelStudio('label-studio', {
      config,
      interfaces: ['panel', 'controls', 'side-column', 'predictions:menu', 'annotations:menu'],
      user: { pk: 1, firstName: 'Kestrel', lastName: 'Test' },
      task: { id: 1, data: task.data, predictions: task.predictions, annotations: [] },
      onLabelStudioLoad(store) {
        clearTimeout(timer)
        window.lsStore = store
        resolve()
      },
    })
  }), { config, task })
  // The image loaded and the stage sized to it.
  await page.waitForFunction(() => {
    const as = window.lsStore.annotationStore
    const image = as.selected && as.selected.names && [...as.selected.names.values()].find((t) => t.type === 'image')
    return image && image.isReady && image.stageWidth > 1 && image.naturalWidth > 1 && window.Konva && window.Konva.stages.length > 0
  }, null, { timeout: WAIT })
  // One frame for Konva to draw the regions.
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))))
  return page.evaluate(() => {
    const as = window.lsStore.annotationStore
    const prediction = as.predictions[0]
    const shown = as.selected
    const image = [...shown.names.values()].find((t) => t.type === 'image')
    const stage = image.stageRef
    const canvas = stage.toCanvas({ pixelRatio: 1 })
    const ctx = canvas.getContext('2d')
    // Whether any pixel within 1 px of (x, y) is drawn (alpha > 0).
    const drawn = (x, y) => {
      const d = ctx.getImageData(Math.round(x) - 1, Math.round(y) - 1, 3, 3).data
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) return true
      return false
    }
    const regions = shown.regions.map((r) => {
      const shape = r.shapeRef
      const rect = shape ? shape.getClientRect({ relativeTo: stage, skipStroke: true, skipShadow: true }) : null
      const edges = rect ? [
        [rect.x + rect.width / 2, rect.y], [rect.x + rect.width / 2, rect.y + rect.height],
        [rect.x, rect.y + rect.height / 2], [rect.x + rect.width, rect.y + rect.height / 2],
      ] : []
      return {
        id: r.id.split('#')[0],
        hidden: r.hidden,
        shapeVisible: shape ? shape.isVisible() && shape.getAbsoluteOpacity() > 0 : false,
        rect,
        stroke: edges.map(([x, y]) => drawn(x, y)),
      }
    })
    let fromPrediction = null
    if (prediction) {
      const copy = as.addAnnotationFromPrediction(prediction)
      fromPrediction = { regions: copy.regions.length, result: copy.serializeAnnotation() }
    }
    return {
      shownIsPrediction: !!prediction && shown.id === prediction.id,
      predictions: as.predictions.length,
      natural: [image.naturalWidth, image.naturalHeight],
      stage: [image.stageWidth, image.stageHeight],
      canvas: [canvas.width, canvas.height],
      regions,
      serialized: shown.serializeAnnotation(),
      fromPrediction,
    }
  })
}

// Label Studio's serialised results against Kestrel's, matched by id.
function compareResults(what, expected, actual) {
  assert.equal(actual.length, expected.length, `${what}: ${actual.length} results, Kestrel wrote ${expected.length}`)
  for (const e of expected) {
    const a = actual.find((r) => r.id === e.id)
    assert.ok(a, `${what}: no result ${e.id}`)
    assert.deepEqual(a.value.rectanglelabels, e.value.rectanglelabels, `${what} ${e.id}: label`)
    assert.equal(a.from_name, e.from_name)
    assert.equal(a.to_name, e.to_name)
    assert.equal(a.original_width, e.original_width)
    assert.equal(a.original_height, e.original_height)
    for (const k of ['x', 'y', 'width', 'height']) {
      const d = Math.abs(a.value[k] - e.value[k])
      assert.ok(d <= PERCENT_TOL, `${what} ${e.id}: ${k} ${a.value[k]} vs Kestrel's ${e.value[k]} (off ${d} % of the image)`)
    }
  }
}

test("every task of Kestrel's pre-annotations renders in Label Studio with its boxes where Kestrel put them", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
  page.on('request', (r) => { if (!r.url().startsWith(`${base}/`) && !r.url().startsWith('data:')) external.push(r.url()) })
  page.on('pageerror', (e) => pageErrors.push(e.message))
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(m.text()) })
  let boxes = 0
  let maxPixelOff = 0
  let maxPercentOff = 0
  for (let t = 0; t < tasks.length; ++t) {
    const task = tasks[t]
    const image = predicted[t]
    const name = image.source.slice(src.length + 1)
    const what = `task ${t} (${name})`
    assert.equal(task.data.image, `/img/${name}`)
    const expected = task.predictions[0].result
    assert.equal(expected.length, image.detections.length, `${what}: Kestrel's task vs predict's boxes`)
    const shown = await renderTask(page, task)
    if (t === tasks.length - 1) await page.screenshot({ path: path.join(ARTIFACTS, 'label-studio.png') })
    assert.equal(shown.predictions, 1, `${what}: predictions in the store`)
    assert.ok(shown.shownIsPrediction, `${what}: the prediction is what Label Studio shows`)
    assert.deepEqual(shown.natural, [image.width, image.height], `${what}: the image Label Studio loaded`)
    // Every box a visible region.
    assert.equal(shown.regions.length, expected.length, `${what}: regions`)
    const [sw, sh] = shown.stage
    const sx = sw / image.width
    const sy = sh / image.height
    for (const r of shown.regions) {
      const e = expected.find((x) => x.id === r.id)
      assert.ok(e, `${what}: region ${r.id} is none of Kestrel's results`)
      const det = image.detections[Number(r.id.split('-')[1])]
      assert.ok(!r.hidden && r.shapeVisible, `${what} ${r.id}: hidden`)
      assert.ok(r.rect, `${what} ${r.id}: no shape drawn`)
      const { x, y, width, height } = r.rect
      assert.ok(x >= -0.5 && y >= -0.5 && x + width <= sw + 0.5 && y + height <= sh + 0.5 && width > 0 && height > 0,
        `${what} ${r.id}: shape ${JSON.stringify(r.rect)} outside the ${sw}x${sh} image`)
      // Kestrel's percent box and predict's pixel box (clipped), in stage pixels.
      const fromPercent = [e.value.x * sw / 100, e.value.y * sh / 100, (e.value.x + e.value.width) * sw / 100, (e.value.y + e.value.height) * sh / 100]
      const clip = (v, hi) => Math.min(Math.max(v, 0), hi)
      const [x1, y1, x2, y2] = det.box_xyxy
      const fromPixels = [clip(x1, image.width) * sx, clip(y1, image.height) * sy, clip(x2, image.width) * sx, clip(y2, image.height) * sy]
      const drawnBox = [x, y, x + width, y + height]
      for (const [source, want] of [['the task', fromPercent], ['predict', fromPixels]]) {
        for (let k = 0; k < 4; ++k) {
          const d = Math.abs(drawnBox[k] - want[k])
          maxPixelOff = Math.max(maxPixelOff, d)
          assert.ok(d <= 1, `${what} ${r.id}: drawn [${drawnBox.map((v) => v.toFixed(2))}] vs ${source}'s [${want.map((v) => v.toFixed(2))}] (stage px)`)
        }
      }
      assert.deepEqual(r.stroke, [true, true, true, true], `${what} ${r.id}: the canvas lacks the rectangle's stroke at an edge (top, bottom, left, right)`)
    }
    // The store's serialisation round-trips Kestrel's boxes.
    compareResults(`${what} prediction`, expected, shown.serialized)
    for (const e of expected) {
      const a = shown.serialized.find((r) => r.id === e.id)
      for (const k of ['x', 'y', 'width', 'height']) maxPercentOff = Math.max(maxPercentOff, Math.abs(a.value[k] - e.value[k]))
    }
    // The annotation an annotator starts from holds the same boxes (new ids).
    assert.equal(shown.fromPrediction.regions, expected.length, `${what}: regions of the annotation from the prediction`)
    const copied = shown.fromPrediction.result.map((r, i) => ({ ...r, id: expected[i] ? expected[i].id : r.id }))
    compareResults(`${what} annotation from the prediction`, expected, copied)
    boxes += expected.length
  }
  // The shapes model finds boxes on these images: the checks above ran on some.
  assert.ok(boxes >= tasks.length, `only ${boxes} boxes over ${tasks.length} images`)
  assert.deepEqual(external, [], 'requests that left the page origin')
  assert.deepEqual(pageErrors, [], 'errors in the page')
  console.log(`label studio: ${tasks.length} tasks, ${boxes} boxes; max off ${maxPercentOff.toExponential(2)} % of the image, ${maxPixelOff.toFixed(3)} stage px`)
  await page.close()
})
