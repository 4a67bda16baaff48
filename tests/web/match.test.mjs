// The box viewer's TP/FP/FN matching (web/src/match.js) and the per-class
// CSV builder (web/src/csv.js), without a browser.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { IOU_STEPS, imageRight, iou, matchDetections } from '../../web/src/match.js'
import { classRowsCsv, compareClassesCsv, toCsv } from '../../web/src/csv.js'

const close = (a, b) => assert.ok(Math.abs(a - b) < 1e-12, `${a} != ${b}`)

test('iou: identical, disjoint, touching, half overlap', () => {
  close(iou([0, 0, 10, 10], [0, 0, 10, 10]), 1)
  close(iou([0, 0, 10, 10], [20, 20, 30, 30]), 0)
  close(iou([0, 0, 10, 10], [10, 0, 20, 10]), 0)
  close(iou([0, 0, 10, 10], [5, 0, 15, 10]), 50 / 150)
  close(iou([0, 0, 0, 0], [0, 0, 0, 0]), 0)
})

test('greedy by score: the higher score takes the label, the other is an FP', () => {
  const labels = [{ class_id: 0, box: [0, 0, 10, 10] }]
  const dets = [
    { class_id: 0, score: 0.4, box: [0, 0, 10, 10] }, // perfect box, lower score
    { class_id: 0, score: 0.9, box: [1, 0, 11, 10] }, // IoU 0.818
  ]
  const m = matchDetections(labels, dets, { iouThreshold: 0.5 })
  assert.deepEqual(m.detections.map((d) => [d.index, d.status, d.label]), [[1, 'tp', 0], [0, 'fp', -1]])
  assert.deepEqual(m.labels.map((l) => [l.status, l.detection]), [['tp', 1]])
  assert.deepEqual([m.tp, m.fp, m.fn], [1, 1, 0])
})

test('the best IoU among unmatched labels of the same class; another class never matches', () => {
  const labels = [
    { class_id: 0, box: [0, 0, 10, 10] },
    { class_id: 0, box: [2, 0, 12, 10] },
    { class_id: 1, box: [1, 0, 11, 10] },
  ]
  const dets = [{ class_id: 0, score: 0.8, box: [1, 0, 11, 10] }, { class_id: 0, score: 0.7, box: [1, 0, 11, 10] }]
  const m = matchDetections(labels, dets, { iouThreshold: 0.5 })
  // Both class-0 labels are at IoU 0.818 from the box: the first found wins the tie, the second detection takes the other.
  assert.deepEqual(m.detections.map((d) => d.label), [0, 1])
  assert.deepEqual(m.labels.map((l) => l.status), ['tp', 'tp', 'fn'])
  assert.deepEqual([m.tp, m.fp, m.fn], [2, 0, 1])
})

test('the IoU threshold: a TP at 0.5 is an FP + FN at 0.85 (inclusive bound)', () => {
  const labels = [{ class_id: 2, box: [0, 0, 10, 10] }]
  const dets = [{ class_id: 2, score: 0.5, box: [0, 0, 10, 12.5] }] // IoU 0.8
  assert.deepEqual(
    IOU_STEPS.map((t) => matchDetections(labels, dets, { iouThreshold: t }).tp),
    [1, 1, 1, 1, 1, 1, 1, 0, 0, 0],
  )
  const at85 = matchDetections(labels, dets, { iouThreshold: 0.85 })
  assert.deepEqual([at85.tp, at85.fp, at85.fn], [0, 1, 1])
  assert.equal(matchDetections(labels, dets, { iouThreshold: 0.8 }).tp, 1)
  assert.deepEqual(IOU_STEPS, [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95])
})

test('the confidence cut drops detections before matching (score >= conf is kept)', () => {
  const labels = [{ class_id: 0, box: [0, 0, 10, 10] }]
  const dets = [
    { class_id: 0, score: 0.3, box: [0, 0, 10, 10] },
    { class_id: 0, score: 0.2, box: [50, 50, 60, 60] },
    { class_id: 0, score: 0.1, box: [0, 0, 10, 10] },
  ]
  const all = matchDetections(labels, dets, { conf: 0 })
  assert.deepEqual([all.tp, all.fp, all.fn], [1, 2, 0])
  const cut = matchDetections(labels, dets, { conf: 0.2 })
  assert.deepEqual(cut.detections.map((d) => d.index), [0, 1])
  assert.deepEqual([cut.tp, cut.fp, cut.fn], [1, 1, 0])
  const none = matchDetections(labels, dets, { conf: 0.5 })
  assert.deepEqual([none.tp, none.fp, none.fn], [0, 0, 1])
  // The input is not changed.
  assert.deepEqual(Object.keys(dets[0]).sort(), ['box', 'class_id', 'score'])
})

test('imageRight: the compare rule (conf 0.25, IoU 0.5)', () => {
  const labels = [{ class_id: 0, box: [0, 0, 10, 10] }]
  assert.equal(imageRight(labels, [{ class_id: 0, score: 0.9, box: [0, 0, 10, 10] }]), true)
  assert.equal(imageRight(labels, [{ class_id: 0, score: 0.2, box: [0, 0, 10, 10] }]), false) // the label is missed
  assert.equal(imageRight(labels, [{ class_id: 0, score: 0.9, box: [0, 0, 10, 10] }, { class_id: 1, score: 0.3, box: [0, 0, 10, 10] }]), false)
  assert.equal(imageRight([], []), true)
  assert.equal(imageRight([], [{ class_id: 0, score: 0.1, box: [0, 0, 1, 1] }]), true)
})

test('csv: header + rows, quoting, CRLF, formula cells neutralised', () => {
  const text = toCsv([{ key: 'a', label: 'A' }, { key: 'b' }], [{ a: 'x,y', b: 1.5 }, { a: 'say "hi"', b: null }, { a: '=1+1', b: -2 }])
  assert.equal(text, 'A,b\r\n"x,y",1.5\r\n"say ""hi""",\r\n\'=1+1,-2\r\n')
})

test('csv: an evaluation\'s per-class table and a comparison\'s deltas', () => {
  const classes = [
    { class_id: 0, name: 'circle', images: 4, instances: 6, precision: 0.5, recall: 0.25, f1: 1 / 3, map50: 0.4, map5095: 0.2, ap: [0.4] },
    { class_id: 1, name: 'rect, big', images: 3, instances: 3, precision: 1, recall: 1, f1: 1, map50: 0.9, map5095: 0.7, ap: [0.9] },
  ]
  const lines = classRowsCsv(classes).trimEnd().split('\r\n')
  assert.equal(lines[0], 'class_id,name,images,instances,precision,recall,f1,map50,map50_95')
  assert.equal(lines.length, 3)
  assert.equal(lines[1], `0,circle,4,6,0.5,0.25,${1 / 3},0.4,0.2`)
  assert.equal(lines[2], '1,"rect, big",3,3,1,1,1,0.9,0.7')
  const delta = [{ class_id: 0, name: 'circle', instances: 6, precision: { a: 0.5, b: 0.75, delta: 0.25 }, map5095: { a: 0.2, b: 0.1, delta: -0.1 } }]
  const c = compareClassesCsv(delta, ['precision', 'map5095']).trimEnd().split('\r\n')
  assert.deepEqual(c, ['class_id,name,instances,precision_a,precision_b,precision_delta,map50_95_a,map50_95_b,map50_95_delta', '0,circle,6,0.5,0.75,0.25,0.2,0.1,-0.1'])
})
