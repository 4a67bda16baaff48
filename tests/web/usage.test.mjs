// The System page's usage window (web/src/usage.js) alone: samples from
// successive /api/workers polls are kept once each, per worker, within the
// window; an old sample seen first is not charted; GPU only when measured.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { appendUsage, hasField, usageOption, usageText } from '../../web/src/usage.js'

const doc = (now, workers) => ({ now_ms: now, workers })
const sample = (ms, cpu, rss, extra = {}) => ({ sampled_ms: ms, interval_ms: 5000, cpu_percent: cpu, rss_mb: rss, jobs: [{ job: 1 }], ...extra })

test('each sample once, per worker, oldest dropped past the window', () => {
  const h = {}
  appendUsage(h, doc(100000, [{ id: 'a', usage: sample(99000, 90, 300) }, { id: 'b', usage: null }]))
  // The next poll repeats the latest sample: not a new point.
  appendUsage(h, doc(102000, [{ id: 'a', usage: sample(99000, 90, 300) }]))
  appendUsage(h, doc(104000, [{ id: 'a', usage: sample(104000, 150, 320) }, { id: 'b', usage: sample(103000, 20, 100) }]))
  assert.deepEqual(h.a, [[99000, 90, 300, null, null], [104000, 150, 320, null, null]])
  assert.deepEqual(h.b, [[103000, 20, 100, null, null]])
  appendUsage(h, doc(200000, [{ id: 'a', usage: sample(200000, 10, 310) }]), 60000)
  assert.deepEqual(h.a, [[200000, 10, 310, null, null]])
})

test('a sample already old when first seen (a stopped worker) is not charted', () => {
  const h = {}
  appendUsage(h, doc(10 * 60000, [{ id: 'gone', usage: sample(60000, 0, 0) }]))
  assert.deepEqual(h, {})
  assert.equal(hasField(h, 'cpu'), false)
})

test('charts: a line per worker over time, GPU only when measured', () => {
  const h = {}
  appendUsage(h, doc(5000, [{ id: 'w2', usage: sample(5000, 50, 200) }, { id: 'w1', usage: sample(5000, 80, 400, { gpu_util: 40, gpu_mem_mb: 1204 }) }]))
  const cpu = usageOption(h, 'cpu')
  assert.equal(cpu.xAxis.type, 'time')
  assert.deepEqual(cpu.series.map((s) => [s.name, s.data]), [['w1', [[5000, 80]]], ['w2', [[5000, 50]]]])
  assert.equal(cpu.tooltip.valueFormatter(97.5432), '97.54 %')
  assert.equal(hasField(h, 'gpuUtil'), true)
  assert.deepEqual(usageOption(h, 'gpuMem').series.map((s) => s.name), ['w1'])
  const noGpu = {}
  appendUsage(noGpu, doc(5000, [{ id: 'w2', usage: sample(5000, 50, 200) }]))
  assert.equal(hasField(noGpu, 'gpuUtil'), false)
  assert.equal(usageText(sample(1, 97.5, 312)), 'CPU 97.5 % · RSS 312 MB')
  assert.equal(usageText(sample(1, 97.5, 312, { gpu_util: 40, gpu_mem_mb: 1204 })), 'CPU 97.5 % · RSS 312 MB · GPU 40 %, 1204 MB')
  assert.equal(usageText(null), '')
})
