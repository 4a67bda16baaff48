// Paths shown in the UI (a finding's file, a dataset's source) wrap after a
// separator, never inside a name (issue 33 finding 8): PathText.vue puts a
// <wbr> after each segment this returns.
// A path cut after each separator ('/', '\', '_', '-', '.'), so that it
// wraps there and not inside a name: "a/b_c.jpg" -> ["a/", "b_", "c.", "jpg"].
export function pathSegments(text) {
  return String(text ?? '').match(/[^/\\_.-]*[/\\_.-]+|[^/\\_.-]+$/g) || []
}
