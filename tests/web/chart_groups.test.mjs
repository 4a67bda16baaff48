// The job page's chart panels (web/src/chartGroups.js) alone: every series
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
