// Loads a page's data, again when the server comes back or the token
// changes (conn.generation), and every `poll` ms while the page is open.
import { onBeforeUnmount, onMounted, reactive, watch } from 'vue'
import { conn } from './api.js'

export function useResource(loader, { poll = 0 } = {}) {
  const state = reactive({ data: null, error: '', status: 0, loading: false })
  let timer = null
  let inflight = false

  async function load() {
    if (inflight) return
    inflight = true
    state.loading = true
    try {
      state.data = await loader()
      state.error = ''
      state.status = 200
    } catch (e) {
      state.error = e.message
      state.status = e.status || 0
    } finally {
      state.loading = false
      inflight = false
    }
  }

  watch(() => conn.generation, load)
  onMounted(() => {
    load()
    if (poll > 0) timer = setInterval(() => conn.reachable && load(), poll)
  })
  onBeforeUnmount(() => {
    if (timer !== null) clearInterval(timer)
  })
  return { state, load }
}
