// The Runs page's table and the report's file alone (web/src/runsTable.js,
// web/src/reportHtml.js): cells from GET /api/runs rows (best = max of a
// metric, min of a loss), sorting with nulls last and pins first, grouping
// by a config key with count, mean and best, the view's URL text, the
// config comparison and the saved HTML (escaped, charts as data URLs, a CSP
// that allows no request).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import {
  cellValue,
  columnChoices,
  decodeColumns,
  decodeIds,
  decodeSort,
  encodeColumns,
  encodeSort,
  fmtCell,
  groupRuns,
  lowerIsBetter,
  sortRuns,
} from '../../web/src/runsTable.js'
import { bestMap } from '../../web/src/runs.js'
import { buildReportHtml, configComparison, escapeHtml, reportFileName, summarySeries, summaryTable } from '../../web/src/reportHtml.js'

const MAP = 'metrics/mAP50-95(B)'
const LOSS = 'train/box_loss'
const s = (min, max, last) => ({ axis: 'epoch', count: 3, min, max, last, min_x: 1, max_x: 2, last_x: 3 })
const RUNS = [
  { id: 3, name: 'c', state: 'succeeded', duration_s: 30, config: { lr0: 0.01, model: 'n' }, metrics: { [MAP]: s(0.1, 0.5, 0.4), [LOSS]: s(1.0, 3.0, 1.2) } },
  { id: 2, name: 'b', state: 'running', duration_s: null, config: { lr0: 0.02, model: 'n' }, metrics: { [MAP]: s(0.1, 0.7, 0.6), [LOSS]: s(0.8, 2.0, 0.9) } },
  { id: 1, name: 'a', state: 'succeeded', duration_s: 10, config: { lr0: 0.01, model: 's' }, metrics: {} },
]

test('cells: a metric\'s best is its max, a loss\'s its min; config values; nulls', () => {
  assert.equal(lowerIsBetter(LOSS), true)
  assert.equal(lowerIsBetter(MAP), false)
  assert.equal(cellValue(RUNS[0], `best:${MAP}`), 0.5)
  assert.equal(cellValue(RUNS[0], `last:${MAP}`), 0.4)
  assert.equal(cellValue(RUNS[0], `best:${LOSS}`), 1.0)
  assert.equal(cellValue(RUNS[2], `best:${MAP}`), null)
  assert.equal(cellValue(RUNS[1], 'cfg:lr0'), 0.02)
  assert.equal(cellValue(RUNS[1], 'cfg:nope'), null)
  assert.equal(cellValue(RUNS[1], 'duration'), null)
  assert.equal(cellValue(RUNS[0], 'bogus'), null)
  assert.equal(fmtCell(null), '—')
  assert.equal(fmtCell(0.123456), '0.1235')
})

test('sorting: by a column either way, nulls last both ways, pins first', () => {
  const ids = (rs) => rs.map((r) => r.id)
  assert.deepEqual(ids(sortRuns(RUNS, { col: `best:${MAP}`, desc: true })), [2, 3, 1])
  assert.deepEqual(ids(sortRuns(RUNS, { col: `best:${MAP}`, desc: false })), [3, 2, 1])
  assert.deepEqual(ids(sortRuns(RUNS, { col: 'duration', desc: false })), [1, 3, 2])
  assert.deepEqual(ids(sortRuns(RUNS, { col: 'cfg:model', desc: true })), [1, 3, 2])
  assert.deepEqual(ids(sortRuns(RUNS, { col: '', desc: false })), [3, 2, 1])
  assert.deepEqual(ids(sortRuns(RUNS, { col: `best:${MAP}`, desc: true }, [1])), [1, 2, 3])
})

test('grouping by a config key: count, mean and best per numeric column', () => {
  const g = groupRuns(RUNS, 'lr0', [`best:${MAP}`, `best:${LOSS}`, 'cfg:model', 'duration'])
  assert.deepEqual(g.map((x) => [x.label, x.count]), [['0.01', 2], ['0.02', 1]])
  assert.deepEqual(g[0].agg[`best:${MAP}`], { n: 1, mean: 0.5, best: 0.5 })
  assert.deepEqual(g[0].agg.duration, { n: 2, mean: 20, best: 10 })
  assert.equal(g[0].agg['cfg:model'], undefined)
  const byModel = groupRuns(RUNS, 'model', [`best:${LOSS}`])
  assert.deepEqual(byModel[0].agg[`best:${LOSS}`], { n: 2, mean: 0.9, best: 0.8 })
  assert.equal(groupRuns(RUNS, 'nope', [])[0].label, '(not set)')
})

test('the view as URL text and back; bad text ignored', () => {
  const cols = [`best:${MAP}`, 'cfg:lr0', 'duration']
  assert.deepEqual(decodeColumns(encodeColumns(cols)), cols)
  assert.deepEqual(decodeColumns('bogus|cfg:x'), ['cfg:x'])
  assert.equal(decodeColumns(''), null)
  assert.deepEqual(decodeSort(encodeSort({ col: `best:${MAP}`, desc: true })), { col: `best:${MAP}`, desc: true })
  assert.deepEqual(decodeSort('x:sideways'), { col: '', desc: false })
  assert.deepEqual(decodeIds('3,x,0,5,-1'), [3, 5])
  const choices = columnChoices({ series: [MAP], keys: ['lr0'] })
  assert.deepEqual(choices.map((c) => c.options.length), [1, 1, 1, 5])
})

test('the report: config differences, summary best marked, a self-contained escaped file', () => {
  const cfg = configComparison(RUNS)
  assert.deepEqual(cfg.map((r) => [r.key, r.differs]), [['lr0', true], ['model', true]])
  assert.deepEqual(configComparison([RUNS[0], { ...RUNS[0], id: 9 }]).map((r) => r.differs), [false, false])
  assert.deepEqual(summarySeries(RUNS), [MAP, LOSS])
  const t = summaryTable(RUNS, [MAP, LOSS])
  assert.deepEqual(t.rows.map((r) => r.cells.map((c) => c.best)), [[false, false], [true, true], [false, false]])
  const png = 'data:image/png;base64,iVBORw0KGgo='
  const html = buildReportHtml({
    title: 'lr <sweep>', note: 'a & b\n"quoted"', created: '2026-01-01', runs: RUNS, series: [MAP, LOSS],
    charts: [{ title: 'Validation', dataUrl: png }, { title: 'evil', dataUrl: 'https://example.invalid/x.png' }],
  })
  assert.ok(html.startsWith('<!doctype html>'))
  assert.ok(html.includes('<title>lr &lt;sweep&gt;</title>'))
  assert.ok(html.includes('a &amp; b\n&quot;quoted&quot;'))
  assert.ok(html.includes(`src="${png}"`))
  assert.ok(!html.includes('example.invalid'), 'only data: images')
  assert.ok(html.includes("default-src 'none'"))
  assert.ok(!/<script|<link|src="http|href="http/i.test(html), 'nothing that loads or runs')
  assert.equal((html.match(/<tr class="differs">/g) || []).length, 2)
  assert.equal(escapeHtml(`<'&">`), '&lt;&#39;&amp;&quot;&gt;')
  assert.equal(reportFileName('lr <sweep> / 2'), 'lr-sweep-2.html')
  assert.equal(reportFileName('///'), 'report.html')
})

test('the jobs table\'s best mAP reads the stored result (map50_95 beside the weights\' path "best")', () => {
  // app::AttemptResult::ToJson of a train attempt: best/last are paths, epochs a count.
  const stored = { kind: 'train', best: '/h/jobs/7/attempt-1/weights/best.safetensors', map50: 0.81, map50_95: 0.55, best_epoch: 9, epochs: 10, validated: true }
  assert.equal(bestMap({ result: stored }), 0.55)
  assert.equal(bestMap({ result: { best: { map50_95: 0.4567 } } }), 0.4567)
  assert.equal(bestMap({ result: { kind: 'train', best: '/x', validated: false } }), null)
  assert.equal(bestMap({ result: null }), null)
})
