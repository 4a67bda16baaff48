// The Studies pages' data shaping (web/src/studies.js) alone: no browser,
// no server. Run: node --test tests/web/studies.test.mjs
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { bestSoFar, curvesOption, fmtParam, historyOption, parallelOption, trialCurve } from '../../web/src/studies.js'

const doc = {
  study: { name: 's', state: 'running', settings: { metric: 'fitness', direction: 'maximize', trials: 8 } },
  space: {
    params: [
      { key: 'lr0', kind: 'float', low: 1e-4, high: 0.1, log: true },
      { key: 'optimizer', kind: 'categorical', choices: ['SGD', 'AdamW'] },
    ],
    fixed: {},
  },
  trials: [
    { number: 2, state: 'succeeded', params: { lr0: 0.01, optimizer: 'SGD' }, value: 0.2, intermediate: [0.1, 0.2] },
    { number: 0, state: 'succeeded', params: { lr0: 0.001, optimizer: 'AdamW' }, value: 0.3, intermediate: [0.2, 0.3] },
    { number: 1, state: 'pruned', params: { lr0: 0.05, optimizer: 'SGD' }, value: null, intermediate: [0.05, 0.06, 0.07], pruned_at: 1 },
    { number: 3, state: 'failed', params: { lr0: 0.09, optimizer: 'SGD' }, value: null, intermediate: [] },
    { number: 4, state: 'succeeded', params: { lr0: 0.002, optimizer: 'AdamW' }, value: 0.5, intermediate: [0.3, 0.5] },
  ],
}

test('best so far runs over succeeded trials in number order', () => {
  assert.deepEqual(bestSoFar(doc.trials, true), [[0, 0.3], [2, 0.3], [4, 0.5]])
  assert.deepEqual(bestSoFar(doc.trials, false), [[0, 0.3], [2, 0.2], [4, 0.2]])
})

test('a pruned trial\'s curve ends at its rung even when it reported more', () => {
  assert.deepEqual(trialCurve(doc.trials[2]), [[1, 0.05]])
  assert.deepEqual(trialCurve(doc.trials[0]), [[1, 0.1], [2, 0.2]])
  const c = curvesOption(doc)
  assert.equal(c.series.length, 4) // the failed trial reported nothing
  const pruned = c.series.find((s) => s.name === 'trial 1')
  assert.equal(pruned.lineStyle.type, 'dashed')
  assert.equal(pruned.data.length, 1)
})

test('history: a dot per succeeded trial and a step line of the best', () => {
  const h = historyOption(doc)
  assert.deepEqual(h.series[0].data.map((p) => p.value), [[2, 0.2], [0, 0.3], [4, 0.5]])
  assert.equal(h.series[1].step, 'end')
  assert.equal(h.yAxis.name, 'fitness')
})

test('parallel coordinates: an axis per param (log, category) and the objective', () => {
  const p = parallelOption(doc)
  assert.deepEqual(p.parallelAxis.map((a) => [a.name, a.type]), [['lr0', 'log'], ['optimizer', 'category'], ['fitness', 'value']])
  assert.deepEqual(p.parallelAxis[1].data, ['SGD', 'AdamW'])
  assert.equal(p.series[0].data.length, 3)
  assert.deepEqual(p.series[0].data[2].value, [0.002, 'AdamW', 0.5])
  assert.equal(p.visualMap.dimension, 2)
  assert.deepEqual([p.visualMap.min, p.visualMap.max], [0.2, 0.5])
})

test('params are shown to 4 significant digits, choices as text', () => {
  assert.equal(fmtParam(0.0123456), '0.01235')
  assert.equal(fmtParam(3), '3')
  assert.equal(fmtParam('AdamW'), 'AdamW')
  assert.equal(fmtParam(undefined), '—')
})
