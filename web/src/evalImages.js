// An evaluation's images with labels and detections (GET
// /api/evaluations/{id}/images), looked up by image sha for the compare
// page's side-by-side viewer: the whole split is read once per evaluation
// (500 a page) and kept for the page's life.
import { getJson } from './api.js'

const cache = new Map()

export function evaluationImages(id) {
  const key = String(id)
  const known = cache.get(key)
  if (known) return known
  const p = (async () => {
    const bySha = new Map()
    let offset = 0
    let split = ''
    for (;;) {
      const doc = await getJson(`/api/evaluations/${encodeURIComponent(key)}/images?filter=all&limit=500&offset=${offset}`)
      split = doc.split || split
      for (const im of doc.images) bySha.set(im.sha, im)
      if (doc.next_offset === null || doc.next_offset === undefined || doc.next_offset <= offset) break
      offset = doc.next_offset
    }
    return { bySha, split }
  })()
  cache.set(key, p)
  p.catch(() => cache.delete(key))
  return p
}
