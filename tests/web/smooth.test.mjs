// The curve smoothing and the zoom-window merge of the job page's training
// charts (web/src/smooth.js), without a browser.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mergeWindow, smoothEma } from '../../web/src/smooth.js'

const close = (a, b) => assert.ok(Math.abs(a - b) < 1e-12, `${a} != ${b}`)

test('weight 0 returns the points unchanged (a copy)', () => {
  const data = [[1, 3], [2, 5]]
  const out = smoothEma(data, 0)
  assert.deepEqual(out, data)
  assert.notEqual(out[0], data[0])
})

test('debiased EMA: the first point is the raw one, later ones follow the recurrence', () => {
  const out = smoothEma([[1, 10], [2, 0], [3, 0]], 0.5)
  close(out[0][1], 10) // 0.5*10 / (1 - 0.5)
  close(out[1][1], 2.5 / 0.75) // (0.5*5 + 0) / (1 - 0.25)
  close(out[2][1], 1.25 / 0.875)
  assert.deepEqual(out.map(([x]) => x), [1, 2, 3])
})

test('a constant curve stays constant at every weight', () => {
  for (const w of [0.3, 0.6, 0.9, 0.99]) for (const [, y] of smoothEma([[1, 4], [2, 4], [3, 4], [4, 4]], w)) close(y, 4)
})

test('non-finite values pass through and are not averaged in', () => {
  const out = smoothEma([[1, 2], [2, NaN], [3, 2]], 0.9)
  close(out[0][1], 2)
  assert.ok(Number.isNaN(out[1][1]))
  close(out[2][1], 2)
})

test('mergeWindow replaces the overview inside the window only', () => {
  const overview = [[1, 1], [5, 5], [9, 9], [13, 13]]
  const window = [[5, 50], [6, 60], [7, 70], [8, 80], [9, 90]]
  assert.deepEqual(mergeWindow(overview, window, 5, 9), [[1, 1], [5, 50], [6, 60], [7, 70], [8, 80], [9, 90], [13, 13]])
})
