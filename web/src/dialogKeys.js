// A dialog's keyboard: `onKey(e)` hears the window's keydowns while
// `isOpen()` is true and no Alt, Ctrl or Meta is held (those are the
// browser's); the listener goes when the dialog closes or its component does.
import { onBeforeUnmount, watch } from 'vue'

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
