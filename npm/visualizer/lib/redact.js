// A document's text with its `env` literals redacted by the core (`redact`: every env
// value that is not a `${VAR}` reference becomes "[redacted]"; env values decide
// nothing), for the editor: the page never shows an env literal. Only the values the
// core changed are replaced in the text, so the rest of it (layout, key order) reads
// as written.

import { parseWithPlaces } from './jsonpos.js'
import { jsonEqual } from './trace.js'

/**
 * `{ text, redacted }`: `text` with every value the core's `redact` changes replaced
 * (`redacted` counts them). Text that is not JSON is returned as it is (nothing to
 * redact until it parses).
 */
export function redactDocumentText(text, redact) {
  let parsed
  try {
    parsed = parseWithPlaces(text)
  } catch {
    return { text, redacted: 0 }
  }
  const { value, places, duplicates } = parsed
  let redacted
  try {
    redacted = redact(value)
  } catch {
    return { text, redacted: 0 } // not a document the core reads (a bare list, a number)
  }
  const changes = []
  diff(value, redacted, '', changes)
  if (!changes.length) return { text, redacted: 0 }
  const whole = { text: JSON.stringify(redacted, null, 2), redacted: changes.length }
  // A key written twice: the value JSON.parse ignored has no place, so the text is
  // written again from the redacted document (which, as JSON.parse, keeps the last).
  if (duplicates.length) return whole
  let out = text
  const spans = changes.map(({ path, to }) => ({ ...places.get(path), to: JSON.stringify(to) }))
  for (const { start, end, to } of spans.sort((a, b) => b.start - a.start)) out = out.slice(0, start) + to + out.slice(end)
  // Keys with '.' or '[' in them can make two paths one: then, too, the whole text.
  return jsonEqual(parseWithPlaces(out).value, redacted) ? { text: out, redacted: changes.length } : whole
}

/** The leaf paths (as jsonpos writes them) where `b` differs from `a`. */
function diff(a, b, path, out) {
  const join = (key) => (typeof key === 'number' ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`)
  const container = (x) => x !== null && typeof x === 'object'
  if (container(a) && container(b) && Array.isArray(a) === Array.isArray(b)) {
    if (Array.isArray(a)) {
      if (a.length !== b.length) return out.push({ path, to: b })
      a.forEach((x, i) => diff(x, b[i], join(i), out))
      return
    }
    const keys = new Set([...Object.keys(a), ...Object.keys(b)])
    if ([...keys].some((k) => !Object.hasOwn(a, k) || !Object.hasOwn(b, k))) return out.push({ path, to: b })
    for (const k of keys) diff(a[k], b[k], join(k), out)
    return
  }
  if (!jsonEqual(a, b)) out.push({ path, to: b })
}
