// The dataset page's box statistic charts (web/src/boxStats.js), path
// wrapping (web/src/pathText.js) and the box labels' text colour
// (web/src/boxes.js), without a browser.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { aspectOption, boxesPerImageOption, densityCells, densityOption, ratioText } from '../../web/src/boxStats.js'
import { pathSegments } from '../../web/src/pathText.js'

test('a density matrix becomes heatmap cells [x, y, count], empty cells left out', () => {
  const m = [
    [0, 2],
    [5, 0],
  ]
  assert.deepEqual(densityCells(m), [
    [1, 0, 2],
    [0, 1, 5],
  ])
  const opt = densityOption(m, 2, { xName: 'x', yName: 'y', yDown: true })
  assert.equal(opt.visualMap.max, 5)
  assert.equal(opt.yAxis.inverse, true, 'centres: y grows downwards as in the image')
  assert.deepEqual(opt.xAxis.data, ['0', '0.5'])
  assert.equal(opt.tooltip.formatter({ data: [1, 0, 2] }), 'x 0.50–1.00, y 0.00–0.50: 2 boxes')
  assert.equal(densityOption([[0]], 1, { xName: 'w', yName: 'h' }).visualMap.max, 1, 'no boxes: a valid scale')
})

test('aspect bins are named by their ratios, the end bins open', () => {
  const edges = [0.125, 0.25, 0.5, 1, 2, 4, 8]
  const opt = aspectOption({ edges, counts: [1, 0, 0, 3, 0, 2] })
  assert.deepEqual(opt.xAxis.data, ['< 0.25', '0.25–0.5', '0.5–1', '1–2', '2–4', '≥ 4'])
  assert.deepEqual(opt.series[0].data, [1, 0, 0, 3, 0, 2])
  assert.equal(ratioText(2 ** 0.5), '1.4')
  assert.equal(ratioText(0.125), '0.13')
})

test('boxes per image: the last bin reads N+ only when it is open', () => {
  assert.deepEqual(boxesPerImageOption({ counts: [1, 0, 2], last_open: false }).xAxis.data, ['0', '1', '2'])
  assert.deepEqual(boxesPerImageOption({ counts: [1, 0, 2], last_open: true }).xAxis.data, ['0', '1', '2+'])
})

test('paths are cut after separators, never inside a name', () => {
  assert.deepEqual(pathSegments('images/train/IMG_0001.jpg:3 (class)'), ['images/', 'train/', 'IMG_', '0001.', 'jpg:3 (class)'])
  assert.deepEqual(pathSegments('a-b\\c'), ['a-', 'b\\', 'c'])
  assert.equal(pathSegments('x/y_z.png').join(''), 'x/y_z.png')
  assert.deepEqual(pathSegments(''), [])
  assert.deepEqual(pathSegments(undefined), [])
})

test('box labels: black on light class colours, white on dark ones', async () => {
  const { textOn } = await import('../../web/src/boxes.js')
  assert.equal(textOn('#42d4f4'), '#000') // cyan
  assert.equal(textOn('#ffd8b1'), '#000')
  assert.equal(textOn('#000075'), '#fff') // navy
  assert.equal(textOn('#800000'), '#fff')
  assert.equal(textOn('nope'), '#fff')
})
