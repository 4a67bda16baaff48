// Runs a tracker user can read and tell apart (issue 33 findings 4, 7, 10),
// in a real browser: Debian's Chromium driven by playwright-core against
// `kestrel serve` on a temporary home with the shapes dataset and two
// queued jobs (no trainer runs: what a trainer would write is written by the
// test: an attempt's log file; a running job's progress by a mock of the
// metrics route, as ui.test.mjs does).
//   - names, tags, notes: the CLI's `jobs rename|tag|note`, the jobs table's
//     Name / Progress / Best mAP / Duration columns and its search, the job
//     page's rename and tag editor; /favicon.ico served;
//   - the console tab: the attempt's log, then lines appended to the file
//     appear without a reload and without a second request (the server
//     streams them), and the search counts matching lines;
//   - the submit dialog (finding 9): clone with changes fills it with the
//     job's keys as typed, each row shows its key's type and default, all
//     keys are listed, and a 401 under it goes once a token is saved;
//   - the home page: the running job with progress, ETA and mAP, what
//     finished, the breaker and disk; the job page links the dataset as
//     "shapes v1" and a succeeded job its model with mAP and duration, and
//     the charts start above the fold at 1280x800.
//   KESTREL_CLI=build/src/cli/kestrel KESTREL_WEB_DIST=build/web/dist \
//   KESTREL_WEB_MODULES=web/node_modules node tests/web/runs.test.mjs
// Exits 77 (ctest: skipped) without chromium or web/node_modules.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { CLI, DIST, ARTIFACTS, CHROMIUM, chromiumOrSkip, startKestrelServe } from './harness.mjs'

const chromium = chromiumOrSkip()

const WAIT = 15000
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kestrel-web-runs-'))
const home = path.join(tmp, 'home')
let server = null
let base = ''
let browser = null
let page = null
let a = 0 // job ids
let b = 0
let writer = ''
const requests = []

const kestrel = (...args) => execFileSync(CLI, ['--home', home, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
const kestrelJson = (...args) => JSON.parse(kestrel('--json', ...args))

function startServer() {
  return startKestrelServe({ home, args: ['--port', '0', '--public-read', '--web-dir', DIST], wait: WAIT })
}

const byTest = (id) => page.locator(`[data-testid="${id}"]`)
// An Element Plus input's <input>: the test id lands on the input itself (el-input) or on its wrapper.
const inputOf = (id) => page.locator(`input[data-testid="${id}"], [data-testid="${id}"] input`).first()
const textOf = async (id) => (await byTest(id).first().innerText()).trim()
async function waitFor(what, fn, ...args) {
  await page.waitForFunction(fn, ...args, { timeout: WAIT }).catch((e) => assert.fail(`${what}: ${e.message}`))
}
const waitContains = (id, want) =>
  waitFor(`${id} contains ${want}`, ([sel, w]) => document.querySelector(sel)?.textContent.includes(w), [`[data-testid="${id}"]`, want])
async function shot(name) {
  fs.mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: false })
}

before(async () => {
  assert.ok(fs.existsSync(CLI), `${CLI} is not built`)
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST} is not built (scripts/build-web.sh)`)
  fs.mkdirSync(home)
  kestrel('dataset', 'synth', path.join(tmp, 'synth'), '--images', '4', '--classes', '2', '--imgsz', '64')
  kestrel('dataset', 'import', path.join(tmp, 'synth'), '--name', 'shapes')
  a = kestrelJson('submit', 'data=shapes', 'model=n', 'epochs=3', 'imgsz=64').job_id
  b = kestrelJson('submit', 'data=shapes', 'model=n', 'epochs=2', 'imgsz=64').job_id
  writer = kestrelJson('token', 'create', '--name', 'web-runs').token
  const s = await startServer()
  server = s.proc
  base = s.url
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] })
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
  await context.addInitScript((t) => localStorage.setItem('kestrel.token', t), writer)
  page = await context.newPage()
  page.on('request', (r) => requests.push(r.url()))
})

after(async () => {
  if (browser) await browser.close()
  if (server) server.kill('SIGTERM')
  fs.rmSync(tmp, { recursive: true, force: true })
})

test('names, tags and notes: the CLI, the jobs table columns and search, the job page editor, the favicon', async () => {
  // The CLI (kestrel jobs rename|tag|note) and the default name from data, model and epochs.
  assert.equal(kestrelJson('jobs', 'rename', String(a), 'tiny run').job.name, 'tiny run')
  assert.deepEqual(kestrelJson('jobs', 'tag', String(b), 'baseline', 'lr-sweep').job.tags, ['baseline', 'lr-sweep'])
  assert.deepEqual(kestrelJson('jobs', 'tag', String(b), '--remove', 'lr-sweep').job.tags, ['baseline'])
  assert.equal(kestrelJson('jobs', 'note', String(b), 'mosaic off\nlr0 0.02').job.note, 'mosaic off\nlr0 0.02')
  assert.throws(() => kestrel('jobs', 'tag', String(b), 'has space'), /tags/)

  await page.goto(`${base}/#/jobs`)
  await waitContains(`job-name-${a}`, 'tiny run')
  assert.match(await textOf(`job-name-${b}`), /shapes v1 · n · 2 epochs\s*baseline/)
  const headers = await page.locator('[data-testid="jobs-table"] th').allInnerTexts()
  for (const h of ['Name', 'Progress', 'Best mAP', 'Duration']) assert.ok(headers.includes(h), `${h} in ${headers}`)
  assert.equal(await textOf(`job-map-${a}`), '—')
  await shot('runs-jobs-table')
  // Search: by tag, then by a word of the note.
  await inputOf('job-search').fill('baseline')
  await page.waitForURL(/search=baseline/, { timeout: WAIT })
  await waitFor('only b listed', (id) => !document.querySelector(`[data-testid="job-row-${id}"]`), a)
  await byTest(`job-row-${b}`).waitFor({ timeout: WAIT })
  assert.match(page.url(), /search=baseline/)
  await inputOf('job-search').fill('LR0 0.02')
  await page.waitForURL(/search=LR0/, { timeout: WAIT })
  await byTest(`job-row-${b}`).waitFor({ timeout: WAIT })
  assert.equal(await byTest(`job-row-${a}`).count(), 0)

  // The job page: rename and tag in place; the CLI sees the change.
  await page.goto(`${base}/#/jobs/${a}`)
  await waitContains('run-name', 'tiny run')
  await byTest('run-rename').click()
  await inputOf('run-name-input').fill('renamed in the UI')
  await byTest('run-name-save').click()
  await waitContains('run-name', 'renamed in the UI')
  await inputOf('run-tag-input').fill('from-ui')
  await inputOf('run-tag-input').press('Enter')
  await byTest('run-tag-from-ui').waitFor({ timeout: WAIT })
  await inputOf('run-tag-input').fill('bad tag')
  await inputOf('run-tag-input').press('Enter')
  await waitContains('run-labels-error', 'tag')
  const found = kestrelJson('jobs', 'list', '--search', 'from-ui').jobs
  assert.deepEqual(found.map((j) => [j.id, j.name]), [[a, 'renamed in the UI']])

  const icon = await fetch(`${base}/favicon.ico`)
  assert.equal(icon.status, 200)
  assert.equal(icon.headers.get('content-type'), 'image/x-icon')
})

test('console tab: the attempt log, followed live over the stream, searchable', async () => {
  const dir = path.join(home, 'jobs', String(a))
  fs.mkdirSync(dir, { recursive: true })
  const log = path.join(dir, 'attempt-1.log')
  const table = [
    '      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size',
    '        1/3         0G      2.114      3.871      1.902         12         64: 100%|##########| 2/2',
    '                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95)',
    '                   all          4         12     0.0113      0.417     0.0301    0.00912',
  ]
  fs.writeFileSync(log, table.join('\n') + '\n')
  // The job page opens afresh below. The jobs list must render first: two hash
  // changes in one tick leave the job page (and its open stream) mounted.
  await page.goto(`${base}/#/jobs`)
  await byTest('jobs-table').waitFor({ timeout: WAIT })
  const before = requests.length
  await page.goto(`${base}/#/jobs/${a}`)
  await waitContains('console-lines', 'mAP50-95)')
  await waitContains('console-status', 'live')
  // The trainer writes on: the open page shows it without a reload.
  fs.appendFileSync(log, '        2/3         0G      1.822      3.105      1.711         12         64: 100%|##########| 2/2\n')
  await waitContains('console-lines', '1.822')
  await waitContains('console-count', '5 lines')
  const logRequests = requests.slice(before).filter((u) => u.includes(`/api/jobs/${a}/log`))
  assert.equal(logRequests.length, 1, `one stream, no polling: ${logRequests}`)
  // Columns stay aligned: one line per row, no wrapping.
  const rows = await page.locator('[data-testid="console-lines"] .console-line').count()
  assert.equal(rows, 5)
  await inputOf('console-search').fill('map50')
  await waitContains('console-count', '1 of 5 lines match')
  await shot('runs-console')
})

test('home page and job links: running progress, finished runs, breaker and disk; dataset and model links; charts above the fold', async () => {
  // Job b runs (as a worker would report it): its list row and progress come from mocks of the store's answers.
  kestrel('jobs', 'cancel', String(a))
  const running = kestrelJson('jobs', 'list', '--state', 'queued')
  const row = { ...running.jobs.find((j) => j.id === b), state: 'running' }
  await page.route(/\/api\/jobs\?state=running/, (route) =>
    route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ ok: true, jobs: [row], total: 1, next_cursor: null, next_offset: null }) }),
  )
  await page.route(new RegExp(`/api/jobs/${b}/metrics\\?`), (route) =>
    route.fulfill({
      status: 200,
      contentType: 'application/json',
      body: JSON.stringify({
        ok: true, job_id: b, names: [{ name: 'metrics/mAP50-95(B)', x: 'epoch' }],
        series: [{ name: 'metrics/mAP50-95(B)', x: 'epoch', points: 1, downsampled: false, data: [[1, 0.1234]] }],
        progress: { epoch: 2, epochs: 2, batch: 1, batches: 2, eta_s: 42 }, last_event_id: 0, event_count: 0,
      }),
    }),
  )
  await page.goto(`${base}/#/`)
  await waitContains(`home-run-facts-${b}`, 'epoch 2 / 2')
  assert.match(await textOf(`home-run-facts-${b}`), /ETA 42 s/)
  assert.match(await textOf(`home-run-map-${b}`), /0\.123 \(epoch 1\)/)
  assert.match(await textOf(`home-run-link-${b}`), /shapes v1 · n · 2 epochs/)
  await waitContains('home-finished', 'renamed in the UI')
  assert.match(await textOf('home-finished'), /cancelled/)
  await waitContains('home-breaker-state', 'closed')
  await waitContains('home-disk-state', 'ok')
  assert.match(await textOf('home-finished'), /cancelled\s+shapes v1\s+—\s+—/) // never ran: no duration
  await page.waitForTimeout(700) // the progress bar's width transition (0.6 s), for the screenshot
  await shot('runs-home')
  await page.unrouteAll()

  // A job's page links its dataset as the registry names it (the real route).
  await page.goto(`${base}/#/jobs/${b}`)
  await waitContains('job-dataset-link', 'shapes v1')
  assert.equal(await byTest('job-dataset-link').getAttribute('href'), '#/datasets/shapes')
  // Charts above the fold at 1280x800.
  await byTest('training-charts').waitFor({ timeout: WAIT })
  const box = await byTest('training-charts').boundingBox()
  assert.ok(box && box.y < 400, `charts start at ${box && box.y}px`)
  await shot('runs-job-page')

  // A succeeded job (the route's document as a trained job's): its model with mAP and the time it took.
  const doc = await (await fetch(`${base}/api/jobs/${b}`)).json()
  doc.job.state = 'succeeded'
  doc.job.finished_ms = doc.job.created_ms + 95000
  doc.job.result = { best: { map50_95: 0.4567 }, epochs: [{ seconds: 30 }, { seconds: 31 }] }
  doc.model = { id: 'ab'.repeat(32), name: 'shapes', version: 'v3', map50: 0.71, map50_95: 0.4567 }
  await page.route(new RegExp(`/api/jobs/${b}$`), (route) => route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(doc) }))
  await page.reload()
  await waitContains('job-model', 'shapes v3')
  assert.equal(await byTest('job-model-link').getAttribute('href'), `#/models/${'ab'.repeat(32)}`)
  assert.equal(await textOf('job-model-map'), '0.457')
  assert.match(await textOf('job-duration'), /took 1 min 1 s/)
  await page.unrouteAll()
})

test('clone with changes: the dialog holds the job\'s keys; a 401 under it clears once a token is saved', async () => {
  await page.goto(`${base}/#/jobs/${b}`)
  await waitContains('run-name', 'shapes v1')
  // Drop the token (the settings dialog's Clear): the submit below is refused with 401.
  await byTest('settings-button').click()
  await byTest('token-clear').click()
  await byTest('job-clone').click()
  await byTest('submit-dialog').waitFor({ timeout: WAIT })
  // The rows' inputs in order (submit-key-0, submit-key-1, ...).
  const cells = (prefix) =>
    page.evaluate(
      (p) =>
        [...document.querySelectorAll(`[data-testid^="${p}"]`)]
          .filter((el) => new RegExp(`^${p}\\d+$`).test(el.dataset.testid))
          .map((el) => (el.tagName === 'INPUT' ? el : el.querySelector('input')).value),
      prefix,
    )
  await waitFor('the clone dialog holds the keys', () => document.querySelectorAll('[data-testid="submit-key-3"]').length > 0)
  const keys = await cells('submit-key-')
  const values = await cells('submit-value-')
  const typed = Object.fromEntries(keys.map((k, i) => [k, values[i]]))
  assert.equal(typed.epochs, '2')
  assert.equal(typed.model, 'n')
  assert.equal(typed.imgsz, '64')
  // The key list: each row's type, range and default under it; every key of the kind in a table.
  assert.match(await textOf(`submit-hint-${keys.indexOf('epochs')}`), /^int .*default \d+/)
  await page.locator('[data-testid="submit-key-list"] .el-collapse-item__header').click()
  await inputOf('submit-key-filter').fill('lr0')
  await waitContains('submit-key-table', 'lr0')
  assert.match(await textOf('submit-key-table'), /float/)
  await inputOf(`submit-value-${keys.indexOf('epochs')}`).fill('5')
  await byTest('submit-send').click()
  await waitContains('submit-error', 'Authorization')
  await byTest('token-needed').waitFor({ timeout: WAIT })
  await inputOf('token-input').fill(writer)
  await byTest('token-save').click()
  await waitFor('the 401 under the dialog is gone', () => !document.querySelector('[data-testid="submit-error"]'))
  await byTest('submit-send').click()
  await waitContains('submit-result', 'Submitted')
  await shot('runs-clone')
  const jobs = kestrelJson('jobs', 'list', '--search', '5 epochs').jobs
  assert.equal(jobs.length, 1)
  assert.equal(jobs[0].name, 'shapes v1 · n · 5 epochs')
})
