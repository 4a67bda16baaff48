// The Studies page over a LIVE study (issue 32): a real `kestrel serve`, a
// real store and a real `kestrel worker` running a small ASHA study, no mock.
// The study fine-tunes the reference shapes model (../shared/reference) for
// 2 epochs per trial on 16 of its images with imgsz as the only param, so
// every trial's fitness differs with imgsz and ASHA prunes
// at its rung (epoch 1): with seed 11 the random sampler's imgsz are 64,
// 160, 64, 128, ..., so two trials succeed (the history has a rising best)
// and trial 2 is pruned below trial 1. The worker has one trial
// slot and the study 2 in parallel, so a trial waits queued while another
// runs. Once the store holds a succeeded, a
// pruned, a running and a queued trial, the worker and its trainers are
// frozen (SIGSTOP): the page is then checked on a study that is mid-flight
// in the store, without racing the trials' next transitions - the four
// states in the trials table with each trial's job link, the optimisation
// history drawn from the succeeded trials' values, the pruned trial's curve
// dashed and ending at its rung. The page's screenshot:
// artifacts/study-live.png. ~20-30 s (the trials train for real).
//   KESTREL_CLI=build/src/cli/kestrel KESTREL_WEB_DIST=build/web/dist \
//   KESTREL_WEB_MODULES=web/node_modules node tests/web/studies_live.test.mjs
// Exits 77 (ctest: skipped) without chromium, web/node_modules or the
// reference model.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { CLI, DIST, ARTIFACTS, CHROMIUM, PARITY, skip, chromiumOrSkip, startKestrelServe } from './harness.mjs'

const WEIGHTS = path.join(PARITY, 'yolov8n_shapes_p.safetensors')

const chromium = chromiumOrSkip()
if (!fs.existsSync(WEIGHTS)) skip(`no reference model at ${WEIGHTS}`)

const WAIT = 15000
const STUDY_WAIT = 120000 // the trials train for real; a busy CI machine is slow
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kestrel-web-live-'))
const home = path.join(tmp, 'home')
let server = null
let worker = null
let base = ''
let browser = null
let page = null

const kestrel = (...args) => execFileSync(CLI, ['--home', home, ...args], { cwd: tmp, encoding: 'utf8' })
const kestrelJson = (...args) => JSON.parse(kestrel('--json', ...args))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function startServer() {
  return startKestrelServe({ home, args: ['--port', '0', '--public-read', '--web-dir', DIST], wait: WAIT })
}

// A detection dataset of the reference's shapes images: 16 train, 8 val.
function writeDataset(dir) {
  const src = path.join(PARITY, 'square')
  const stems = fs.readdirSync(path.join(src, 'images', 'val')).filter((f) => f.endsWith('.jpg')).map((f) => f.slice(0, -4)).sort()
  assert.ok(stems.length >= 24, `${src} has ${stems.length} images`)
  stems.slice(0, 24).forEach((stem, i) => {
    const split = i < 16 ? 'train' : 'val'
    for (const sub of [`images/${split}`, `labels/${split}`]) fs.mkdirSync(path.join(dir, sub), { recursive: true })
    fs.copyFileSync(path.join(src, 'images', 'val', `${stem}.jpg`), path.join(dir, 'images', split, `${stem}.jpg`))
    fs.copyFileSync(path.join(src, 'labels', 'val', `${stem}.txt`), path.join(dir, 'labels', split, `${stem}.txt`))
  })
  const names = fs.readFileSync(path.join(src, 'data.yaml'), 'utf8').split('names:')[1]
  fs.writeFileSync(path.join(dir, 'data.yaml'), `path: .\ntrain: images/train\nval: images/val\nnc: 3\nnames:${names}`)
}

// The worker's process and every descendant (the trainers may run in their
// own process groups), signalled parents first.
function signalTree(root, signal) {
  const children = new Map()
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (!children.has(ppid)) children.set(ppid, [])
      children.get(ppid).push(Number(entry))
    } catch {
      // exited while listed
    }
  }
  const todo = [root]
  while (todo.length > 0) {
    const pid = todo.shift()
    try {
      process.kill(pid, signal)
    } catch {
      // exited meanwhile
    }
    todo.push(...(children.get(pid) || []))
  }
}

const hasFourStates = (shown) => ['queued', 'running', 'succeeded', 'pruned'].every((s) => shown.trials.some((t) => t.state === s))

const byTest = (id) => page.locator(`[data-testid="${id}"]`)
const chartOption = (id) => page.evaluate((sel) => document.querySelector(sel).echart.getOption(), `[data-testid="${id}"]`)

before(async () => {
  assert.ok(fs.existsSync(CLI), `${CLI} is not built`)
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST} is not built (scripts/build-web.sh)`)
  fs.mkdirSync(home)
  writeDataset(path.join(tmp, 'shapes'))
  kestrel('dataset', 'import', path.join(tmp, 'shapes'), '--name', 'shapes')
  fs.writeFileSync(path.join(tmp, 'space.yaml'), 'imgsz: {low: 64, high: 160, step: 32}\n')
  const created = kestrelJson('tune', 'data=shapes', 'model=n', `pretrained=${WEIGHTS}`, 'batch=8', 'workers=1', 'threads=1',
    'plots=false', 'warmup_epochs=0', `space=${path.join(tmp, 'space.yaml')}`, 'trials=6', 'parallel=2', 'epochs=2',
    'sampler=random', 'pruner=asha', 'seed=11', 'name=live')
  assert.equal(created.created, true, JSON.stringify(created))
  const s = await startServer()
  server = s.proc
  base = s.url
  worker = spawn(CLI, ['--home', home, 'worker', '--slots', '2', '--poll-s', '0.1', '--heartbeat-s', '0.5'], { stdio: 'ignore' })
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] })
  page = await browser.newPage({ viewport: { width: 1280, height: 1000 } })
})

after(async () => {
  if (browser) await browser.close()
  if (worker && worker.exitCode === null) signalTree(worker.pid, 'SIGKILL')
  if (server && server.exitCode === null) server.kill('SIGKILL')
  fs.rmSync(tmp, { recursive: true, force: true })
})

test('a live study: queued, running, succeeded and pruned trials, the history drawn', async () => {
  // Wait in the store (not the page) for the four states at once, then
  // freeze the worker and its trainers (the trainer writes its own job's
  // events and state) and read the store again; thaw and retry if a trial
  // moved on in between.
  const deadline = Date.now() + STUDY_WAIT
  let shown = null
  for (;;) {
    assert.ok(Date.now() < deadline, `the study never had all four states at once: ${JSON.stringify(shown && shown.trials.map((t) => t.state))}`)
    shown = kestrelJson('tune', 'show', 'live')
    assert.notEqual(shown.study.state, 'finished', 'the study finished before it showed all four states')
    if (!hasFourStates(shown)) {
      await sleep(100)
      continue
    }
    signalTree(worker.pid, 'SIGSTOP')
    shown = kestrelJson('tune', 'show', 'live') // what the store holds while frozen
    if (hasFourStates(shown)) break
    signalTree(worker.pid, 'SIGCONT')
  }

  await page.goto(`${base}/#/studies`)
  await byTest('study-link-live').click()
  await byTest('trials-table').waitFor({ timeout: WAIT })
  const last = shown.trials[shown.trials.length - 1].number
  await byTest(`trial-state-${last}`).waitFor({ timeout: WAIT })
  for (const t of shown.trials) {
    assert.equal(await byTest(`trial-state-${t.number}`).innerText(), t.state, `trial ${t.number}`)
    assert.equal(await byTest(`trial-link-${t.number}`).getAttribute('href'), `#/jobs/${t.job_id}`)
  }
  assert.equal(await byTest('study-state').innerText(), 'running')
  const table = (await byTest('trials-table').innerText()).replace(/\s+/g, ' ')
  assert.match(table, /# State imgsz fitness Epochs/)
  const pruned = shown.trials.find((t) => t.state === 'pruned')
  assert.match(table, new RegExp(`${pruned.number} pruned ${pruned.params.imgsz} — \\d+ \\(pruned at 1\\)`))

  // The history: one point per succeeded trial, at its value, and the best so far.
  const succeeded = shown.trials.filter((t) => t.state === 'succeeded')
  const history = await chartOption('study-history')
  assert.deepEqual(history.series[0].data.map((p) => p.value), succeeded.map((t) => [t.number, t.value]))
  assert.ok(succeeded.length >= 2, `${succeeded.length} succeeded trials`)
  const best = Math.max(...succeeded.map((t) => t.value))
  assert.ok(best > 0, 'the fine-tuned model has a non-zero fitness')
  assert.equal(history.series[1].data[history.series[1].data.length - 1][1], best)
  assert.match(await byTest('study-best').innerText(), new RegExp(best.toFixed(4)))
  // The pruned trial's curve stops at its rung (epoch 1), dashed.
  const curves = await chartOption('study-curves')
  const curve = curves.series.find((s) => s.name === `trial ${pruned.number}`)
  assert.equal(curve.data.length, 1)
  assert.equal(curve.lineStyle.type, 'dashed')

  fs.mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: path.join(ARTIFACTS, 'study-live.png'), fullPage: true })
})
