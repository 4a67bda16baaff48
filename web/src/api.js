// Every request of the UI goes through here: it adds the API token
// (Authorization: Bearer, kept in localStorage), notices when the server is
// unreachable (the banner) and polls /healthz until it answers again, and
// opens event streams with fetch() so that they can carry the token and a
// Last-Event-ID of our own (EventSource can do neither).
import { reactive, watch } from 'vue'
import { createSseParser } from './sse.js'

const TOKEN_KEY = 'kestrel.token'

function storedToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || ''
  } catch {
    return ''
  }
}

export const conn = reactive({
  reachable: true, // false while requests fail at the network level
  since: 0, // when it became unreachable (ms)
  token: storedToken(),
  needToken: false, // a request was refused with 401: the settings dialog opens
  generation: 0, // bumped when the server is back: pages reload their data
})

export function setToken(token) {
  conn.token = token.trim()
  try {
    if (conn.token) localStorage.setItem(TOKEN_KEY, conn.token)
    else localStorage.removeItem(TOKEN_KEY)
  } catch {
    // storage disabled: the token lasts for this page only
  }
  conn.needToken = false
  conn.generation++
}

export class ApiError extends Error {
  constructor(status, message, doc) {
    super(message)
    this.status = status // 0: no answer from the server
    this.doc = doc
  }
}

function headers(extra = {}) {
  const h = { ...extra }
  if (conn.token) h.Authorization = `Bearer ${conn.token}`
  return h
}

let healthTimer = null

function markUnreachable() {
  if (!conn.reachable) return
  conn.reachable = false
  conn.since = Date.now()
  if (healthTimer === null) healthTimer = setInterval(probe, 1000)
}

function markReachable() {
  if (conn.reachable) return
  conn.reachable = true
  if (healthTimer !== null) clearInterval(healthTimer)
  healthTimer = null
  conn.generation++
}

async function probe() {
  try {
    const r = await fetch('/healthz', { cache: 'no-store' })
    if (r.ok) markReachable()
  } catch {
    // still down
  }
}

function isAbort(e) {
  return e && e.name === 'AbortError'
}

// GET a JSON route. Throws ApiError with the server's error message.
// response: the fetch() of this request already sent (index.html's early
// metrics request), read as if sent here.
export async function getJson(path, { signal, response } = {}) {
  let resp
  try {
    resp = await (response || fetch(path, { headers: headers({ Accept: 'application/json' }), cache: 'no-store', signal }))
  } catch (e) {
    if (isAbort(e)) throw e
    markUnreachable()
    throw new ApiError(0, 'the server is unreachable')
  }
  markReachable()
  let doc = null
  try {
    doc = await resp.json()
  } catch {
    doc = null
  }
  if (resp.status === 401) conn.needToken = true
  if (!resp.ok) {
    const msg = doc && doc.error && doc.error.message ? doc.error.message : `HTTP ${resp.status}`
    throw new ApiError(resp.status, msg, doc)
  }
  return doc
}

// GET a binary route (an export's file) as an ArrayBuffer, with the token;
// an error answer is the server's JSON error document (ApiError).
export async function getBytes(path, { signal } = {}) {
  let resp
  try {
    resp = await fetch(path, { headers: headers({ Accept: 'application/octet-stream' }), cache: 'no-store', signal })
  } catch (e) {
    if (isAbort(e)) throw e
    markUnreachable()
    throw new ApiError(0, 'the server is unreachable')
  }
  markReachable()
  if (resp.status === 401) conn.needToken = true
  if (!resp.ok) {
    let doc = null
    try {
      doc = await resp.json()
    } catch {
      doc = null
    }
    const msg = doc && doc.error && doc.error.message ? doc.error.message : `HTTP ${resp.status}`
    throw new ApiError(resp.status, msg, doc)
  }
  return resp.arrayBuffer()
}

// An image route's bytes as an object URL, with the token (an <img> cannot
// send it). Dataset images are content-addressed and cacheable: the browser's
// cache keeps the bytes, and the last 400 URLs are kept here (the oldest
// revoked first), so paging back and forth costs no new request.
const imageUrls = new Map()
export function getImageUrl(path) {
  const known = imageUrls.get(path)
  if (known) return known
  const p = (async () => {
    let resp
    try {
      resp = await fetch(path, { headers: headers({ Accept: 'image/*' }) })
    } catch {
      markUnreachable()
      throw new ApiError(0, 'the server is unreachable')
    }
    markReachable()
    if (resp.status === 401) conn.needToken = true
    if (!resp.ok) {
      let doc = null
      try {
        doc = await resp.json()
      } catch {
        doc = null
      }
      throw new ApiError(resp.status, doc?.error?.message || `HTTP ${resp.status}`, doc)
    }
    return URL.createObjectURL(await resp.blob())
  })()
  imageUrls.set(path, p)
  p.catch(() => imageUrls.delete(path))
  if (imageUrls.size > 400) {
    const [oldest, url] = imageUrls.entries().next().value
    imageUrls.delete(oldest)
    url.then((u) => URL.revokeObjectURL(u)).catch(() => {})
  }
  return p
}

// Sends a write request; `body` goes as it is with its `contentType`.
// Resolves to the answer's document; throws ApiError whose `doc.error` is
// the server's {code, message, field} (field: the key or body part it is about).
async function send(method, path, { body, contentType } = {}) {
  let resp
  try {
    resp = await fetch(path, {
      method,
      headers: headers({ Accept: 'application/json', 'Content-Type': contentType }),
      cache: 'no-store',
      body,
    })
  } catch {
    markUnreachable()
    throw new ApiError(0, 'the server is unreachable')
  }
  markReachable()
  let doc = null
  try {
    doc = await resp.json()
  } catch {
    doc = null
  }
  if (resp.status === 401) conn.needToken = true
  if (!resp.ok) {
    const msg = doc && doc.error && doc.error.message ? doc.error.message : `HTTP ${resp.status}`
    throw new ApiError(resp.status, msg, doc)
  }
  return doc
}

// POST (or another method) a JSON body to a write route; resolves and
// throws as send does.
export function sendJson(method, path, body) {
  return send(method, path, { body: body === undefined ? undefined : JSON.stringify(body), contentType: 'application/json' })
}

// POST a file (a zip for /api/datasets/upload) as the raw request body
// with its media type; resolves and throws as sendJson does.
export function sendFile(path, file, contentType) {
  return send('POST', path, { body: file, contentType })
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// Opens an event stream and keeps it open: after a drop it reconnects with
// Last-Event-ID set to the last event received, and drops any event whose
// id is not above it, so each event reaches onEvent exactly once.
// onStatus gets 'connecting', 'live', 'reconnecting' or 'unauthorized'.
// after: start after this event id (what the page already has), not at the first.
export function openEventStream(path, { onEvent, onStatus = () => {}, after = null }) {
  let lastId = after
  let retryMs = 1000
  let stopped = false
  let controller = null

  async function once() {
    controller = new AbortController()
    const h = headers({ Accept: 'text/event-stream' })
    if (lastId !== null) h['Last-Event-ID'] = String(lastId)
    let resp
    try {
      resp = await fetch(path, { headers: h, cache: 'no-store', signal: controller.signal })
    } catch (e) {
      if (!isAbort(e)) markUnreachable()
      return
    }
    markReachable()
    if (resp.status === 401) {
      conn.needToken = true
      onStatus('unauthorized')
      return
    }
    if (!resp.ok || !resp.body) {
      onStatus(`error ${resp.status}`)
      return
    }
    onStatus('live')
    const parser = createSseParser(
      (ev) => {
        if (ev.id !== undefined) {
          const id = Number(ev.id)
          if (lastId !== null && id <= lastId) return
          lastId = id
        }
        onEvent(ev)
      },
      (ms) => {
        retryMs = Math.min(Math.max(ms, 250), 10000)
      },
    )
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader()
    try {
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        parser.push(value)
      }
    } catch (e) {
      if (!isAbort(e)) markUnreachable()
    }
  }

  ;(async () => {
    onStatus('connecting')
    while (!stopped) {
      await once()
      if (stopped) break
      onStatus('reconnecting')
      await sleep(retryMs)
    }
  })()

  return {
    close() {
      stopped = true
      if (controller) controller.abort()
    },
  }
}

// Formatting shared by the pages.
// One formatter for every time (what toLocaleString(undefined, { hour12:
// false }) prints: it built a new one per call, ~30 ms of a job page's load).
let timeFormat = null
export function fmtTime(ms) {
  if (!ms) return '—'
  timeFormat ||= new Intl.DateTimeFormat(undefined, {
    hour12: false, year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
  })
  return timeFormat.format(new Date(ms))
}

export function fmtNum(x, digits = 3) {
  if (x === null || x === undefined || Number.isNaN(x)) return '—'
  return Number(x).toFixed(digits)
}

export function fmtBytes(n) {
  if (!n && n !== 0) return '—'
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let i = 0
  let v = n
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`
}

export const JOB_STATES = ['queued', 'running', 'succeeded', 'failed_retryable', 'failed_permanent', 'cancelled']

// The job-kind table and the job states with the actions each allows, as the
// server has them (GET /api/job-kinds, app/job_kinds.h): the UI reads these
// rules instead of copying them. Loaded once per page load; until then (or
// when the request fails) no kind is listed and no action is offered.
export const jobMeta = reactive({ loaded: false, kinds: [], states: [] })
let jobMetaPromise = null
export function loadJobMeta() {
  jobMetaPromise ||= getJson('/api/job-kinds')
    .then((doc) => {
      jobMeta.kinds = doc.kinds || []
      jobMeta.states = doc.states || []
      jobMeta.loaded = true
    })
    .catch(() => {
      jobMetaPromise = null // try again on the next use
    })
  return jobMetaPromise
}
// A refused or failed load is tried again when the connection comes back
// or a token is set (conn.generation).
watch(
  () => conn.generation,
  () => jobMeta.loaded || loadJobMeta(),
)
// Whether a job in `state` allows `action` ('cancel', 'retry').
export function stateAllows(state, action) {
  const s = jobMeta.states.find((x) => x.name === state)
  return !!s && (s.actions || []).includes(action)
}

export function stateTagType(state) {
  return (
    {
      queued: 'info',
      running: 'primary',
      succeeded: 'success',
      failed_retryable: 'warning',
      failed_permanent: 'danger',
      cancelled: 'info',
    }[state] || 'info'
  )
}
