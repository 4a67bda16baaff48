// The curve smoothing and the zoom-window merge of the job page's training
// charts (web/src/smooth.js), without a browser.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mergeWindow, smoothEma, smoothGaussian, smoothRunningMean, smoothSeries } from '../../web/src/smooth.js'

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

test('running mean: a trailing window over the last k finite points', () => {
  const out = smoothRunningMean([[1, 1], [2, 3], [3, 5], [4, NaN], [5, 7]], 2)
  assert.deepEqual(out.map(([x]) => x), [1, 2, 3, 4, 5])
  close(out[0][1], 1)
  close(out[1][1], 2)
  close(out[2][1], 4)
  assert.ok(Number.isNaN(out[3][1]))
  close(out[4][1], 6) // (5 + 7) / 2: the NaN is skipped, not counted
  assert.deepEqual(smoothRunningMean([[1, 2], [2, 9]], 1), [[1, 2], [2, 9]])
})

test('gaussian: symmetric weights, renormalised at the ends, a single spike spreads but keeps its mass', () => {
  const spike = [0, 0, 0, 10, 0, 0, 0].map((y, i) => [i, y])
  const out = smoothGaussian(spike, 1)
  // Symmetric around the spike, highest at it, and lower than the raw spike.
  close(out[2][1], out[4][1])
  close(out[1][1], out[5][1])
  assert.ok(out[3][1] < 10 && out[3][1] > out[2][1] && out[2][1] > out[1][1])
  // Point 3 by hand: weights e^(-d^2/2) for d = 0..3, all seven points in range.
  const w = [0, 1, 2, 3].map((d) => Math.exp(-(d * d) / 2))
  close(out[3][1], (10 * w[0]) / (w[0] + 2 * (w[1] + w[2] + w[3])))
  // A constant curve stays constant up to the ends (renormalised weights).
  for (const [, y] of smoothGaussian([[1, 4], [2, 4], [3, 4], [4, 4], [5, 4]], 3)) close(y, 4)
  assert.deepEqual(smoothGaussian([[1, 2], [2, 9]], 0), [[1, 2], [2, 9]])
  const gap = smoothGaussian([[1, 2], [2, NaN], [3, 2]], 2)
  close(gap[0][1], 2)
  assert.ok(Number.isNaN(gap[1][1]))
})

test('smoothSeries maps the one slider to each kind', () => {
  const data = [1, 5, 2, 8, 3, 9, 4].map((y, i) => [i, y])
  assert.deepEqual(smoothSeries(data, 'ema', 0.6), smoothEma(data, 0.6))
  assert.deepEqual(smoothSeries(data, 'gaussian', 0.1), smoothGaussian(data, 2))
  assert.deepEqual(smoothSeries(data, 'mean', 0.1), smoothRunningMean(data, 6))
  for (const kind of ['ema', 'gaussian', 'mean']) assert.deepEqual(smoothSeries(data, kind, 0), data)
})
