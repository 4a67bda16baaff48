// One image of an evaluation with its labels and the stored detections
// (GET /api/evaluations/{id}/images?sha=): the compare page's side-by-side
// viewer reads each image it shows this way, one request per model, and
// keeps the answer for the page's life.
import { getJson } from './api.js'

const cache = new Map()

// The row of `sha` (at `path` when the split holds the same bytes at
// several paths); throws when the evaluation lists no such image.
export async function evaluationImage(id, sha, path = '') {
  const key = `${id}/${sha}`
  let doc = cache.get(key)
  if (!doc) {
    const q = new URLSearchParams({ sha })
    doc = getJson(`/api/evaluations/${encodeURIComponent(String(id))}/images?${q}`)
    cache.set(key, doc)
    doc.catch(() => cache.delete(key))
  }
  const rows = (await doc).images || []
  const row = rows.find((im) => im.path === path) || rows[0]
  if (!row) throw new Error(`evaluation #${id} lists no image ${sha.slice(0, 12)}…`)
  return row
}
