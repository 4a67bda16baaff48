// The image viewers' dialogs (box viewer, pair viewer): their common props
// and their keyboard.
import { onBeforeUnmount, watch } from 'vue'

// Open (v-model), the list and the one shown (v-model:index), class names,
// a line under the bar.
export const listDialogProps = {
  modelValue: { type: Boolean, default: false },
  items: { type: Array, default: () => [] },
  index: { type: Number, default: 0 },
  names: { type: Array, default: () => [] },
  subtitle: { type: String, default: '' }, // e.g. the finding it was opened from
}

// "1 box", "3 boxes".
export const boxCount = (n) => (n === 1 ? '1 box' : `${n} boxes`)

// `onKey(e)` hears the window's keydowns while `isOpen()` is true and no
// Alt, Ctrl or Meta is held (those are the browser's); the listener goes
// when the dialog closes or its component does.

export function useDialogKeys(isOpen, onKey) {
  const listener = (e) => {
    if (!isOpen() || e.altKey || e.ctrlKey || e.metaKey) return
    onKey(e)
  }
  watch(
    isOpen,
    (open) => {
      if (open) window.addEventListener('keydown', listener)
      else window.removeEventListener('keydown', listener)
    },
    { immediate: true },
  )
  onBeforeUnmount(() => window.removeEventListener('keydown', listener))
}
