// Runs as a tracker user reads them (issue 33): a job's name, its best mAP
// and duration from the stored result, and the live progress of running jobs
// for the home page and the jobs table. For each running job the metrics
// route is asked once (only the mAP series: its newest point, the newest
// progress and the event id they go up to), then the job's event stream is
// followed from that id: no polling while a job runs.
import { reactive } from 'vue'
import { getJson, openEventStream } from './api.js'

export const MAP_SERIES = 'metrics/mAP50-95(B)'

// The name people see: the stored one, else "#ID" (jobs stored before names).
export const runName = (job) => (job && job.name) || (job ? `#${job.id}` : '')

// The mAP50-95 of the weights a finished training run committed (its best
// epoch's): the stored result's map50_95 (app::AttemptResult, where "best"
// is the weights' path), or result.best.map50_95 (a trainer summary's
// shape); else null.
export function bestMap(job) {
  const r = job?.result
  const v = typeof r?.map50_95 === 'number' ? r.map50_95 : r?.best?.map50_95
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}

// Seconds a job took: its training epochs' seconds when the result has them,
// else submit to finish (null while it has not finished, or when it never
// ran: cancelled while queued).
export function durationSeconds(job) {
  const epochs = job?.result?.epochs
  if (Array.isArray(epochs) && epochs.length) {
    const s = epochs.reduce((a, e) => a + (Number(e.seconds) || 0), 0)
    if (s > 0) return s
  }
  if (job?.finished_ms && job?.created_ms && job.attempt > 0) return Math.max(0, (job.finished_ms - job.created_ms) / 1000)
  return null
}

export function fmtDuration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '—'
  if (s < 60) return `${Math.round(s)} s`
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`
}

export const fmtMap = (v) => (v === null || v === undefined ? '—' : Number(v).toFixed(3))

// Progress of a live payload: 0..1 through the run (epochs and batches).
export function progressFraction(p) {
  if (!p || !p.epochs) return null
  const within = p.batches ? Math.min(1, (p.batch || 0) / p.batches) : 0
  return Math.max(0, Math.min(1, ((p.epoch || 1) - 1 + within) / p.epochs))
}

// Follows running jobs: track(ids) opens what is new and closes what left;
// live[id] = { progress, map, mapEpoch }.
export function useRunProgress() {
  const live = reactive({})
  const streams = new Map()
  let stopped = false
  function apply(id, doc) {
    const cur = live[id] || (live[id] = { progress: null, map: null, mapEpoch: null })
    if (doc.kind === 'progress' && doc.payload && typeof doc.payload === 'object') cur.progress = doc.payload
    if (doc.kind === 'metric' && doc.payload?.type === 'epoch') {
      const v = doc.payload.values?.[MAP_SERIES]
      if (typeof v === 'number') {
        cur.map = v
        cur.mapEpoch = doc.payload.epoch
      }
    }
  }
  async function follow(id) {
    const entry = { stream: null }
    streams.set(id, entry)
    let after = null
    try {
      const doc = await getJson(`/api/jobs/${id}/metrics?series=${encodeURIComponent(MAP_SERIES)}&width=100000`)
      const cur = live[id] || (live[id] = { progress: null, map: null, mapEpoch: null })
      if (doc.progress && typeof doc.progress === 'object') cur.progress = doc.progress
      const s = (doc.series || []).find((x) => x.name === MAP_SERIES)
      const last = s && s.data && s.data.length ? s.data[s.data.length - 1] : null
      if (last) {
        cur.mapEpoch = last[0]
        cur.map = last[1]
      }
      if (Number.isFinite(Number(doc.last_event_id))) after = Number(doc.last_event_id)
    } catch {
      // the stream below still brings what happens from now on
    }
    if (stopped || streams.get(id) !== entry) return
    entry.stream = openEventStream(`/api/jobs/${id}/events`, {
      after,
      onEvent: (ev) => {
        try {
          apply(id, JSON.parse(ev.data))
        } catch {
          // not JSON: not ours
        }
      },
    })
  }
  function track(ids) {
    const want = new Set(ids.map(Number))
    for (const [id, entry] of streams) {
      if (!want.has(id)) {
        if (entry.stream) entry.stream.close()
        streams.delete(id)
      }
    }
    for (const id of want) if (!streams.has(id)) follow(id)
  }
  function close() {
    stopped = true
    for (const entry of streams.values()) if (entry.stream) entry.stream.close()
    streams.clear()
  }
  return { live, track, close }
}
