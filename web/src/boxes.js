// Label boxes as the dataset routes send them (normalized centre and size,
// docs/server.md "Dataset images") and one colour per class, shared by the
// gallery's thumbnails and the box viewer.
const PALETTE = [
  '#e6194b', '#3cb44b', '#4363d8', '#f58231', '#911eb4', '#42d4f4', '#f032e6', '#9a6324',
  '#469990', '#800000', '#808000', '#000075', '#bfef45', '#fabed4', '#dcbeff', '#ffd8b1',
]

export function classColor(cls) {
  const n = PALETTE.length
  return PALETTE[((cls % n) + n) % n]
}

// {cls, cx, cy, w, h} in [0, 1] -> a rectangle in the image's pixels.
export function boxRect(b, width, height) {
  return { x: (b.cx - b.w / 2) * width, y: (b.cy - b.h / 2) * height, w: b.w * width, h: b.h * height }
}

export function className(names, cls) {
  return names && cls >= 0 && cls < names.length ? names[cls] : `class ${cls}`
}

// Black or white, whichever reads better on a '#rrggbb' background (WCAG
// relative luminance): a class name over its box colour keeps a 4.5:1
// contrast on the light colours of the palette too.
export function textOn(hex) {
  const c = [1, 3, 5].map((i) => parseInt(String(hex).slice(i, i + 2), 16) / 255)
  if (c.some((v) => Number.isNaN(v))) return '#fff'
  const [r, g, b] = c.map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
  const lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
  return (lum + 0.05) / 0.05 > 1.05 / (lum + 0.05) ? '#000' : '#fff'
}
