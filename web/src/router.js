// A hash router: "#/jobs/12?x=1" -> { path: ['jobs', '12'], query: {x: '1'} }.
// Links are plain <a href="#/..."> (keyboard and middle-click work), and the
// server needs no fallback route: every page is index.html.
import { reactive } from 'vue'

function parse() {
  const raw = window.location.hash.replace(/^#/, '') || '/home'
  const q = raw.indexOf('?')
  const pathPart = q < 0 ? raw : raw.slice(0, q)
  const query = Object.fromEntries(new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)))
  const path = pathPart
    .split('/')
    .filter((s) => s !== '')
    .map((s) => {
      try {
        return decodeURIComponent(s)
      } catch {
        return s
      }
    })
  return { path, query }
}

export const route = reactive(parse())

window.addEventListener('hashchange', () => {
  Object.assign(route, parse())
})

export function href(path, query = {}) {
  const qs = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== '' && v !== undefined && v !== null))
  const s = qs.toString()
  return `#/${path.map(encodeURIComponent).join('/')}${s ? `?${s}` : ''}`
}

export function navigate(path, query = {}) {
  window.location.hash = href(path, query)
}
