// Predictions against ground truth for the box viewer's TP/FP/FN colours,
// computed in the browser so the IoU threshold and the confidence cut can
// move without asking the server. Boxes are [x1, y1, x2, y2] in the image's
// pixels (the evaluation routes' `box`).
//
// The rule is the one of the evaluation's "right" images (docs/evaluation.md,
// `kestrel compare`): the detections with score >= conf, in descending
// score (ties: the order given), each take the unmatched label of the same
// class with the highest IoU, if that IoU is >= the threshold. A matched
// detection is a TP, an unmatched one an FP; an unmatched label is an FN.

export function iou(a, b) {
  const iw = Math.min(a[2], b[2]) - Math.max(a[0], b[0])
  const ih = Math.min(a[3], b[3]) - Math.max(a[1], b[1])
  if (iw <= 0 || ih <= 0) return 0
  const inter = iw * ih
  const area = (r) => Math.max(0, r[2] - r[0]) * Math.max(0, r[3] - r[1])
  const union = area(a) + area(b) - inter
  return union > 0 ? inter / union : 0
}

// labels: [{class_id, box}], detections: [{class_id, score, box}].
// Returns {detections: [{index, class_id, score, box, status: 'tp'|'fp', label, iou}]
// (only those with score >= conf, highest score first), labels: [{index,
// class_id, box, status: 'tp'|'fn', detection}], tp, fp, fn}; `label` /
// `detection` are indexes into the inputs (-1: unmatched).
export function matchDetections(labels, detections, { iouThreshold = 0.5, conf = 0 } = {}) {
  const kept = []
  detections.forEach((d, index) => {
    if (d.score >= conf) kept.push({ ...d, index })
  })
  // A stable sort: equal scores keep their input order.
  kept.sort((p, q) => q.score - p.score)
  const owner = labels.map(() => -1)
  const outDets = kept.map((d) => {
    let best = -1
    let bestIou = 0
    labels.forEach((l, li) => {
      if (owner[li] !== -1 || l.class_id !== d.class_id) return
      const v = iou(d.box, l.box)
      if (v >= iouThreshold && v > bestIou) {
        best = li
        bestIou = v
      }
    })
    if (best !== -1) owner[best] = d.index
    return {
      index: d.index,
      class_id: d.class_id,
      score: d.score,
      box: d.box,
      status: best !== -1 ? 'tp' : 'fp',
      label: best,
      iou: best !== -1 ? bestIou : 0,
    }
  })
  const outLabels = labels.map((l, index) => ({
    index,
    class_id: l.class_id,
    box: l.box,
    status: owner[index] !== -1 ? 'tp' : 'fn',
    detection: owner[index],
  }))
  const tp = outDets.filter((d) => d.status === 'tp').length
  return { detections: outDets, labels: outLabels, tp, fp: outDets.length - tp, fn: labels.length - tp }
}

// The evaluation's "right" image: every label matched and no false positive
// at conf >= 0.25 and IoU >= 0.5 (images without labels: nothing predicted).
export function imageRight(labels, detections, { iouThreshold = 0.5, conf = 0.25 } = {}) {
  const m = matchDetections(labels, detections, { iouThreshold, conf })
  return m.fp === 0 && m.fn === 0
}

// The IoU thresholds the viewer offers: 0.50, 0.55, ... 0.95.
export const IOU_STEPS = Array.from({ length: 10 }, (_, i) => Math.round((0.5 + 0.05 * i) * 100) / 100)
