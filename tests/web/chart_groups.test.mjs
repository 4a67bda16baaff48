// The job page's chart panels (web/src/chartGroups.js), ETA and attempt helpers alone: every series
// the metrics route lists lands in a panel by prefix, the x-axis conversions
// (epoch / step / wall time) and the tooltip's 4 significant digits.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { convertX, groupOf, groupsOf, itersPerEpoch, shortName, sig4 } from '../../web/src/chartGroups.js'

test('every scalar gets a panel, grouped by prefix, known ones first', () => {
  const names = [
    ['train/box_loss', 'epoch'], ['train/cls_loss', 'epoch'], ['metrics/mAP50(B)', 'epoch'], ['val/box_loss', 'epoch'],
    ['lr/pg0', 'epoch'], ['lr/pg1', 'epoch'], ['time', 'epoch'], ['iter/box_loss', 'step'], ['gpu/mem_mb', 'step'], ['fitness', 'epoch'],
  ].map(([name, axis]) => ({ name, axis }))
  const groups = groupsOf(names)
  assert.deepEqual(groups.map((g) => g.key), ['map', 'loss', 'val', 'lr', 'iter', 'time', 'epoch-fitness', 'step-gpu'])
  assert.equal(groupOf('lr/pg2', 'epoch').key, 'lr')
  // The same prefix on the other axis is another panel.
  assert.equal(groupOf('lr/pg0', 'step').key, 'step-lr')
  for (const n of names) assert.ok(groups.some((g) => g.key === groupOf(n.name, n.axis).key), n.name)
  assert.equal(shortName('metrics/mAP50-95(B)'), 'mAP50-95(B)')
  assert.equal(shortName('time'), 'time')
})

test('x axes: epoch to step and back, wall time from the time series', () => {
  const time = [[1, 10], [2, 30], [3, 60]]
  assert.deepEqual(convertX([[1, 5], [2, 6]], 'epoch', 'step', 100, time), [[100, 5], [200, 6]])
  assert.deepEqual(convertX([[50, 1], [250, 2]], 'step', 'epoch', 100, time), [[0.5, 1], [2.5, 2]])
  assert.deepEqual(convertX([[1, 5], [3, 7], [4, 8]], 'epoch', 'time', 100, time), [[10, 5], [60, 7]])
  // Steps between epoch ends: linear between them (from 0 s before epoch 1).
  assert.deepEqual(convertX([[50, 1], [150, 2]], 'step', 'time', 100, time), [[5, 1], [20, 2]])
  // Unknown iterations per epoch: nothing to place.
  assert.deepEqual(convertX([[1, 5]], 'epoch', 'step', 0, time), [])
  assert.deepEqual(convertX([[1, 5]], 'epoch', 'epoch', 0, null), [[1, 5]])
  assert.equal(itersPerEpoch({ iterations: 40, epochs: 4 }, {}), 10)
  assert.equal(itersPerEpoch(null, { a: { axis: 'step', overview: [[1, 0], [30, 0]] }, b: { axis: 'epoch', overview: [[3, 0]] } }), 10)
})

test('tooltip numbers have 4 significant digits', () => {
  assert.equal(sig4(0.123456789), '0.1235')
  assert.equal(sig4(0.000123456), '0.0001235')
  assert.equal(sig4(1234.5678), '1235')
  assert.equal(sig4(2), '2')
  assert.equal(sig4(null), '—')
})

// The job page's other helpers: the smoothed ETA (web/src/eta.js) and the
// attempt outcome text (web/src/attempts.js).
import { createEtaSmoother, fmtEta } from '../../web/src/eta.js'
import { attemptFailureText, attemptOutcome } from '../../web/src/attempts.js'

test('the ETA follows a lasting change but not a single swing', () => {
  const eta = createEtaSmoother()
  assert.equal(eta.update(86, 0, 1), 86)
  const swung = eta.update(384, 1000, 1)
  assert.ok(swung > 100 && swung < 160, `one 384 s report moves it to ${swung}`)
  const back = eta.update(147, 2000, 1)
  assert.ok(Math.abs(back - swung) < 15, `then 147: ${back}`)
  // It counts down between reports, never below 0.
  assert.equal(eta.at(1000 * 1e6), 0)
  // A new attempt starts over.
  assert.equal(eta.update(500, 3000, 2), 500)
  // A lasting change comes through.
  let v = 0
  for (let i = 0; i < 30; i++) v = eta.update(100, 4000 + i, 2)
  assert.ok(Math.abs(v - 100) < 5, `${v}`)
  assert.equal(fmtEta(147), '2 min 27 s')
  assert.equal(fmtEta(45), '45 s')
  assert.equal(fmtEta(3900), '1 h 05 min')
})

test('a cancelled attempt is not a failure, and its text has no empty fields', () => {
  const cancelled = { succeeded: false, ended_ms: 5, stage: '', failure_class: '', reason: 'cancelled', message: 'cancelled by the user' }
  assert.deepEqual(attemptOutcome(cancelled), { text: 'cancelled', type: 'info' })
  assert.equal(attemptFailureText(cancelled), 'cancelled by the user')
  const oom = { succeeded: false, ended_ms: 5, stage: 'train', failure_class: 'retryable', reason: 'oom', message: 'CUDA out of memory' }
  assert.deepEqual(attemptOutcome(oom), { text: 'failed', type: 'danger' })
  assert.equal(attemptFailureText(oom), 'train / retryable: oom: CUDA out of memory')
  assert.equal(attemptFailureText({ succeeded: false, ended_ms: 5, stage: '', failure_class: '', reason: 'lost', message: '' }), 'lost')
  assert.deepEqual(attemptOutcome({ succeeded: false, ended_ms: 0 }), { text: 'running', type: 'primary' })
  assert.equal(attemptFailureText({ succeeded: true, ended_ms: 5 }), '')
})

// The worker's usage samples (docs/jobs.md "System usage"): sys/* on the
// time axis, percentages and megabytes in two panels of their own, and
// their wall seconds placed on epochs and steps through the run's time series.
test('usage samples: a system panel per unit, wall seconds onto epochs and steps', () => {
  const names = [
    ['sys/cpu_percent', 'time'], ['sys/rss_mb', 'time'], ['sys/gpu_util', 'time'], ['sys/gpu_mem_mb', 'time'], ['sys/threads', 'time'],
    ['train/box_loss', 'epoch'],
  ].map(([name, axis]) => ({ name, axis }))
  const groups = groupsOf(names)
  assert.deepEqual(groups.map((g) => g.key), ['loss', 'sys-util', 'sys-mem', 'time-sys'])
  assert.equal(groupOf('sys/cpu_percent', 'time').key, 'sys-util')
  assert.equal(groupOf('sys/gpu_util', 'time').key, 'sys-util')
  assert.equal(groupOf('sys/rss_mb', 'time').key, 'sys-mem')
  assert.equal(groupOf('sys/gpu_mem_mb', 'time').key, 'sys-mem')
  assert.match(groupOf('sys/cpu_percent', 'time').title, /CPU/)
  assert.match(groupOf('sys/rss_mb', 'time').title, /MB/)
  // Another axis is another panel, as for every prefix.
  assert.equal(groupOf('sys/cpu_percent', 'epoch').key, 'epoch-sys')
  const time = [[1, 10], [2, 30], [3, 60]]
  // 5 s is half of epoch 1, 20 s half of epoch 2; 70 s is past the last epoch end.
  assert.deepEqual(convertX([[5, 90], [20, 80], [70, 70]], 'time', 'epoch', 100, time), [[0.5, 90], [1.5, 80]])
  assert.deepEqual(convertX([[5, 90], [20, 80]], 'time', 'step', 100, time), [[50, 90], [150, 80]])
  assert.deepEqual(convertX([[5, 90]], 'time', 'step', 0, time), [])
  assert.deepEqual(convertX([[5, 90]], 'time', 'epoch', 100, null), [])
  assert.deepEqual(convertX([[5, 90]], 'time', 'time', 0, null), [[5, 90]])
})
