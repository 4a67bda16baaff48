// "Try it in the browser" end to end (docs/server.md): the reference YOLOv8n
// trained on shapes (../shared/reference/val_parity) is registered, exported
// to ONNX by `kestrel export` (verified, recorded on the model), listed on
// its model page with its checks, then run in Debian's Chromium by
// onnxruntime-web (WASM) on a non-square JPEG; the boxes the page reports
// must be `kestrel predict model=X.onnx`'s on the same image: same count,
// same classes, IoU >= 0.99 each. No request may leave the server's origin
// (the .wasm included). Run by ctest (web.tryit) or by hand:
//   KESTREL_CLI=build/src/cli/kestrel KESTREL_WEB_DIST=build/web/dist \
//   KESTREL_WEB_MODULES=web/node_modules node tests/web/tryit.test.mjs
// Exits 77 (skipped) without chromium, web/node_modules, the reference
// fixture, or ONNX Runtime for the export's check (scripts/install-node-deps.sh).
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { iou } from '../../web/src/tryit/detect.js'

const here = path.dirname(fileURLToPath(import.meta.url))
const repo = path.resolve(here, '..', '..')
const CLI = process.env.KESTREL_CLI || path.join(repo, 'build/src/cli/kestrel')
const DIST = process.env.KESTREL_WEB_DIST || path.join(repo, 'build/web/dist')
const MODULES = process.env.KESTREL_WEB_MODULES || path.join(repo, 'web/node_modules')
const ARTIFACTS = process.env.KESTREL_WEB_ARTIFACTS || path.join(repo, 'build/tests/web/artifacts')
const CHROMIUM = process.env.KESTREL_CHROMIUM || '/usr/bin/chromium'
const REFERENCE = process.env.KESTREL_REFERENCE || path.resolve(repo, '..', 'shared', 'reference')
const PARITY = path.join(REFERENCE, 'val_parity')
const ORT_NODE = path.join(repo, 'tools', 'onnxruntime', 'node_modules', 'onnxruntime-node')

function skip(why) {
  console.log(`SKIP: ${why}`)
  process.exit(77)
}
if (!fs.existsSync(CHROMIUM)) skip(`no browser at ${CHROMIUM} (scripts/install-deps.sh installs Debian's chromium)`)
if (!fs.existsSync(path.join(MODULES, 'playwright-core'))) skip(`${MODULES}/playwright-core is not installed (scripts/build-web.sh)`)
if (!fs.existsSync(path.join(PARITY, 'yolov8n_shapes_p.safetensors'))) skip(`no reference model in ${PARITY}`)
if (!fs.existsSync(ORT_NODE)) skip('onnxruntime-node is not installed (scripts/install-node-deps.sh): exports cannot be verified')
const { chromium } = createRequire(path.join(MODULES, '..', 'package.json'))('playwright-core')

const WAIT = 30000
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kestrel-web-tryit-'))
const home = path.join(tmp, 'home')
const onnxPath = path.join(tmp, 'shapes.onnx')
let server = null
let base = ''
let context = null
let page = null
let token = ''
let exportId = ''
let image = '' // the test image
let predicted = null // predict's detections on it
const requests = []
const t0 = Date.now()

function kestrel(...args) {
  return execFileSync(CLI, ['--home', home, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000 })
}
const kestrelJson = (...args) => JSON.parse(kestrel('--json', ...args))

function startServer() {
  return new Promise((resolve, reject) => {
    const proc = spawn(CLI, ['--home', home, 'serve', '--port', '0', '--web-dir', DIST], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    const timer = setTimeout(() => reject(new Error(`kestrel serve did not start: ${out}${err}`)), WAIT)
    proc.stderr.on('data', (d) => (err += d))
    proc.stdout.on('data', (d) => {
      out += d
      const m = /^kestrel serve: listening on (http:\/\/\S+)\n/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve({ proc, url: m[1] })
      }
    })
    proc.on('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`kestrel serve exited ${code}: ${err}`))
    })
  })
}

// Pairs every predicted box with a page box of the same class at IoU >= 0.99
// (greedy, best IoU first); throws naming the first box that has none.
export function compareDetections(expected, actual, minIou = 0.99) {
  assert.equal(actual.length, expected.length, `count: page ${actual.length}, predict ${expected.length}`)
  const used = new Set()
  for (const e of expected) {
    let best = -1
    let bestIou = 0
    actual.forEach((a, k) => {
      if (used.has(k) || a.class_id !== e.class_id) return
      const v = iou(a.box_xyxy, e.box_xyxy)
      if (v > bestIou) {
        bestIou = v
        best = k
      }
    })
    assert.ok(
      best >= 0 && bestIou >= minIou,
      `predict's ${e.name} ${e.confidence.toFixed(3)} [${e.box_xyxy.map((v) => v.toFixed(1))}] has no page box of its class at IoU >= ${minIou} (best ${bestIou.toFixed(4)})`,
    )
    used.add(best)
  }
  return [...used].map((k, i) => iou(actual[k].box_xyxy, expected[i].box_xyxy))
}

before(async () => {
  assert.ok(fs.existsSync(CLI), `${CLI} is not built (scripts/build.sh)`)
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST} is not built (scripts/build-web.sh)`)
  fs.mkdirSync(home)
  kestrel('dataset', 'import', path.join(PARITY, 'square'), '--name', 'shapes')
  kestrel('models', 'register', path.join(PARITY, 'yolov8n_shapes_p.safetensors'), '--name', 'shapes', 'data=shapes')
  const exp = kestrelJson('export', 'model=shapes@v1', 'format=onnx', 'imgsz=320', `output=${onnxPath}`, 'verify_images=2')
  assert.equal(exp.verification.verified, true, JSON.stringify(exp.verification))
  exportId = exp.registry.export_id
  // The non-square images (noise-padded to 320x480, 416x320, ...): the one
  // predict finds the most boxes in.
  const all = kestrelJson('predict', `model=${onnxPath}`, `source=${path.join(PARITY, 'nonsquare', 'images', 'val')}`,
    `project=${tmp}`, 'name=predict')
  const best = all.images.reduce((a, b) => (b.detections.length > a.detections.length ? b : a))
  image = best.source
  predicted = kestrelJson('predict', `model=${onnxPath}`, `source=${image}`, `project=${tmp}`, 'name=one').images[0]
  assert.ok(predicted.detections.length >= 2, `predict found ${predicted.detections.length} boxes in ${image}`)
  assert.notEqual(predicted.width, predicted.height, 'the test image must be non-square (the letterbox pads it)')
  token = kestrelJson('token', 'create', '--name', 'tryit', '--read-only').token
  const s = await startServer()
  server = s.proc
  base = s.url
  context = await chromium.launchPersistentContext(path.join(tmp, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  page = context.pages()[0] || (await context.newPage())
  page.on('request', (r) => requests.push(r.url()))
  await page.addInitScript((t) => localStorage.setItem('kestrel.token', t), token)
  console.log(`fixture ready in ${((Date.now() - t0) / 1000).toFixed(1)} s (${image}, ${predicted.detections.length} boxes)`)
})

after(async () => {
  if (context) await context.close()
  if (server && server.exitCode === null) {
    server.removeAllListeners('exit')
    server.kill('SIGKILL')
  }
  fs.rmSync(tmp, { recursive: true, force: true })
})

test('the model page lists the export with its checks', async () => {
  await page.goto(`${base}/#/models/shapes@v1`)
  const short = exportId.slice(0, 12)
  await page.locator(`[data-testid="export-${short}"]`).waitFor({ timeout: WAIT })
  assert.equal((await page.locator(`[data-testid="export-verified-${short}"]`).innerText()).trim(), 'verified')
  const table = await page.locator('[data-testid="exports-table"]').innerText()
  assert.match(table, /imgsz=320/)
  assert.match(table, new RegExp(onnxPath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
  for (const runtime of ['opencv_dnn', 'onnxruntime']) {
    const check = page.locator(`[data-testid^="export-check-${short}-"]`, { hasText: new RegExp(runtime.split('_')[0], 'i') })
    assert.ok((await check.count()) >= 1, `no ${runtime} check row in: ${table}`)
  }
  assert.match(table, /passed/)
})

test('try it in the browser: onnxruntime-web draws predict\'s boxes', async () => {
  const short = exportId.slice(0, 12)
  const before = requests.length
  const tStart = Date.now()
  await page.locator(`[data-testid="export-try-${short}"]`).click()
  await page.locator('[data-testid="tryit"][data-state="ready"]').waitFor({ timeout: WAIT })
  await page.locator('[data-testid="tryit-file"]').setInputFiles(image)
  await page.locator('[data-testid="tryit"][data-state="done"]').waitFor({ timeout: WAIT })
  const shown = JSON.parse(await page.locator('[data-testid="tryit-result"]').getAttribute('data-detections'))
  const ious = compareDetections(predicted.detections, shown)
  console.log(
    `browser vs predict: ${shown.length} boxes, classes equal, min IoU ${Math.min(...ious).toFixed(6)}, ` +
      `${((Date.now() - tStart) / 1000).toFixed(1)} s from the click`,
  )
  // The canvas has the image's size and is drawn.
  const size = await page.locator('[data-testid="tryit-canvas"]').evaluate((c) => [c.width, c.height])
  assert.deepEqual(size, [predicted.width, predicted.height])
  fs.mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: path.join(ARTIFACTS, 'tryit.png'), fullPage: true })
  // Everything came from the server's origin; the .wasm from our assets.
  const made = requests.slice(before)
  const foreign = made.filter((u) => !u.startsWith(`${base}/`) && !u.startsWith('data:') && !u.startsWith('blob:'))
  assert.deepEqual(foreign, [], 'requests outside the server')
  assert.ok(made.some((u) => /\/assets\/ort-wasm-simd-threaded-[^/]*\.wasm$/.test(u)), made.join('\n'))
  assert.ok(made.some((u) => u.includes(`/api/models/shapes%40v1/exports/${exportId}/file`)), made.join('\n'))
  // The confidence slider filters as predict's conf= does: lower (more boxes,
  // more NMS work) and higher.
  const handle = page.locator('[data-testid="tryit-conf"] [role="slider"]')
  await handle.focus()
  for (const [conf, key, presses] of [[0.1, 'ArrowLeft', 15], [0.03, 'ArrowLeft', 7], [0.4, 'ArrowRight', 37]]) {
    for (let i = 0; i < presses; i++) await page.keyboard.press(key) // step 0.01
    assert.equal(Number(await handle.getAttribute('aria-valuenow')), conf)
    const want = kestrelJson('predict', `model=${onnxPath}`, `source=${image}`, `conf=${conf}`, `project=${tmp}`,
      `name=c${conf}`).images[0].detections
    await page.waitForFunction(
      (n) => JSON.parse(document.querySelector('[data-testid="tryit-result"]').dataset.detections).length === n,
      want.length,
      { timeout: WAIT },
    )
    const got = JSON.parse(await page.locator('[data-testid="tryit-result"]').getAttribute('data-detections'))
    const ious = compareDetections(want, got)
    console.log(`conf ${conf}: ${got.length} boxes equal predict's, min IoU ${Math.min(...ious).toFixed(6)}`)
  }
})

test('the comparison fails when a box moves or changes class', () => {
  const e = predicted.detections
  const moved = e.map((d, i) => (i === 0 ? { ...d, box_xyxy: d.box_xyxy.map((v, k) => v + (k % 2 === 0 ? 2 : 0)) } : d))
  assert.throws(() => compareDetections(e, moved), /no page box of its class/)
  const relabelled = e.map((d, i) => (i === 0 ? { ...d, class_id: (d.class_id + 1) % 3 } : d))
  assert.throws(() => compareDetections(e, relabelled), /no page box/)
  assert.throws(() => compareDetections(e, e.slice(1)), /count/)
})

test('timing', () => {
  console.log(`web.tryit total ${((Date.now() - t0) / 1000).toFixed(1)} s`)
})
