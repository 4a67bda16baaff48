// The web UI in a real browser: Debian's Chromium driven by playwright-core
// against `kestrel serve` (port 0) on a temporary KESTREL_HOME. Run by
// ctest (web.ui) or by hand:
//   KESTREL_CLI=build/src/cli/kestrel KESTREL_WEB_DIST=build/web/dist \
//   KESTREL_WEB_MODULES=web/node_modules node tests/web/ui.test.mjs
// Exits 77 (ctest: skipped) only when chromium or web/node_modules is
// absent. Screenshots go to KESTREL_WEB_ARTIFACTS.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { repo, CLI, DIST, MODULES, ARTIFACTS, CHROMIUM, chromiumOrSkip, startKestrelServe } from './harness.mjs'

const chromium = chromiumOrSkip()

const WAIT = 15000
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kestrel-web-ui-'))
const home = path.join(tmp, 'home')
let server = null
let port = 0
let base = ''
let context = null
let page = null
const requests = [] // every request the page made: { url, headers }
const cspViolations = [] // console messages of the page about its Content-Security-Policy

function kestrel(...args) {
  return execFileSync(CLI, ['--home', home, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}
const kestrelJson = (...args) => JSON.parse(kestrel('--json', ...args))
function kestrelOk(...args) {
  try {
    kestrel(...args)
    return true
  } catch {
    return false
  }
}
// With API tokens (`kestrel token`), the UI must get a 401, ask for a token
// and send it; a server without them ignores the header.
let auth = false
let token = 'tok-not-checked'

// Starts `kestrel serve` and resolves when its first stdout line names the URL.
function startServer(onPort, webArgs = ['--web-dir', DIST]) {
  return startKestrelServe({ home, args: ['--port', String(onPort), ...webArgs], wait: WAIT })
}

function killServer() {
  return new Promise((resolve) => {
    if (!server || server.exitCode !== null) return resolve()
    server.removeAllListeners('exit')
    server.once('exit', () => resolve())
    server.kill('SIGKILL')
  })
}

async function shot(name) {
  fs.mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true })
}

const byTest = (id) => page.locator(`[data-testid="${id}"]`)
async function textOf(id) {
  return (await byTest(id).first().innerText()).trim()
}
async function waitText(id, expected) {
  await page.waitForFunction(
    ([sel, want]) => {
      const el = document.querySelector(sel)
      return el && el.textContent.trim() === want
    },
    [`[data-testid="${id}"]`, expected],
    { timeout: WAIT },
  )
}

before(async () => {
  assert.ok(fs.existsSync(CLI), `${CLI} is not built (scripts/build.sh)`)
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST} is not built (scripts/build-web.sh)`)
  fs.mkdirSync(home)
  kestrel('dataset', 'synth', path.join(tmp, 'synth'), '--images', '8', '--classes', '2', '--imgsz', '64')
  // One box past the right edge: a label.out_of_bounds finding about an image (the gallery test).
  const labels = path.join(tmp, 'synth', 'labels', 'train')
  fs.appendFileSync(path.join(labels, fs.readdirSync(labels).sort()[0]), '1 0.95 0.5 0.3 0.2\n')
  kestrel('dataset', 'import', path.join(tmp, 'synth'), '--name', 'shapes')
  auth = kestrelOk('token', '--help')
  if (auth) token = kestrelJson('token', 'create', '--name', 'web-ui', '--read-only').token
  const s = await startServer(0)
  server = s.proc
  base = s.url
  port = Number(new URL(base).port)
  context = await chromium.launchPersistentContext(path.join(tmp, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
  page = context.pages()[0] || (await context.newPage())
  page.on('request', (r) => requests.push({ url: r.url(), headers: r.headers() }))
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text())
  })
})

after(async () => {
  if (context) await context.close()
  await killServer()
  fs.rmSync(tmp, { recursive: true, force: true })
})

test('the server serves the UI with its content types and keeps /api 404s', async () => {
  const index = await fetch(`${base}/`)
  assert.equal(index.status, 200)
  assert.equal(index.headers.get('content-type'), 'text/html; charset=utf-8')
  // docs/server.md "Security headers": the UI's policy allows index.html's
  // inline script by its hash, and nothing inline else.
  const csp = index.headers.get('content-security-policy') || ''
  assert.match(csp, /script-src 'self' 'wasm-unsafe-eval' 'sha256-[A-Za-z0-9+/]+=*'/)
  assert.match(csp, /frame-ancestors 'none'/)
  assert.equal(index.headers.get('x-content-type-options'), 'nosniff')
  assert.equal(index.headers.get('x-frame-options'), 'DENY')
  const html = await index.text()
  const js = /src="(\/assets\/[^"]+\.js)"/.exec(html)
  assert.ok(js, html)
  const asset = await fetch(`${base}${js[1]}`)
  assert.equal(asset.status, 200)
  assert.equal(asset.headers.get('content-type'), 'text/javascript; charset=utf-8')
  assert.equal((await fetch(`${base}/api/nothing`)).status, 404)
  assert.equal((await fetch(`${base}/%2e%2e/%2e%2e/etc/passwd`)).status, 404)
})

test('serve: the build tree\'s web/dist by default; a --web-dir without index.html is an error', async () => {
  if (path.resolve(DIST) === path.resolve(path.dirname(CLI), '..', '..', 'web', 'dist')) {
    const s = await startServer(0, [])
    try {
      const r = await fetch(`${s.url}/`)
      assert.equal(r.status, 200)
      assert.match(await r.text(), /<div id="app">/)
    } finally {
      s.proc.removeAllListeners('exit')
      s.proc.kill('SIGKILL')
    }
  }
  let failed = null
  try {
    execFileSync(CLI, ['--home', home, 'serve', '--port', '0', '--web-dir', path.join(tmp, 'nope')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: WAIT,
    })
  } catch (e) {
    failed = e
  }
  assert.ok(failed, 'serve started without its web directory')
  assert.equal(failed.status, 1)
  assert.match(failed.stderr, /web UI directory '.*nope' does not exist/)
})

let jobId = 0
let tokenFrom = Infinity // requests from here on must carry the token

test('token: a 401 opens the dialog; the token is kept and sent on every request', async () => {
  if (!auth) {
    // This server has no tokens: answer as one that wants them would.
    await page.route('**/api/datasets', (route) =>
      route.fulfill({
        status: 401,
        contentType: 'application/json',
        body: JSON.stringify({ ok: false, error: { code: 'unauthenticated', message: 'no token' } }),
      }),
    )
  }
  await page.goto(`${base}/#/datasets`)
  await byTest('token-needed').waitFor({ state: 'visible', timeout: WAIT })
  await shot('token')
  if (!auth) await page.unroute('**/api/datasets')
  await page.locator('input[data-testid="token-input"], [data-testid="token-input"] input').first().fill(token)
  tokenFrom = requests.length
  await byTest('token-save').click()
  await byTest('dataset-link-shapes').waitFor({ timeout: WAIT })
  assert.equal(await page.evaluate(() => localStorage.getItem('kestrel.token')), token)
  assert.equal(await byTest('token-needed').count(), 0)
})

test('datasets: the imported dataset with its counts, class chart and findings', async () => {
  const show = kestrelJson('dataset', 'show', 'shapes')
  await page.goto(`${base}/#/datasets`)
  await byTest('dataset-link-shapes').waitFor({ timeout: WAIT })
  const row = await page.locator('[data-testid="datasets-table"] tr', { hasText: 'shapes' }).first().innerText()
  assert.match(row, new RegExp(`\\b${show.version.num_images}\\b`))
  await shot('datasets')
  await byTest('dataset-link-shapes').click()
  await waitText('count-images', String(show.version.num_images))
  assert.equal(await textOf('count-boxes'), String(show.version.num_boxes))
  assert.equal(await textOf('count-classes'), '2')
  assert.equal(await textOf('dataset-title'), 'shapes@v1')
  // How the version's images are stored (data_mode: copy or reference).
  assert.equal(await textOf('data-mode'), show.version.data_mode)
  // The class histogram is drawn (a canvas with pixels, not an empty box).
  const canvas = page.locator('[data-testid="class-chart"] canvas')
  await canvas.waitFor({ timeout: WAIT })
  const box = await canvas.boundingBox()
  assert.ok(box.width > 200 && box.height > 100, JSON.stringify(box))
  const findings = await textOf('findings-summary')
  assert.match(findings, new RegExp(`${show.report.errors} errors`))
  assert.match(findings, new RegExp(`${show.report.infos} infos`))
  // The table reads the findings route (server-side filters), ten to a page.
  await page.waitForFunction(
    (n) => document.querySelectorAll('[data-testid="findings-table"] tbody tr').length === n,
    Math.min(10, show.report.findings.length),
    { timeout: WAIT },
  )

  // Box statistics (issue 33 finding 8), drawn from the server's box_stats:
  // the centre density equals this test's own binning of every box the
  // images route lists; the image-size and boxes-per-image charts count
  // every image.
  const all = await (await fetch(`${base}/api/datasets/shapes@v1/images?limit=200`, { headers: { Authorization: `Bearer ${token}` } })).json()
  const bin = (v) => Math.max(0, Math.min(19, Math.floor(v * 20)))
  const want = {}
  for (const im of all.images) for (const b of im.boxes) want[`${bin(b.cx)},${bin(b.cy)}`] = (want[`${bin(b.cx)},${bin(b.cy)}`] || 0) + 1
  const series = (id) => page.evaluate((sel) => document.querySelector(sel)?.echart?.getOption().series.map((x) => x.data), `[data-testid="${id}"]`)
  await page.waitForFunction(() => document.querySelector('[data-testid="image-size-chart"]')?.echart, null, { timeout: WAIT })
  const got = Object.fromEntries((await series('box-center-chart'))[0].map(([x, y, n]) => [`${x},${y}`, n]))
  assert.deepEqual(got, want)
  const total = (rows) => rows.reduce((a, b) => a + b, 0)
  assert.equal(total((await series('image-size-chart'))[0]), show.version.num_images)
  assert.equal(total((await series('boxes-per-image-chart'))[0]), show.version.num_images)
  assert.equal(total((await series('box-aspect-chart'))[0]) + show.box_stats.degenerate, show.version.num_boxes)
  const [widths, heights] = await series('box-side-chart')
  assert.equal(total(widths), show.version.num_boxes)
  assert.equal(total(heights), show.version.num_boxes)
  assert.equal(total((await series('box-size-chart'))[0].map((c) => c[2])), show.version.num_boxes)
  // The classes table: each class's boxes over every split, as the summary counts them.
  const classRows = await page.locator('[data-testid="class-table"] tbody tr').allInnerTexts()
  assert.deepEqual(
    classRows.map((r) => r.split('\t').slice(0, 2).map((c) => c.trim())),
    show.summary.classes.map((c) => [c.name, String(c.train + c.val + c.test)]),
  )
  await shot('dataset')

  // 250 findings on one long path (the findings route mocked): ten rows a
  // page, so the gallery is not pushed ~2,400 px down; Next pages on the
  // server; the path wraps after separators, never inside a name.
  const long = `images/train/${'a_rather_long_folder-name_of_many_words/'.repeat(3)}IMG_20240101_123456789_final.jpg`
  const mock = (route) => {
    const q = new URL(route.request().url()).searchParams
    const [limit, offset, n] = [Number(q.get('limit')), Number(q.get('offset') || 0), 250]
    const findings = []
    for (let i = offset; i < Math.min(n, offset + limit); i++) {
      findings.push({ severity: 'warning', check: 'label.tiny_box', file: long, line: i + 1, field: 'w', message: `finding ${i}`, action: 'kept', image: null })
    }
    route.fulfill({ json: { ok: true, checks: ['label.tiny_box'], total: n, offset, limit, next_offset: offset + limit < n ? offset + limit : null, findings } })
  }
  const isFindings = (url) => url.pathname.endsWith('/findings')
  await page.route(isFindings, mock)
  await page.reload()
  await waitText('findings-range', '1–10 of 250 listed')
  assert.equal(await page.locator('[data-testid="findings-table"] tbody tr').count(), 10)
  const table = await byTest('findings-table').boundingBox()
  assert.ok(table.height <= 560, `the findings table is ${table.height} px tall`)
  await byTest('findings-next').click()
  await waitText('findings-range', '11–20 of 250 listed')
  const chars = await byTest('finding-where').first().evaluate((el) => {
    const out = []
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT)
    for (let t = walk.nextNode(); t; t = walk.nextNode()) {
      for (let i = 0; i < t.data.length; i++) {
        const r = document.createRange()
        r.setStart(t, i)
        r.setEnd(t, i + 1)
        out.push([t.data[i], Math.round(r.getClientRects()[0]?.top ?? -1)])
      }
    }
    return out
  })
  assert.equal(chars.map((c) => c[0]).join(''), `${long}:11 (w)`)
  assert.ok(new Set(chars.map((c) => c[1])).size > 1, 'the path is long enough to wrap')
  // A name is a run of characters that are not separators; each sits on one line.
  let word = []
  for (const [ch, top] of [...chars, ['/', null]]) {
    if (/[/\\_.\- ]/.test(ch)) {
      assert.ok(new Set(word.map((c) => c[1])).size <= 1, `"${word.map((c) => c[0]).join('')}" wraps inside`)
      word = []
    } else {
      word.push([ch, top])
    }
  }
  await shot('dataset-findings-paged')
  await page.unroute(isFindings, mock)
  await page.reload()
  await waitText('dataset-title', 'shapes@v1')
})

test('dataset gallery: boxes drawn, class filter, the box viewer from a finding and the keyboard', async () => {
  // The dataset page is open (the test before).
  const api = async (p) => (await fetch(`${base}${p}`, { headers: { Authorization: `Bearer ${token}` } })).json()
  const all = await api('/api/datasets/shapes@v1/images?limit=200')
  const thumbs = page.locator('[data-testid="gallery-item"] img')
  await thumbs.nth(all.images.length - 1).waitFor({ timeout: WAIT })
  assert.equal(await byTest('gallery-item').count(), all.images.length)
  const drawn = page.locator('[data-testid="gallery"] [data-testid="box"]')
  assert.equal(await drawn.count(), all.images.reduce((n, im) => n + im.boxes.length, 0))
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="gallery-item"] img')].every((i) => i.complete && i.naturalWidth === 64), null, { timeout: WAIT })
  await shot('gallery')
  // The class legend above the gallery: each class's swatch is the colour its boxes are drawn in.
  const legend = await byTest('gallery-legend').locator('li').evaluateAll((lis) =>
    lis.map((li) => ({ color: li.dataset.color, swatch: getComputedStyle(li.querySelector('.swatch')).backgroundColor, name: li.innerText.trim() })),
  )
  assert.deepEqual(legend.map((l) => l.name), ['circle', 'rectangle'])
  const rgb = (hex) => `rgb(${[1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)).join(', ')})`
  for (const l of legend) assert.equal(l.swatch, rgb(l.color))
  const strokes = await drawn.evaluateAll((rs) => rs.map((r) => [Number(r.dataset.cls), r.getAttribute('stroke')]))
  assert.ok(new Set(strokes.map((s) => s[0])).size === 2, JSON.stringify(strokes))
  for (const [cls, stroke] of strokes) assert.equal(stroke, legend[cls].color, `class ${cls}`)

  // Class filter: only images with a circle, as the API counts them.
  const circles = await api('/api/datasets/shapes@v1/images?limit=200&class=circle')
  assert.ok(circles.total > 0 && circles.total < all.total, `${circles.total} of ${all.total}`)
  await byTest('gallery-class').click()
  await byTest('gallery-class-circle').click()
  await waitText('gallery-range', `1–${circles.images.length} of ${circles.total}`)
  assert.equal(await byTest('gallery-item').count(), circles.images.length)
  const classes = await byTest('gallery-item').evaluateAll((items) =>
    items.map((it) => [...it.querySelectorAll('[data-testid="box"]')].map((b) => b.getAttribute('data-cls'))),
  )
  assert.ok(classes.every((c) => c.includes('0')), JSON.stringify(classes))

  // A finding, filtered by check, opens the viewer on its image with its boxes.
  const oob = (await api('/api/datasets/shapes@v1/findings?check=label.out_of_bounds')).findings
  assert.equal(oob.length, 1)
  const target = oob[0].image
  await byTest('findings-check').click()
  await byTest('findings-check-label.out_of_bounds').click()
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="findings-table"] tbody tr').length === 1, null, { timeout: WAIT })
  await byTest('finding-view').click()
  await waitText('viewer-title', target.path)
  const viewerBoxes = page.locator('[data-testid="viewer-image"] [data-testid="box"]')
  assert.equal(await viewerBoxes.count(), target.boxes.length)
  await page.waitForFunction(() => document.querySelector('[data-testid="viewer-image"] img')?.naturalWidth === 64, null, { timeout: WAIT })
  await shot('box-viewer')
  // Class toggles: rectangles off, then on again.
  await byTest('class-toggle-rectangle').click()
  assert.equal(await viewerBoxes.count(), target.boxes.filter((b) => b.cls !== 1).length)
  await byTest('class-toggle-rectangle').click()
  assert.equal(await viewerBoxes.count(), target.boxes.length)
  await page.keyboard.press('Escape')
  await byTest('viewer-title').waitFor({ state: 'hidden', timeout: WAIT })

  // From the gallery: → and ← walk the page, Esc closes.
  await byTest('gallery-item').first().click()
  await waitText('viewer-title', circles.images[0].path)
  if (circles.images.length > 1) {
    await page.keyboard.press('ArrowRight')
    await waitText('viewer-title', circles.images[1].path)
    await page.keyboard.press('ArrowLeft')
    await waitText('viewer-title', circles.images[0].path)
  }
  await page.keyboard.press('Escape')
  await byTest('viewer-title').waitFor({ state: 'hidden', timeout: WAIT })
})

test('jobs: a submitted job is listed, the state filter applies', async () => {
  jobId = kestrelJson('submit', 'data=shapes', 'model=n', 'epochs=1', 'imgsz=64').job_id
  await page.goto(`${base}/#/jobs`)
  await waitText(`job-state-${jobId}`, 'queued')
  await shot('jobs')
  await page.goto(`${base}/#/jobs?state=cancelled`)
  await page.locator('[data-testid="jobs-table"]', { hasText: 'No jobs' }).waitFor({ timeout: WAIT })
  assert.equal(await byTest(`job-link-${jobId}`).count(), 0)
  await page.goto(`${base}/#/jobs?state=queued`)
  await byTest(`job-link-${jobId}`).waitFor({ timeout: WAIT })
})

test('job page: live events, a server restart mid-stream, no duplicates', async () => {
  const opened = requests.length
  await page.goto(`${base}/#/jobs/${jobId}`)
  await waitText('stream-status', 'live')
  await waitText('event-count', '1 events')
  // No history replay: the table's tail came with the metrics document, and
  // the stream starts after the document's last_event_id (the job's event 1).
  const first = requests.slice(opened).find((r) => r.url.endsWith(`/api/jobs/${jobId}/events`))
  assert.equal(first.headers['last-event-id'], '1')
  assert.ok(requests.slice(opened).some((r) => r.url.includes(`/api/jobs/${jobId}/metrics?`) && r.url.includes('events=50')))
  // A state change reaches the open page through the stream.
  kestrel('jobs', 'cancel', String(jobId))
  await waitText('event-count', '2 events')
  await waitText('job-state', 'cancelled')

  // The server dies mid-stream: the banner says so.
  await killServer()
  await byTest('offline-banner').waitFor({ state: 'visible', timeout: WAIT })
  await shot('offline')
  // An event while it is down, then the server comes back on the same port.
  kestrel('jobs', 'retry', String(jobId))
  const before = requests.length
  const s = await startServer(port)
  server = s.proc
  await byTest('offline-banner').waitFor({ state: 'detached', timeout: WAIT })
  await waitText('event-count', '3 events')
  await waitText('job-state', 'queued')
  await waitText('stream-status', 'live')
  // It resumed after the last event it had: Last-Event-ID 2.
  const resumed = requests.slice(before).filter((r) => r.url.endsWith(`/api/jobs/${jobId}/events`))
  assert.ok(resumed.length >= 1)
  assert.equal(resumed[resumed.length - 1].headers['last-event-id'], '2')
  kestrel('jobs', 'cancel', String(jobId))
  await waitText('event-count', '4 events')
  await page.waitForTimeout(600) // a duplicate would arrive within the poll interval
  const ids = await page.locator('[data-testid="events-table"] .event-id').allInnerTexts()
  assert.deepEqual(ids.map(Number), [4, 3, 2, 1])
  assert.equal(await textOf('event-count'), '4 events')
  await shot('job')

  // Loaded at #/jobs/ID, the page's first metrics request leaves from
  // index.html before the bundles run, with the token; the charts take its
  // answer (one request, not two) and the stream starts after its last_event_id.
  const reloaded = requests.length
  await page.reload()
  await waitText('stream-status', 'live')
  await waitText('event-count', '4 events')
  const sent = requests.slice(reloaded)
  const metrics = sent.filter((r) => r.url.includes(`/api/jobs/${jobId}/metrics?`))
  assert.equal(metrics.length, 1, JSON.stringify(metrics.map((r) => r.url)))
  assert.match(metrics[0].url, /\?width=\d+&events=50$/)
  assert.equal(metrics[0].headers.authorization, `Bearer ${token}`)
  assert.equal(sent.find((r) => r.url.endsWith(`/api/jobs/${jobId}/events`)).headers['last-event-id'], '4')
  assert.deepEqual((await page.locator('[data-testid="events-table"] .event-id').allInnerTexts()).map(Number), [4, 3, 2, 1])
})

test('jobs: server-side sort, filter and cursor pages; a job page diffs its config with another job', async () => {
  const t0 = Date.now()
  const mine = ['low', 'high', 'normal'].map(
    (p, i) => kestrelJson('submit', 'data=shapes', 'model=n', `epochs=${i + 2}`, 'imgsz=64', `priority=${p}`).job_id,
  )
  const shownIds = () =>
    page.evaluate(() => [...document.querySelectorAll('[data-testid^="job-link-"]')].map((a) => Number(a.getAttribute('data-testid').slice(9))))
  const waitIds = (ids) =>
    page.waitForFunction(
      (want) => [...document.querySelectorAll('[data-testid^="job-link-"]')].map((a) => a.getAttribute('data-testid').slice(9)).join() === want.join(),
      ids,
      { timeout: WAIT },
    )
  // The sort select asks the server: priority high first, two a page; the
  // virtually scrolled list fetches cursor pages (`before=`) until its view
  // is full, so it shows what `jobs list` gives for all of them, in order.
  await page.goto(`${base}/#/jobs?state=queued&limit=2`)
  const fromReq = requests.length
  await byTest('job-sort').click()
  await byTest('sort-option-priority-desc').click()
  const cli = (...more) => kestrelJson('jobs', 'list', '--state', 'queued', '--sort', 'priority', ...more)
  const p1 = cli('--limit', '2')
  const all = cli('--limit', '1000')
  assert.ok(all.total > 2 && all.total <= 40, `${all.total} queued jobs`) // 40 rows: less than the view's three screens
  await waitIds(all.jobs.map((j) => j.id))
  assert.equal(all.jobs[0].priority, 'high')
  assert.match(await textOf('jobs-range'), new RegExp(`^jobs 1–\\d+ of ${all.total}$`))
  // The second page came from the first one's cursor, as `jobs list --before` gives it.
  assert.ok(requests.slice(fromReq).some((r) => r.url.includes('sort=priority') && r.url.includes(`before=${p1.next_cursor}`)))
  // Keyboard: the table is one tab stop; ArrowDown moves, Enter opens that job.
  await byTest('jobs-table').focus()
  await page.keyboard.press('ArrowDown')
  await page.waitForFunction((id) => document.querySelector('[data-testid="jobs-table"]').getAttribute('aria-activedescendant') === `job-row-${id}`, all.jobs[1].id, { timeout: WAIT })
  await page.keyboard.press('Enter')
  await page.waitForFunction((id) => window.location.hash === `#/jobs/${id}`, all.jobs[1].id, { timeout: WAIT })
  await page.goBack()
  // A filter: low priority only.
  await byTest('priority-filter').click()
  await byTest('priority-option-low').click()
  await waitIds(kestrelJson('jobs', 'list', '--state', 'queued', '--priority', 'low', '--sort', 'priority', '--limit', '1000').jobs.map((j) => j.id))
  assert.ok((await shownIds()).includes(mine[0]))
  // The Dataset column names the registry's dataset and version, as `jobs list` does.
  const listed = all.jobs.find((j) => j.id === mine[0])
  assert.equal(listed.dataset, 'shapes')
  assert.equal(await textOf(`job-dataset-${mine[0]}`), `shapes ${listed.version}`)
  await shot('jobs-sorted')

  // The config diff of two of them: epochs changed, the rest equal.
  await page.goto(`${base}/#/jobs/${mine[0]}`)
  await byTest('diff-with').click()
  await byTest(`diff-option-${mine[1]}`).click()
  await waitText('diff-change-epochs', 'changed')
  const diff = kestrelJson('template', 'diff', `job:${mine[0]}`, `job:${mine[1]}`)
  assert.equal(await page.locator('[data-testid^="diff-key-"]').count(), diff.differences.length)
  assert.equal(await textOf('diff-summary'), `job:${mine[0]} → job:${mine[1]}: ${diff.differences.length} keys differ, ${diff.same} equal`)
  await shot('job-diff')
  for (const id of mine) kestrel('jobs', 'cancel', String(id))
  console.log(`# jobs sort/filter/cursor + config diff: ${Date.now() - t0} ms`)
})

// A stand-in for GET /api/jobs/{id}/metrics over `series` ({name: {x, data}}):
// the route's document and its downsampling (app/metric_series.h: every
// point of the window when it holds at most 2*width, else the lowest and
// highest point of each of `width` equal x buckets). Records each query.
function fakeMetrics(jobIdOf, series, queries) {
  return (route) => {
    const u = new URL(route.request().url())
    const q = Object.fromEntries(u.searchParams)
    queries.push(q)
    const width = Number(q.width || 1000)
    const wanted = q.series ? q.series.split(',') : Object.keys(series)
    const out = wanted.map((name) => {
      const s = series[name]
      const from = q.from !== undefined ? Number(q.from) : s.data[0][0]
      const to = q.to !== undefined ? Number(q.to) : s.data[s.data.length - 1][0]
      const win = s.data.filter(([x]) => x >= from && x <= to)
      let data = win
      if (win.length > 2 * width) {
        data = []
        const span = (to - from + 1) / width
        for (let b = 0; b < width; b++) {
          const pts = win.filter(([x]) => Math.min(width - 1, Math.floor((x - from) / span)) === b)
          if (!pts.length) continue
          const lo = pts.reduce((m, p) => (p[1] < m[1] ? p : m))
          const hi = pts.reduce((m, p) => (p[1] > m[1] ? p : m))
          data.push(...(lo === hi ? [lo] : [lo, hi].sort((p1, p2) => p1[0] - p2[0])))
        }
      }
      return { name, x: s.x, points: win.length, downsampled: data !== win, data }
    })
    const names = Object.entries(series).map(([name, s]) => ({ name, x: s.x }))
    const doc = { ok: true, job_id: jobIdOf, width, from: q.from ? Number(q.from) : null, to: q.to ? Number(q.to) : null, names, series: out, progress: null }
    return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(doc) })
  }
}

// The series a chart draws: [{id, name, data}] from its ECharts instance.
function drawn(testId) {
  return page.evaluate((sel) => {
    const el = document.querySelector(sel)
    if (!el || !el.echart) return null
    // Series a new option removed are left as holes (null) in getOption().
    // The training charts hand each line over as a flat Float64Array [x0, y0, x1, y1, ...].
    const pairs = (d) => (ArrayBuffer.isView(d) ? Array.from({ length: d.length / 2 }, (_, i) => [d[2 * i], d[2 * i + 1]]) : d)
    return el.echart.getOption().series.filter(Boolean).map((s) => ({ id: s.id, name: s.name, data: pairs(s.data) }))
  }, `[data-testid="${testId}"]`)
}
async function waitDrawn(testId, pred, what) {
  for (const until = Date.now() + WAIT; Date.now() < until; await page.waitForTimeout(100)) {
    const d = await drawn(testId)
    if (d && pred(d)) return d
  }
  assert.fail(`${testId}: ${what}; drawn: ${JSON.stringify(await drawn(testId)).slice(0, 400)}`)
}

test('job page: curves from the metrics route, zoom refetches raw points, live events, smoothing, overlay', async () => {
  // The real route's document for a job without metric events: the shape the stand-in below mimics.
  const real = await (await fetch(`${base}/api/jobs/${jobId}/metrics?width=100`, { headers: { Authorization: `Bearer ${token}` } })).json()
  assert.equal(real.ok, true)
  assert.equal(real.job_id, jobId)
  assert.deepEqual(real.names, [])
  assert.deepEqual(real.series, [])

  // No trainer runs here: the test serves a job, its stream and its metrics
  // route itself (the trainer's payloads, app/metric_events.h). The stream
  // ends after its events, so the page reconnects and gets the same events
  // again, which it must drop.
  const job = {
    job: {
      id: 777, state: 'running', priority: 'normal', attempt: 1, max_retries: 3, retries_used: 0,
      infra_retries_used: 0, last_reason: '', created_ms: Date.now(), updated_ms: Date.now(),
      config: { data: 'shapes@abc', model: 'n', epochs: 4, imgsz: 64 },
    },
    attempts: [],
  }
  const epochValues = (epoch) => ({
    'train/box_loss': 2 / epoch, 'train/cls_loss': 3 / epoch, 'metrics/mAP50(B)': 0.2 * epoch, 'metrics/mAP50-95(B)': 0.1 * epoch,
  })
  // The route has epochs 1..3 and 5000 sampled iterations (a spike at 2345);
  // the stream has epochs 1..3 again, then epoch 4.
  const series = {}
  for (const name of Object.keys(epochValues(1))) series[name] = { x: 'epoch', data: [1, 2, 3].map((e) => [e, epochValues(e)[name]]) }
  series['iter/box_loss'] = {
    x: 'step',
    data: Array.from({ length: 5000 }, (_, i) => [i + 1, i + 1 === 2345 ? 9 : 1 + 0.5 * Math.sin(i / 7)]),
  }
  const events = [1, 2, 3, 4].map((epoch) => ({
    id: 100 + epoch, job_id: 777, attempt: 1, kind: 'metric', created_ms: Date.now(),
    payload: { type: 'epoch', x: epoch, epoch, values: epochValues(epoch) },
  }))
  events.push({
    id: 105, job_id: 777, attempt: 1, kind: 'progress', created_ms: Date.now(),
    payload: { epoch: 4, epochs: 4, batch: 2, batches: 4, iteration: 14, iterations: 16, it_per_s: 5.5, eta_s: 7 },
  })
  const body = 'retry: 300\n\n' + events.map((e) => `id: ${e.id}\nevent: ${e.kind}\ndata: ${JSON.stringify(e)}\n\n`).join('')
  const calls = []
  const queries = []
  let releaseStream
  const streamGate = new Promise((resolve) => (releaseStream = resolve))
  await page.route('**/api/jobs/777', (route) => route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(job) }))
  await page.route('**/api/jobs/777/metrics?*', fakeMetrics(777, series, queries))
  await page.route('**/api/jobs/777/events', async (route) => {
    calls.push(route.request().headers()['last-event-id'])
    await streamGate // the charts first draw the route alone
    return route.fulfill({ status: 200, contentType: 'text/event-stream', body })
  })
  await page.goto(`${base}/#/jobs/777`)

  // The first load: every series from the route, at most 2 points per column.
  const loss0 = await waitDrawn('loss-chart', (d) => d.length === 2, 'two loss series from the route')
  assert.deepEqual(loss0.map((s) => s.id).sort(), ['777:train/box_loss:raw', '777:train/cls_loss:raw'])
  assert.deepEqual(loss0.find((s) => s.name === 'train/box_loss').data, series['train/box_loss'].data)
  const width0 = Number(queries[0].width)
  assert.ok(width0 >= 200 && width0 < 5000 / 2, `first width ${width0}`)
  assert.equal(queries[0].from, undefined)
  const iter0 = (await waitDrawn('iter-chart', (d) => d.length === 1, 'the iteration series'))[0]
  assert.ok(iter0.data.length <= 2 * width0 && iter0.data.length > width0 / 2, `${iter0.data.length} points`)
  assert.ok(iter0.data.some(([x, y]) => x === 2345 && y === 9), 'the spike survives the downsampling')
  await page.locator('[data-testid="map-chart"] canvas').waitFor({ timeout: WAIT })

  // Zoom the iteration chart (what dragging its slider dispatches): the
  // window comes back at the chart's pixel width, every raw point of it.
  const chartWidth = await page.evaluate(() => document.querySelector('[data-testid="iter-chart"]').echart.getWidth())
  await page.evaluate(() =>
    document.querySelector('[data-testid="iter-chart"]').echart.dispatchAction({ type: 'dataZoom', dataZoomIndex: 0, start: 40, end: 50 }),
  )
  for (const until = Date.now() + WAIT; !queries.some((q) => q.from) && Date.now() < until; ) await page.waitForTimeout(100)
  const zq = queries.find((q) => q.from)
  assert.ok(zq, `a windowed request: ${JSON.stringify(queries)}`)
  assert.equal(Number(zq.width), chartWidth)
  assert.equal(zq.series, 'iter/box_loss')
  const [from, to] = [Number(zq.from), Number(zq.to)]
  assert.ok(from >= 1990 && from <= 2010 && to >= 2490 && to <= 2510, `window ${from}..${to}`)
  const iter1 = await waitDrawn('iter-chart', (d) => d[0].data.filter(([x]) => x >= from && x <= to).length === to - from + 1, 'every raw point of the window')
  assert.ok(iter1[0].data.some(([x]) => x < from) && iter1[0].data.some(([x]) => x > to), 'the rest of the range stays drawn')
  await shot('job-metrics-zoomed')

  // Live: the stream repeats epochs 1..3 (dropped or reread) and adds epoch 4.
  // The store now holds epoch 4 too, so a reread of the route has it.
  for (const [name, y] of Object.entries(epochValues(4))) series[name].data.push([4, y])
  releaseStream()
  await waitText('event-count', '5 events')
  assert.match(await textOf('progress'), /epoch 4 \/ 4 · batch 2 \/ 4 · 5\.5 it\/s · ETA 7 s/)
  const loss1 = await waitDrawn('loss-chart', (d) => d.every((s) => s.data.length === 4), 'epoch 4 appended')
  assert.deepEqual(loss1.find((s) => s.name === 'train/box_loss').data, [1, 2, 3, 4].map((e) => [e, 2 / e]))
  for (const until = Date.now() + WAIT; calls.length < 2 && Date.now() < until; ) await page.waitForTimeout(100)
  await page.waitForTimeout(500) // a replayed event would show within this
  assert.ok(calls.length >= 2, `reconnected (${calls.length} requests)`)
  assert.equal(calls[0], undefined)
  assert.equal(calls[calls.length - 1], '105')
  assert.equal(await textOf('event-count'), '5 events')

  // Smoothing: a click at 60% of the slider; the smoothed line is the
  // debiased EMA of the served points, the raw line stays as served.
  const runway = page.locator('[data-testid="smoothing"] .el-slider__runway')
  const rb = await runway.boundingBox()
  await runway.click({ position: { x: rb.width * 0.6, y: rb.height / 2 } })
  const weight = Number(await textOf('smoothing-value'))
  assert.ok(weight > 0.4 && weight < 0.8, `smoothing ${weight}`)
  const { smoothEma } = await import(path.join(repo, 'web/src/smooth.js'))
  const loss2 = await waitDrawn('loss-chart', (d) => d.length === 4, 'raw and smoothed lines')
  const raw = loss2.find((s) => s.id === '777:train/box_loss:raw')
  const smoothed = loss2.find((s) => s.id === '777:train/box_loss:smoothed')
  assert.deepEqual(raw.data, loss1.find((s) => s.name === 'train/box_loss').data)
  assert.notDeepEqual(smoothed.data, raw.data)
  const want = smoothEma(raw.data, weight)
  smoothed.data.forEach(([x, y], i) => {
    assert.equal(x, want[i][0])
    assert.ok(Math.abs(y - want[i][1]) < 1e-9, `${x}: ${y} != ${want[i][1]}`)
  })
  await shot('job-metrics-smoothed')
  await byTest('show-raw').click()
  await waitDrawn('loss-chart', (d) => d.length === 2 && d.every((s) => s.id.endsWith(':smoothed')), 'the raw lines hidden')
  await byTest('show-raw').click()
  // The other smoothing kinds, computed from the same served points with the
  // same slider value; then back to the EMA.
  const { smoothSeries } = await import(path.join(repo, 'web/src/smooth.js'))
  for (const kind of ['gaussian', 'mean', 'ema']) {
    await byTest('smoothing-kind').click()
    await page.locator(`[data-testid="smoothing-kind-${kind}"]`).click()
    const expect = smoothSeries(raw.data, kind, weight)
    const drawn = await waitDrawn(
      'loss-chart',
      (d) => {
        const s = d.find((l) => l.id === '777:train/box_loss:smoothed')
        return s && s.data.every(([, y], i) => Math.abs(y - expect[i][1]) < 1e-9)
      },
      `the ${kind} smoothing`,
    )
    assert.ok(drawn.find((l) => l.id === '777:train/box_loss:raw'), 'the raw line stays')
  }

  // Overlay: another job's curves join the same charts.
  const otherQueries = []
  const other = { 'train/box_loss': { x: 'epoch', data: [[1, 1.5], [2, 1.0]] } }
  await page.route(`**/api/jobs/${jobId}/metrics?*`, fakeMetrics(jobId, other, otherQueries))
  await byTest('overlay-select').click()
  await page.locator(`[data-testid="overlay-option-${jobId}"]`).click()
  const loss3 = await waitDrawn('loss-chart', (d) => d.length === 6, 'the overlaid job adds its raw and smoothed line')
  const added = loss3.find((s) => s.id === `${jobId}:train/box_loss:raw`)
  assert.ok(added, JSON.stringify(loss3.map((s) => s.id)))
  assert.equal(added.name, `#${jobId} train/box_loss`)
  assert.deepEqual(added.data, other['train/box_loss'].data)
  assert.equal(otherQueries.length >= 1, true)
  await page.keyboard.press('Escape')
  await shot('job-metrics')
  await page.unroute(`**/api/jobs/${jobId}/metrics?*`)
  await page.unroute('**/api/jobs/777/events')
  await page.unroute('**/api/jobs/777/metrics?*')
  await page.unroute('**/api/jobs/777')
})

test('job page: each attempt\'s environment fingerprint and a diff against another attempt', async () => {
  // A stand-in job with two attempts on two fingerprints, shaped as GET
  // /api/jobs/{id} and /env-diff answer (tests/server/api_system_test.cc
  // checks the real routes).
  const envA = { kestrel_version: '0.9', libtorch: '2.5.1', avx2: true, gpus: [] }
  const envB = { kestrel_version: '0.9', libtorch: '1.13.1', avx2: true, gpus: [] }
  const t = Date.now()
  const attempt = (n, fp, host) => ({
    attempt: n, worker: `${host}:1`, host, pid: 10 + n, started_ms: t, ended_ms: n === 1 ? t + 1 : 0,
    succeeded: false, reason: n === 1 ? 'environment' : '', failure_class: n === 1 ? 'retryable' : '', stage: '', message: '', fingerprint: fp,
  })
  const job = {
    job: {
      id: 791, state: 'running', priority: 'normal', attempt: 2, max_retries: 3, retries_used: 0,
      infra_retries_used: 1, last_reason: 'environment', created_ms: t, updated_ms: t, config: { data: 'shapes@abc', model: 'n', epochs: 1 },
    },
    attempts: [attempt(1, 'aaaaaaaaaaaaaaaa', 'h1'), attempt(2, 'bbbbbbbbbbbbbbbb', 'h2')],
    environments: { aaaaaaaaaaaaaaaa: envA, bbbbbbbbbbbbbbbb: envB },
  }
  const asked = []
  await page.route('**/api/jobs/791', (route) => route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(job) }))
  await page.route('**/api/jobs/791/env-diff?*', (route) => {
    const q = new URL(route.request().url()).searchParams
    asked.push(`${q.get('attempt')} ${q.get('other')}`)
    const side = (n) => ({ job: 791, attempt: n, host: `h${n}`, fingerprint: n === 1 ? 'aaaaaaaaaaaaaaaa' : 'bbbbbbbbbbbbbbbb' })
    const a = Number(q.get('attempt'))
    const b = Number(q.get('other').split(':')[1])
    const env = (n) => (n === 1 ? envA : envB)
    return route.fulfill({
      status: 200,
      contentType: 'application/json',
      body: JSON.stringify({ ok: true, a: side(a), b: side(b), same: false, differences: [{ field: 'libtorch', a: env(a).libtorch, b: env(b).libtorch }] }),
    })
  })
  await page.goto(`${base}/#/jobs/791`)
  try {
    await waitText('attempt-env-1', 'aaaaaaaaaaaaaaaa')
    // The last attempt's fields are shown first.
    await waitText('env-hash', 'bbbbbbbbbbbbbbbb')
    assert.equal(await textOf('env-field-libtorch'), '1.13.1')
    assert.equal(await textOf('env-field-avx2'), 'true')
    // Attempt 1's hash in the table switches the fields to it.
    await byTest('attempt-env-1').click()
    await waitText('env-hash', 'aaaaaaaaaaaaaaaa')
    assert.equal(await textOf('env-field-libtorch'), '2.5.1')
    // Diff against attempt 2: the route is asked for attempt=1&other=791:2.
    await byTest('env-other').click()
    await byTest('env-other-option-2').click()
    await byTest('env-diff-field-libtorch').waitFor({ timeout: WAIT })
    assert.deepEqual(asked, ['1 791:2'])
    const row = await page.locator('[data-testid="env-diff-table"] tbody tr').first().innerText()
    assert.match(row, /libtorch\s+2\.5\.1\s+1\.13\.1/)
    await shot('job-environment')
  } finally {
    await page.unroute('**/api/jobs/791/env-diff?*')
    await page.unroute('**/api/jobs/791')
  }
})

test('job page: prediction samples per epoch, one keyboard slider for the job and an overlaid run', async () => {
  // The real routes for a job that never trained: no epochs; an epoch is a 404 naming the field.
  const hdr = { headers: { Authorization: `Bearer ${token}` } }
  const real = await (await fetch(`${base}/api/jobs/${jobId}/samples`, hdr)).json()
  assert.deepEqual(real.epochs, [])
  const none = await fetch(`${base}/api/jobs/${jobId}/samples/1`, hdr)
  assert.equal(none.status, 404)
  assert.equal((await none.json()).error.field, 'epoch')
  // No trainer runs here: job 778 and the overlaid job's samples are served
  // by the test (the trainer's format, docs/formats.md "Epoch samples") on
  // real images of the dataset; epoch E of job 778 has E detections.
  const imgs = (await (await fetch(`${base}/api/datasets/shapes/images?limit=2`, hdr)).json()).images
  const panel = (id, epoch, dets) => ({
    job: id, epoch, attempt: 1, dataset: 'shapes', version: 1, version_id: 'x', conf: 0.25, names: ['a', 'b'],
    images: imgs.map((im) => ({
      sha: im.sha, path: im.path, width: im.width, height: im.height,
      labels: im.boxes.map((b) => ({ class_id: b.cls, box: [(b.cx - b.w / 2) * im.width, (b.cy - b.h / 2) * im.height, (b.cx + b.w / 2) * im.width, (b.cy + b.h / 2) * im.height] })),
      detections: Array.from({ length: dets }, (_, k) => ({ class_id: k % 2, score: 0.9 - 0.1 * k, box: [2 + k, 2 + k, 20 + k, 24 + k] })),
    })),
  })
  const samples = { 778: [1, 2, 3], [jobId]: [2] }
  const json = (body) => ({ status: 200, contentType: 'application/json', body: JSON.stringify(body) })
  const asked = []
  for (const id of [778, jobId]) {
    await page.route(`**/api/jobs/${id}/samples`, (route) => route.fulfill(json({ job: id, epochs: samples[id].map((epoch) => ({ epoch, attempt: 1 })) })))
    await page.route(`**/api/jobs/${id}/samples/*`, (route) => {
      const epoch = Number(route.request().url().split('/').pop())
      asked.push(`${id}:${epoch}`)
      return route.fulfill(json(panel(id, epoch, id === 778 ? epoch : 1)))
    })
  }
  const job = { job: { id: 778, state: 'succeeded', priority: 'normal', attempt: 1, max_retries: 3, retries_used: 0, infra_retries_used: 0, last_reason: '', created_ms: Date.now(), updated_ms: Date.now(), config: { data: 'shapes@abc', model: 'n', epochs: 3, imgsz: 64 } }, attempts: [] }
  await page.route('**/api/jobs/778', (route) => route.fulfill(json(job)))
  await page.route('**/api/jobs/778/metrics?*', (route) => route.fulfill(json({ ok: true, job_id: 778, names: [], series: [], last_event_id: 0, events: [] })))
  await page.route('**/api/jobs/778/events', (route) => route.fulfill({ status: 200, contentType: 'text/event-stream', body: 'retry: 60000\n\n' }))
  await page.goto(`${base}/#/jobs/778`)

  // The slider starts at the newest epoch; both images show with labels and epoch 3's 3 predictions.
  const run = byTest('samples-run-778')
  await page.waitForFunction(() => document.querySelector('[data-testid="samples-run-778"]')?.dataset.epoch === '3', null, { timeout: WAIT })
  assert.equal(await textOf('epoch-value'), '3 / 3')
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="samples-run-778"] [data-testid="pred"]').length === 6, null, { timeout: WAIT })
  assert.equal(await run.locator('[data-testid="sample-image"]').count(), 2)
  assert.equal(await run.locator('[data-testid="box"]').count(), imgs.reduce((n, im) => n + im.boxes.length, 0))
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="samples-run-778"] img')].filter((i) => i.complete && i.naturalWidth > 0).length === 2, null, { timeout: WAIT })

  // Keyboard: Tab-focusable slider; ArrowLeft moves one epoch, the panel follows.
  const handle = byTest('epoch-slider').locator('[role="slider"]')
  await handle.focus()
  await page.keyboard.press('ArrowLeft')
  await page.waitForFunction(() => document.querySelector('[data-testid="samples-run-778"]')?.dataset.epoch === '2', null, { timeout: WAIT })
  assert.equal(await textOf('epoch-value'), '2 / 3')
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="samples-run-778"] [data-testid="pred"]').length === 4, null, { timeout: WAIT })

  // Overlay another run on the charts: its panel joins, driven by the same slider
  // (its newest epoch <= the slider's); Home goes before its first epoch.
  await byTest('overlay-select').click()
  await page.locator(`[data-testid="overlay-option-${jobId}"]`).click()
  await page.keyboard.press('Escape')
  await page.waitForFunction((id) => document.querySelector(`[data-testid="samples-run-${id}"]`)?.dataset.epoch === '2', jobId, { timeout: WAIT })
  await shot('epoch-samples')
  await handle.focus()
  await page.keyboard.press('End')
  await page.waitForFunction(() => document.querySelector('[data-testid="samples-run-778"]')?.dataset.epoch === '3', null, { timeout: WAIT })
  assert.equal(await byTest(`samples-run-${jobId}`).getAttribute('data-epoch'), '2')
  await page.keyboard.press('Home')
  await page.waitForFunction(() => document.querySelector('[data-testid="samples-run-778"]')?.dataset.epoch === '1', null, { timeout: WAIT })
  await page.waitForFunction((id) => document.querySelector(`[data-testid="samples-run-${id}"]`)?.dataset.epoch === '', jobId, { timeout: WAIT })
  // The slider's epoch is set before the panel's request goes out: epoch 1's
  // panel drawn (1 prediction per image) means it was asked for.
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="samples-run-778"] [data-testid="pred"]').length === 2, null, { timeout: WAIT })
  assert.ok(asked.includes('778:1') && asked.includes(`${jobId}:2`), asked.join(' '))
  for (const id of [778, jobId]) {
    await page.unroute(`**/api/jobs/${id}/samples`)
    await page.unroute(`**/api/jobs/${id}/samples/*`)
  }
  await page.unroute('**/api/jobs/778')
  await page.unroute('**/api/jobs/778/metrics?*')
  await page.unroute('**/api/jobs/778/events')
})

test('models: the registered model, its page with lineage', async () => {
  // A minimal safetensors file: one F32 tensor.
  const header = Buffer.from(JSON.stringify({ w: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }))
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(header.length))
  const weights = path.join(tmp, 'w.safetensors')
  fs.writeFileSync(weights, Buffer.concat([len, header, Buffer.from(new Float32Array([1]).buffer)]))
  kestrel('models', 'register', weights, '--name', 'shapes', 'data=shapes')
  await page.goto(`${base}/#/models`)
  await byTest('model-link-shapes@v1').click()
  await waitText('model-title', 'shapes@v1')
  const lineage = await textOf('lineage')
  assert.match(lineage, /shapes/)
  assert.match(lineage, /from scratch/)
  await shot('model')
})

test('system: a worker row with a ticking heartbeat, availability, failures and the breaker', async () => {
  // A worker that can claim nothing here (it offers one 1 MB GPU; every job
  // asks for a CPU), heartbeating every second until the test stops it.
  const worker = spawn(
    CLI,
    // --skip-doctor: its device does not exist here, so its doctor would fail (issue 31).
    ['--home', home, 'worker', '--id', 'web-worker', '--devices', 'gpu:0:1', '--skip-doctor', '--no-webhooks', '--heartbeat-s', '1', '--poll-s', '0.2'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let workerErr = ''
  worker.stderr.on('data', (d) => (workerErr += d))
  const exited = new Promise((resolve) => worker.once('exit', (code) => resolve(code)))
  try {
    const stats = kestrelJson('stats')
    await page.goto(`${base}/#/system`)
    await waitText('breaker-state', stats.breaker.open ? 'open' : 'closed')
    // Availability is a figure only once a job finished (issue 33 finding 6: "—", not "0.00 %").
    assert.equal(await textOf('availability'), stats.finished > 0 ? `${(100 * stats.availability).toFixed(2)} %` : '—')
    assert.equal(await textOf('jobs-total'), `${stats.jobs} / ${stats.attempts}`)
    await byTest('no-failures').waitFor({ timeout: WAIT })
    // The UI holds a read-only token: Reset is off and says why.
    await byTest('breaker-reset-why').waitFor({ timeout: WAIT })
    assert.match(await textOf('breaker-reset-why'), /'web-ui' is read-only/)
    assert.equal(await byTest('breaker-reset').isDisabled(), true)

    const row = byTest('worker-state-web-worker').waitFor({ timeout: WAIT }).then(() => 'row')
    const gone = exited.then((code) => `exited ${code}`)
    const first = await Promise.race([row, gone])
    if (first !== 'row' && /without LibTorch/.test(workerErr)) {
      console.log('system: this kestrel cannot run `kestrel worker` (no LibTorch); no worker row to check')
    } else {
      assert.equal(first, 'row', `the worker ${first}: ${workerErr}`)
      await waitText('worker-state-web-worker', 'idle')
      assert.ok(kestrelJson('workers').workers.some((w) => w.id === 'web-worker' && w.state === 'idle'))
      const age = await textOf('worker-age-web-worker')
      assert.match(age, /^\d+ s ago$/)
      await page.waitForFunction(
        ([sel, was]) => document.querySelector(sel)?.textContent.trim() !== was,
        ['[data-testid="worker-age-web-worker"]', age],
        { timeout: WAIT },
      )
      await shot('system')
    }
  } finally {
    if (worker.exitCode === null) worker.kill('SIGTERM')
    await exited
  }
})

test('keyboard: the section links are real links', async () => {
  await page.goto(`${base}/#/datasets`)
  await byTest('nav-jobs').focus()
  await page.keyboard.press('Enter')
  await page.waitForFunction(() => window.location.hash === '#/jobs', null, { timeout: WAIT })
  await byTest('jobs-table').waitFor({ timeout: WAIT })
})

test('every API request after the token was saved carried it, event streams too', async () => {
  const api = requests.slice(tokenFrom).filter((r) => new URL(r.url).pathname.startsWith('/api/'))
  assert.ok(api.length > 5, `${api.length} requests`)
  assert.ok(api.some((r) => r.url.endsWith('/events')), 'an event stream is among them')
  for (const r of api) assert.equal(r.headers.authorization, `Bearer ${token}`, r.url)
  await byTest('settings-button').click()
  await byTest('token-clear').click()
  assert.equal(await page.evaluate(() => localStorage.getItem('kestrel.token')), null)
})

// An Element Plus input's <input>, whichever element the test id landed on.
const inputOf = (id) => page.locator(`input[data-testid="${id}"], [data-testid="${id}"] input`).first()

test('writes: a bad submit value shows the CLI\'s message at its field; a valid submit is queued; cancel, retry, tag', async () => {
  // Writes need a token that is not read-only (the one above is).
  const rw = auth ? kestrelJson('token', 'create', '--name', 'web-rw').token : token
  await page.goto(`${base}/#/jobs`)
  await page.evaluate((t) => localStorage.setItem('kestrel.token', t), rw)
  await page.reload()
  await byTest('jobs-table').waitFor({ timeout: WAIT })

  // What `kestrel submit` says about the same value.
  let cli = null
  try {
    kestrel('--json', 'submit', 'data=shapes', 'model=n', 'epochs=abc')
  } catch (e) {
    cli = JSON.parse(e.stdout).error
  }
  assert.ok(cli && cli.field === 'epochs' && cli.message, JSON.stringify(cli))

  await byTest('submit-button').click()
  await byTest('submit-dialog').waitFor({ timeout: WAIT })
  assert.equal(await inputOf('submit-key-0').inputValue(), 'data')
  await inputOf('submit-value-0').fill('shapes')
  await inputOf('submit-value-1').fill('n')
  await inputOf('submit-value-2').fill('abc')
  await byTest('submit-send').click()
  await waitText('submit-error-epochs', cli.message)
  assert.equal(await byTest('submit-result').count(), 0)
  await shot('submit-error')

  await inputOf('submit-value-2').fill('1')
  await byTest('submit-add-row').click()
  await inputOf('submit-key-3').fill('imgsz')
  await inputOf('submit-value-3').fill('64')
  await byTest('submit-send').click()
  await byTest('submit-result').waitFor({ timeout: WAIT })
  assert.equal(await byTest('submit-error-epochs').count(), 0)
  const newId = Number(/job #(\d+)/.exec(await textOf('submit-result'))[1])
  const shown = kestrelJson('jobs', 'show', String(newId)).job
  assert.equal(shown.state, 'queued')
  assert.equal(shown.config.epochs, 1)
  assert.equal(shown.config.imgsz, 64)
  await shot('submit-done')

  // With a template: its keys apply where no row has a value.
  kestrel('template', 'save', 'tiny', 'model=n', 'epochs=2', 'imgsz=96')
  await byTest('submit-template').click()
  await byTest('template-option-tiny').click()
  await inputOf('submit-value-2').fill('')
  await byTest('submit-send').click()
  await page.waitForFunction(
    (prev) => {
      const m = /job #(\d+)/.exec(document.querySelector('[data-testid="submit-result"]')?.textContent || '')
      return m && Number(m[1]) !== prev
    },
    newId,
    { timeout: WAIT },
  )
  const tplId = Number(/job #(\d+)/.exec(await textOf('submit-result'))[1])
  const fromTpl = kestrelJson('jobs', 'show', String(tplId)).job
  assert.equal(fromTpl.config.epochs, 2)
  assert.equal(fromTpl.config.imgsz, 64) // the row wins over the template
  kestrel('jobs', 'cancel', String(tplId))
  await page.keyboard.press('Escape')
  await waitText(`job-state-${newId}`, 'queued') // the queue lists it

  await page.goto(`${base}/#/jobs/${newId}`)
  // Cancel asks first (issue 33 finding 6): the confirmation's button cancels.
  await byTest('job-cancel').click()
  await byTest('cancel-confirm-yes').click()
  await waitText('job-state', 'cancelled')
  assert.equal(kestrelJson('jobs', 'show', String(newId)).job.state, 'cancelled')
  assert.equal(await byTest('job-cancel').count(), 0)
  await byTest('job-retry').click()
  await waitText('job-state', 'queued')
  assert.equal(kestrelJson('jobs', 'show', String(newId)).job.state, 'queued')
  await shot('job-retried')
  await byTest('job-cancel').click()
  await byTest('cancel-confirm-yes').click()
  await waitText('job-state', 'cancelled')

  await page.goto(`${base}/#/models/shapes@v1`)
  await waitText('model-title', 'shapes@v1')
  await inputOf('tag-input').fill('candidate')
  await byTest('tag-add').click()
  await page.locator('[data-testid="model-tags"]', { hasText: 'candidate' }).waitFor({ timeout: WAIT })
  assert.ok(kestrelJson('models', 'show', 'shapes@v1').model.tags.includes('candidate'))
  await shot('model-tagged')

  // The breaker's Reset, with a read-write token, after a confirmation;
  // the page says what `kestrel breaker reset` says.
  await page.goto(`${base}/#/system`)
  await byTest('breaker').waitFor({ timeout: WAIT })
  await page.waitForFunction(() => document.querySelector('[data-testid="breaker-reset"]')?.disabled === false, null, { timeout: WAIT })
  assert.equal(await byTest('breaker-reset-why').count(), 0)
  await byTest('breaker-reset').click()
  await byTest('breaker-confirm').waitFor({ timeout: WAIT })
  await byTest('breaker-confirm-reset').click()
  await byTest('breaker-reset-result').waitFor({ timeout: WAIT })
  const shownReset = kestrelJson('breaker', 'show').reset_ms
  assert.ok(shownReset > 0, 'the store holds the reset')
  assert.equal(await textOf('breaker-reset-result'), kestrel('breaker', 'reset').trim())
  await shot('system-reset')

  // Issue 31: a host quarantined by its worker's failed doctor (cuda:97 is
  // no device) and a live worker, drained and unquarantined from the page.
  let brokenCode = 0
  let brokenErr = ''
  try {
    kestrel('worker', '--host', 'web-broken', '--devices', 'gpu:97:1', '--quarantine-after', '1', '--exit-when-idle', '--no-webhooks')
  } catch (e) {
    brokenCode = e.status
    brokenErr = String(e.stderr)
  }
  if (/without LibTorch/.test(brokenErr)) {
    console.log('system: this kestrel cannot run `kestrel worker` (no LibTorch); no drain or quarantine to check')
    return
  }
  assert.equal(brokenCode, 1, `the worker whose doctor fails exits 1: ${brokenErr}`)
  const drained = spawn(
    CLI,
    ['--home', home, 'worker', '--id', 'web-drain', '--devices', 'gpu:0:1', '--skip-doctor', '--no-webhooks', '--heartbeat-s', '1', '--poll-s', '0.2'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  const drainedExit = new Promise((resolve) => drained.once('exit', (code) => resolve(code)))
  try {
    await byTest('host-unquarantine-web-broken').waitFor({ timeout: WAIT })
    assert.match(await textOf('host-quarantined-web-broken'), /doctor: device cuda:97/)
    await byTest('worker-drain-web-drain').waitFor({ timeout: WAIT })
    await byTest('worker-drain-web-drain').click()
    await byTest('worker-action-confirm').waitFor({ timeout: WAIT })
    assert.match(await textOf('worker-action-confirm'), /finishes its running jobs/)
    await byTest('worker-action-go').click()
    await waitText('worker-action-result', 'Draining web-drain: web-drain.')
    assert.equal(await drainedExit, 0, 'a drained worker exits 0')
    assert.ok(kestrelJson('workers').workers.some((w) => w.id === 'web-drain' && w.draining))
    // The drain stays on its id after it exited: Undrain lifts it.
    await byTest('worker-undrain-web-drain').click()
    await byTest('worker-action-go').click()
    await waitText('worker-action-result', 'Undrained web-drain: web-drain.')
    assert.ok(kestrelJson('workers').workers.some((w) => w.id === 'web-drain' && !w.draining))
    await byTest('host-unquarantine-web-broken').click()
    await byTest('worker-action-confirm').waitFor({ timeout: WAIT })
    assert.match(await textOf('worker-action-confirm'), /Fix the cause first/)
    await byTest('worker-action-go').click()
    await waitText('worker-action-result', 'Host web-broken is no longer quarantined.')
    const host = kestrelJson('workers').hosts.find((h) => h.host === 'web-broken')
    assert.ok(!host || !host.quarantined, JSON.stringify(host))
    await byTest('host-unquarantine-web-broken').waitFor({ state: 'detached', timeout: WAIT })
    await shot('system-drain-unquarantine')
  } finally {
    if (drained.exitCode === null) drained.kill('SIGTERM')
    await drainedExit
  }
})

test('dataset pages: a zip uploaded through Import, the diff of two versions side by side, a leakage pair', async () => {
  // An upload needs a read-write token. Its own dataset, so that later
  // tests still see shapes@v1 as the latest: v1 the synth folder, v2 a zip
  // of it with a train image copied into val (a train/val leakage pair) and
  // one more box in a train label.
  const t0 = Date.now()
  const src = path.join(tmp, 'synth-v2')
  fs.cpSync(path.join(tmp, 'synth'), src, { recursive: true })
  const train = fs.readdirSync(path.join(src, 'images', 'train')).sort()
  const stem = (f) => f.replace(/\.[^.]+$/, '')
  const ext = path.extname(train[1])
  fs.copyFileSync(path.join(src, 'images', 'train', train[1]), path.join(src, 'images', 'val', `leak${ext}`))
  fs.copyFileSync(path.join(src, 'labels', 'train', `${stem(train[1])}.txt`), path.join(src, 'labels', 'val', 'leak.txt'))
  fs.appendFileSync(path.join(src, 'labels', 'train', `${stem(train[2])}.txt`), '0 0.5 0.5 0.2 0.2\n')
  kestrel('dataset', 'import', path.join(tmp, 'synth'), '--name', 'leaky')
  const zip = path.join(tmp, 'leaky-v2.zip')
  execFileSync('python3', ['-c', 'import shutil, sys; shutil.make_archive(sys.argv[1], "zip", sys.argv[2])', zip.slice(0, -4), src])

  const rw = auth ? kestrelJson('token', 'create', '--name', 'web-datasets').token : token
  await page.goto(`${base}/#/datasets`)
  await page.evaluate((t) => localStorage.setItem('kestrel.token', t), rw)
  await page.reload()
  await byTest('import-button').click()
  await byTest('import-file').setInputFiles(zip)
  await inputOf('import-name').fill('leaky')
  await byTest('import-send').click()
  await byTest('import-result').waitFor({ timeout: WAIT })
  assert.match(await textOf('import-result'), /Imported leaky@v2/)
  await shot('dataset-import-upload')
  const v2 = kestrelJson('dataset', 'show', 'leaky@v2')
  assert.equal(v2.version.source, 'yolo:upload:leaky-v2.zip')

  // "Compare with…" on the new version's page opens the diff, counted as the CLI counts.
  await byTest('import-result-link').click()
  await waitText('dataset-title', 'leaky@v2')
  await byTest('compare-select').click()
  await byTest('compare-v1').click()
  await waitText('diff-title', 'leaky: v1 → v2')
  const cli = kestrelJson('dataset', 'diff', 'leaky@v1', 'leaky@v2')
  await waitText('diff-count-added', String(cli.added.length))
  assert.equal(await textOf('diff-count-labels_changed'), String(cli.labels_changed.length))
  assert.equal(cli.labels_changed.length, 1)
  const grew = cli.classes.find((c) => c.name === 'circle')
  assert.equal(await textOf('diff-delta-circle'), grew.delta > 0 ? `+${grew.delta}` : String(grew.delta))
  // The changed label: both versions side by side, v2 with one more box.
  await byTest('diff-kind-labels_changed').click()
  await byTest('diff-view').first().click()
  await waitText('pair-title', cli.labels_changed[0])
  const sideImgs = '[data-testid^="pair-side-"] img'
  await page.waitForFunction((sel) => [...document.querySelectorAll(sel)].filter((i) => i.naturalWidth === 64).length === 2, sideImgs, { timeout: WAIT })
  const boxesIn = (i) => page.locator(`[data-testid="pair-side-${i}"] [data-testid="box"]`).count()
  assert.equal(await boxesIn(1), (await boxesIn(0)) + 1)
  await shot('dataset-diff-side-by-side')
  await page.keyboard.press('Escape')
  await byTest('pair-title').waitFor({ state: 'hidden', timeout: WAIT })
  await shot('dataset-diff')
  // The box-level diff (issue 34): totals as the CLI counts them, and the
  // images whose boxes changed listed with their counts.
  assert.match(await textOf('diff-boxes-total'), new RegExp(`^${cli.boxes.total.added} added, ${cli.boxes.total.removed} removed`))
  assert.equal(await textOf('diff-count-box_changed'), String(cli.boxes.images_changed))
  assert.ok(cli.boxes.images_changed >= 1)
  await byTest('diff-kind-box_changed').click()
  await byTest('diff-box-row-0').waitFor({ timeout: WAIT })
  assert.ok((await textOf('diff-box-row-0')).startsWith(`+${cli.boxes.images[0].added} −${cli.boxes.images[0].removed} `))

  // The leakage finding: its two images side by side with their boxes.
  await page.goto(`${base}/#/datasets/leaky@v2`)
  await byTest('findings-check').click()
  await byTest('findings-check-split.leakage').click()
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="findings-table"] tbody tr').length >= 1, null, { timeout: WAIT })
  await byTest('finding-pair').first().click()
  await page.waitForFunction((sel) => [...document.querySelectorAll(sel)].filter((i) => i.naturalWidth === 64).length === 2, sideImgs, { timeout: WAIT })
  const paths = [await textOf('pair-path-0'), await textOf('pair-path-1')]
  assert.ok(paths.includes(`leak${ext}`), JSON.stringify(paths))
  assert.ok((await boxesIn(0)) > 0 && (await boxesIn(0)) === (await boxesIn(1)))
  await shot('dataset-leakage-pair')
  await page.keyboard.press('Escape')
  console.log(`dataset pages test: ${Date.now() - t0} ms`)
})

// Runs `kestrel worker --exit-when-idle` (stopped after 120 s: a job that keeps
// failing retryably would hold it) and resolves to the states of `ids`.
function runJobs(id, ids) {
  return new Promise((resolve, reject) => {
    const w = spawn(CLI, ['--home', home, 'worker', '--id', id, '--exit-when-idle', '--poll-s', '0.1', '--heartbeat-s', '1', '--no-webhooks'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let err = ''
    w.stderr.on('data', (d) => (err += d))
    const timer = setTimeout(() => w.kill('SIGTERM'), 120000)
    w.once('exit', (code) => {
      clearTimeout(timer)
      const states = ids.map((j) => kestrelJson('jobs', 'show', String(j)).job.state)
      if (code !== 0 && states.every((s) => s === 'succeeded')) reject(new Error(`worker exited ${code}: ${err}`))
      else resolve(states)
    })
  })
}
// Whether a job's attempts failed because this kestrel cannot run LibTorch.
function noLibTorch(jobId) {
  const dir = path.join(home, 'jobs', String(jobId))
  return fs.existsSync(dir) && fs.readdirSync(dir).some((f) => /LibTorch|kestrel-torch/.test(fs.readFileSync(path.join(dir, f), 'utf8')))
}

test('compare: two models evaluated from the Models page; curves, matrices, crops, CSV, side by side with TP/FP/FN', async (t) => {
  const started = Date.now()
  // Two tiny models of the shapes data (other seeds, 1 and 2 epochs: other weights).
  const trainKeys = ['data=shapes', 'model=t', 'imgsz=64', 'batch=4', 'workers=1', 'threads=1', 'plots=false', 'warmup_epochs=0']
  const trainJobs = [1, 2].map((n) => kestrelJson('submit', ...trainKeys, `epochs=${n}`, `seed=${n}`).job_id)
  const trained = await runJobs('web-train', trainJobs)
  if (trained.some((s) => s !== 'succeeded')) {
    for (const id of trainJobs) kestrelOk('jobs', 'cancel', String(id))
    if (trainJobs.some(noLibTorch)) {
      t.skip('this kestrel cannot run LibTorch: no models to evaluate')
      return
    }
    assert.fail(`training jobs ${trainJobs}: ${trained}`)
  }
  const models = kestrelJson('models', 'list').models.filter((m) => trainJobs.includes(m.job_id))
  assert.equal(models.length, 2, JSON.stringify(kestrelJson('models', 'list')))
  const [ma, mb] = trainJobs.map((id) => models.find((m) => m.job_id === id).ref)

  // Models page (a read-write token: Evaluate submits jobs): tick both, Compare:
  // no evaluations yet -> Evaluate submits a val job per model.
  const rw = auth ? kestrelJson('token', 'create', '--name', 'web-compare').token : token
  await page.goto(`${base}/#/models`)
  await page.evaluate((t) => localStorage.setItem('kestrel.token', t), rw)
  await page.reload()
  for (const ref of [ma, mb]) await page.locator('[data-testid="models-table"] tbody tr', { has: byTest(`model-link-${ref}`) }).locator('.el-checkbox').click()
  await byTest('models-compare').click()
  await byTest('compare-models-missing').waitFor({ timeout: WAIT })
  await byTest('compare-models-evaluate').click()
  await byTest('compare-models-jobs').waitFor({ timeout: WAIT })
  // The list shows as soon as the first submit answers; the second follows.
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="compare-models-jobs"] a').length >= 2, null, { timeout: WAIT })
  const valJobs = (await byTest('compare-models-jobs').locator('a').allInnerTexts()).map((s) => Number(/#(\d+)/.exec(s)[1]))
  assert.equal(valJobs.length, 2)
  for (const id of valJobs) {
    const job = kestrelJson('jobs', 'show', String(id)).job
    assert.equal(job.kind, 'val')
    assert.equal(String(job.config.save_json), 'true')
    assert.equal(job.config.imgsz, 64) // the imgsz the model was trained at
  }
  assert.deepEqual(await runJobs('web-val', valJobs), ['succeeded', 'succeeded'])
  // The dialog looks again every 3 s and then links the comparison.
  await byTest('compare-models-open').waitFor({ timeout: WAIT })
  await shot('compare-models')
  await byTest('compare-models-open').click()
  const [ea, eb] = valJobs
  await page.waitForFunction((want) => window.location.hash === want, `#/compare?a=${ea}&b=${eb}`, { timeout: WAIT })
  await byTest('compare-headline').waitFor({ timeout: WAIT })

  const api = async (p) => {
    const r = await fetch(`${base}${p}`, { headers: { Authorization: `Bearer ${rw}` } })
    assert.equal(r.status, 200, `${p}: ${await r.clone().text()}`)
    return r.json()
  }
  const cmp = await api(`/api/comparisons?a=${ea}&b=${eb}`)
  const nc = cmp.confusion.names.length - 1

  // The PR and F1 curves of both, overlaid.
  const pr = await waitDrawn('compare-pr', (d) => d.length === 2 && d.every((s) => s.data.length > 10), 'two PR curves')
  assert.deepEqual(pr.map((s) => s.name), [`A: ${cmp.a.model} (#${ea})`, `B: ${cmp.b.model} (#${eb})`])
  await waitDrawn('compare-f1', (d) => d.length === 2, 'two F1 curves')

  // Both confusion matrices, the records' counts in every cell.
  for (const side of ['a', 'b']) {
    const d = await waitDrawn(`confusion-${side}`, (x) => x.length === 1 && x[0].data.length === (nc + 1) ** 2, `matrix ${side}`)
    for (const cell of d[0].data) assert.equal(cell.count, cmp.confusion[side][cell.value[1]][cell.value[0]])
  }
  await shot('compare')

  // A non-empty cell of A opens its boxes: one crop each.
  let cell = null
  cmp.confusion.a.forEach((row, p) => row.forEach((n, g) => n > 0 && n <= 60 && (!cell || n < cell.n) && (cell = { p, g, n })))
  assert.ok(cell, JSON.stringify(cmp.confusion.a))
  const at = await page.evaluate(([g, p]) => {
    const el = document.querySelector('[data-testid="confusion-a"]')
    const [x, y] = el.echart.convertToPixel({ seriesIndex: 0 }, [g, p])
    return { x, y }
  }, [cell.g, cell.p])
  await byTest('confusion-a').click({ position: at })
  await byTest('crops-range').waitFor({ timeout: WAIT })
  await page.waitForFunction(
    (n) => {
      const c = [...document.querySelectorAll('[data-testid="crops-dialog"] [data-testid="crop"]')]
      return c.length === n && c.every((e) => e.width > 0)
    },
    cell.n,
    { timeout: WAIT },
  )
  await page.waitForTimeout(300) // the dialog's fade-in, for the screenshot
  await shot('compare-crops')
  await page.keyboard.press('Escape')
  await byTest('crops-range').waitFor({ state: 'hidden', timeout: WAIT })

  // The per-class CSV: a header and one row per class.
  const [download] = await Promise.all([page.waitForEvent('download', { timeout: WAIT }), byTest('compare-csv').click()])
  const csv = fs.readFileSync(await download.path(), 'utf8').trimEnd().split('\r\n')
  assert.match(csv[0], /^class_id,name,instances,precision_a,precision_b,precision_delta,/)
  assert.equal(csv.length, 1 + nc)
  assert.equal(csv.length, 1 + cmp.delta.classes.length)

  // The server's right/wrong lists follow the same rule as match.js over the stored predictions.
  const { imageRight, matchDetections } = await import(path.join(repo, 'web/src/match.js'))
  const imagesOf = async (id) => new Map((await api(`/api/evaluations/${id}/images?filter=all&limit=500`)).images.map((im) => [im.sha, im]))
  const [ia, ib] = [await imagesOf(ea), await imagesOf(eb)]
  const rightA = (sha) => imageRight(ia.get(sha).labels, ia.get(sha).detections)
  const rightB = (sha) => imageRight(ib.get(sha).labels, ib.get(sha).detections)
  assert.deepEqual(cmp.images.a_right_b_wrong.map((x) => x.sha).sort(), [...ia.keys()].filter((s) => rightA(s) && !rightB(s)).sort())
  assert.deepEqual(cmp.images.b_right_a_wrong.map((x) => x.sha).sort(), [...ia.keys()].filter((s) => rightB(s) && !rightA(s)).sort())

  // An image from a list opens with both models' detections side by side. One-epoch
  // models are wrong on nearly every image, so when both lists are empty the page
  // gets the real comparison with one real image of the split listed (a stand-in list).
  let listed = cmp.images.a_right_b_wrong[0] || cmp.images.b_right_a_wrong[0]
  const stand = !listed
  if (stand) {
    const im = [...ia.values()].find((x) => x.labels.length > 0)
    listed = { sha: im.sha, path: im.path }
    await page.route('**/api/comparisons?*', async (route) => {
      const real = await (await route.fetch()).json()
      real.images.a_right_b_wrong = [listed]
      await route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(real) })
    })
    await page.reload()
  }
  const key = cmp.images.a_right_b_wrong.length || stand ? 'a_right_b_wrong' : 'b_right_a_wrong'
  const readsFrom = requests.length
  await byTest(`${key}-item`).first().click()
  await waitText('viewer-title', listed.path)
  // The viewer read that image's rows for both models (…/images?sha=), not the evaluations' image lists.
  const reads = requests.slice(readsFrom).map((r) => new URL(r.url)).filter((u) => /^\/api\/evaluations\/\d+\/images$/.test(u.pathname))
  assert.ok(reads.every((u) => /^[0-9a-f]{64}$/.test(u.searchParams.get('sha') || '')), reads.join('\n'))
  assert.deepEqual(
    new Set(reads.filter((u) => u.searchParams.get('sha') === listed.sha).map((u) => u.pathname)),
    new Set([`/api/evaluations/${ea}/images`, `/api/evaluations/${eb}/images`]),
  )
  if (stand) await page.unroute('**/api/comparisons?*')
  const panelBoxes = (i, what) => page.locator(`[data-testid="viewer-panel-${i}"] [data-testid="${what}"]`)
  const imA = ia.get(listed.sha)
  const imB = ib.get(listed.sha)
  for (const [i, im] of [[0, imA], [1, imB]]) {
    assert.equal(await panelBoxes(i, 'box').count(), im.labels.length)
    assert.equal(await panelBoxes(i, 'pred').count(), im.detections.filter((d) => d.score >= 0.25).length)
  }
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="viewer-image"] img')].every((i) => i.naturalWidth === 64), null, { timeout: WAIT })
  await shot('compare-side-by-side')

  // The confidence slider: at its low end every stored detection of the image is drawn.
  const before = await panelBoxes(0, 'pred').count()
  assert.ok(imA.detections.some((d) => d.score < 0.25), 'detections under 0.25 are stored')
  const runway = page.locator('[data-testid="viewer-conf"] .el-slider__runway')
  const rb = await runway.boundingBox()
  await runway.click({ position: { x: 1, y: rb.height / 2 } })
  const conf = Number(await textOf('viewer-conf-value'))
  assert.ok(conf <= 0.02, `conf ${conf}`)
  await page.waitForFunction(
    ([sel, n]) => document.querySelectorAll(sel).length === n,
    ['[data-testid="viewer-panel-0"] [data-testid="pred"]', imA.detections.filter((d) => d.score >= conf).length],
    { timeout: WAIT },
  )
  assert.notEqual(await panelBoxes(0, 'pred').count(), before)

  // TP/FP/FN: every drawn box's outcome is match.js's at this confidence and IoU, for 0.5 and 0.95.
  const statuses = (i, what) => panelBoxes(i, what).evaluateAll((els) => els.map((e) => e.getAttribute('data-status')))
  for (const iou of [0.5, 0.95]) {
    if (iou !== 0.5) {
      await byTest('viewer-iou').click()
      await byTest(`viewer-iou-${iou.toFixed(2)}`).click()
    }
    for (const [i, im] of [[0, imA], [1, imB]]) {
      const m = matchDetections(im.labels, im.detections, { conf, iouThreshold: iou })
      await waitText(`viewer-counts-${i}`, `TP ${m.tp} · FP ${m.fp} · FN ${m.fn}`)
      assert.deepEqual(await statuses(i, 'pred'), m.detections.map((d) => d.status))
      assert.deepEqual(await statuses(i, 'box'), m.labels.map((l) => l.status))
    }
  }
  const seen = new Set([...(await statuses(0, 'pred')), ...(await statuses(0, 'box')), ...(await statuses(1, 'pred')), ...(await statuses(1, 'box'))])
  assert.ok(seen.has('fp') && seen.has('fn'), [...seen].join(','))
  const colours = await page.locator('[data-testid="viewer-image"] rect').evaluateAll((els) => [...new Set(els.map((e) => e.getAttribute('stroke')))])
  assert.ok(colours.includes('#d1242f') && colours.includes('#f08c00'), colours.join(','))
  await shot('compare-viewer-outcomes')
  await page.keyboard.press('Escape')

  // The evaluation page of A: every image of the split, its matrix, its per-class CSV.
  await page.goto(`${base}/#/evaluations/${ea}`)
  await waitText('evaluation-title', `Evaluation #${ea}`)
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="evaluation-image"]').length === n, ia.size, { timeout: WAIT })
  await waitDrawn('evaluation-confusion', (d) => d.length === 1 && d[0].data.length === (nc + 1) ** 2, 'the matrix')
  const [perClass] = await Promise.all([page.waitForEvent('download', { timeout: WAIT }), byTest('evaluation-csv').click()])
  const rows = fs.readFileSync(await perClass.path(), 'utf8').trimEnd().split('\r\n')
  assert.equal(rows[0], 'class_id,name,images,instances,precision,recall,f1,map50,map50_95')
  assert.equal(rows.length, 1 + nc)
  await shot('evaluation')

  // The label audit page (issue 34): shapes audited with model A is stored on
  // the version; its page counts the kinds as the CLI does, sorts by score
  // and opens the box viewer with the labels and the predictions drawn.
  const audit = kestrelJson('dataset', 'audit', 'shapes', `model=${ma}`, `out=${path.join(tmp, 'audit')}`, 'top=0')
  const suspected = ['missing', 'spurious', 'wrong_class', 'localisation'].reduce((n, k) => n + audit.counts[k], 0)
  await page.goto(`${base}/#/datasets/shapes/audit`)
  await waitText('audit-title', `Label audit of ${audit.data}`)
  assert.match(await textOf('kind-errors'), new RegExp(`\\(${suspected}\\)$`))
  assert.match(await textOf('kind-ok'), new RegExp(`\\(${audit.counts.ok}\\)$`))
  if (suspected === 0) await byTest('kind-all').click()
  const shown = Math.min(25, suspected || audit.items.length)
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="audit-items"] tbody tr').length === n, shown, { timeout: WAIT })
  const scores = async () => (await page.locator('[data-testid="item-score"]').allInnerTexts()).map(Number)
  const first = await scores()
  assert.deepEqual(first, [...first].sort((x, y) => y - x), 'the review order: highest score first')
  assert.equal(first[0].toFixed(3), audit.items.find((it) => suspected === 0 || it.kind !== 'ok').score.toFixed(3))
  // A click on Score sorts ascending: the server's sort=-score page.
  await Promise.all([
    page.waitForResponse((r) => r.url().includes('sort=-score'), { timeout: WAIT }),
    page.locator('[data-testid="audit-items"] th', { hasText: 'Score' }).click(),
  ])
  await page.waitForFunction(() => {
    const v = [...document.querySelectorAll('[data-testid="item-score"]')].map((e) => Number(e.textContent))
    return v.length > 0 && v.every((x, i) => i === 0 || v[i - 1] <= x)
  }, null, { timeout: WAIT })
  const asc = await scores()
  assert.deepEqual(asc, [...asc].sort((x, y) => x - y))
  await page.locator('[data-testid="audit-items"] tbody tr').first().click()
  await byTest('viewer-title').waitFor({ timeout: WAIT })
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="viewer-image"] img')].every((i) => i.naturalWidth === 64), null, { timeout: WAIT })
  // Every label of the image (each is one item) and every prediction its items hold (all >= conf 0.25).
  const viewedPath = await textOf('viewer-title')
  const ofImage = audit.items.filter((it) => it.image === viewedPath)
  const predictions = new Set(ofImage.filter((it) => it.prediction).map((it) => it.prediction.index))
  assert.equal(await page.locator('[data-testid="viewer-panel-0"] [data-testid="box"]').count(), ofImage.filter((it) => it.label).length)
  assert.equal(await page.locator('[data-testid="viewer-panel-0"] [data-testid="pred"]').count(), predictions.size)
  await shot('dataset-audit-viewer')
  await page.keyboard.press('Escape')
  console.log(`compare: ${((Date.now() - started) / 1000).toFixed(1)} s`)
})

// The accessibility pass (issue 33 "Checks"): axe-core (web/node_modules,
// installed with the web deps) run on every page over the data the tests
// above made: no critical violation. axe is evaluated through the DevTools
// protocol, so the page's CSP does not see it.
test('accessibility: axe-core finds no critical violation on any page', async () => {
  const started = Date.now()
  const axeSource = fs.readFileSync(path.join(MODULES, 'axe-core', 'axe.min.js'), 'utf8')
  const jobs = kestrelJson('jobs', 'list').jobs
  const models = kestrelJson('models', 'list').models
  const evals = jobs.filter((j) => j.kind === 'val' && j.state === 'succeeded').map((j) => j.id)
  const pages = [
    ['home', 'home-breaker-state'],
    ['datasets', 'dataset-link-shapes'],
    ['datasets/shapes@v1', 'gallery-item'],
    ['datasets/leaky/diff?a=v1&b=v2', 'diff-count-box_changed'],
    ['jobs', 'jobs-table'],
    ['system', 'workers-table'],
    ['studies', 'studies-table'],
    ['runs', 'runs-table'],
  ]
  if (jobs.length) pages.push([`jobs/${jobs[jobs.length - 1].id}`, 'job-state'])
  // The Runs page's report over the train jobs the tests above made (runs_page.test.mjs checks both pages in depth).
  const trains = jobs.filter((j) => j.kind === 'train').map((j) => j.id)
  if (trains.length) pages.push([`report?runs=${trains.slice(0, 2).join(',')}`, 'report-summary'])
  if (models.length) pages.push(['models', `model-link-${models[0].ref}`], [`models/${models[0].ref}`, 'model-title'])
  // The compare test (with LibTorch) made the evaluations and the shapes label audit.
  if (evals.length >= 2) pages.push([`evaluations/${evals[0]}`, 'evaluation-title'], [`compare?a=${evals[0]}&b=${evals[1]}`, 'compare-headline'], ['datasets/shapes/audit', 'audit-items'])
  const failures = []
  for (const [where, ready] of pages) {
    await page.goto(`${base}/#/${where}`)
    await byTest(ready).first().waitFor({ timeout: WAIT })
    await page.evaluate(axeSource)
    const found = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] })
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => `${n.target.join(' ')} ${n.html.slice(0, 160)}`) }))
    })
    for (const v of found) {
      if (v.impact === 'critical') failures.push(`#/${where}: ${v.id} at ${v.nodes.join(', ')}`)
      else console.log(`axe #/${where}: ${v.impact} ${v.id} at ${v.nodes.join(', ')}`)
    }
  }
  console.log(`accessibility: ${pages.length} pages in ${Date.now() - started} ms`)
  assert.deepEqual(failures, [])
})

// Last: every page the tests opened ran under the UI's CSP without a
// violation (Chromium reports each on the console).
test('no page broke the Content-Security-Policy', () => {
  assert.deepEqual(cspViolations, [])
})
