// A JSON parser that remembers where every value sits in the text, so a violation's
// path (`executors[1].cooldown.outage`, as the core writes it) can be shown at its
// line in the editor. Plain ES module: runs in the page and in Node tests.

/** A syntax error with its place: `line` and `column` count from 1. */
export class JsonSyntaxError extends Error {
  constructor(message, offset, text) {
    const { line, column } = lineColumn(text, offset)
    super(`${message} at line ${line}, column ${column}`)
    this.name = 'JsonSyntaxError'
    this.offset = offset
    this.line = line
    this.column = column
  }
}

/** Line and column (both from 1) of `offset` in `text`. */
export function lineColumn(text, offset) {
  let line = 1
  let lineStart = 0
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 10) {
      line++
      lineStart = i + 1
    }
  }
  return { line, column: offset - lineStart + 1 }
}

/**
 * Parses `text`; returns `{ value, places, duplicates }` where `places` maps each path
 * to `{ start, end, keyStart }` offsets (keyStart: where the member's key starts, for
 * object members; of a key written twice, the last, whose value JSON.parse keeps) and
 * `duplicates` lists the paths of keys written more than once. The root's path is ''.
 * Throws JsonSyntaxError.
 */
export function parseWithPlaces(text) {
  const places = new Map()
  const duplicates = []
  let i = 0

  const fail = (message, at = i) => {
    throw new JsonSyntaxError(message, at, text)
  }
  const ws = () => {
    while (i < text.length) {
      const c = text.charCodeAt(i)
      if (c === 32 || c === 9 || c === 10 || c === 13) i++
      else break
    }
  }
  const join = (path, key) => (typeof key === 'number' ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`)

  const string = () => {
    const start = i
    i++ // opening quote
    let out = ''
    while (true) {
      if (i >= text.length) fail('unterminated string', start)
      const c = text[i]
      if (c === '"') {
        i++
        return out
      }
      if (c === '\\') {
        const e = text[i + 1]
        const simple = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' }
        if (e in simple) {
          out += simple[e]
          i += 2
        } else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
          out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16))
          i += 6
        } else {
          fail('bad escape in string')
        }
      } else if (c.charCodeAt(0) < 0x20) {
        fail('control character in string')
      } else {
        out += c
        i++
      }
    }
  }

  const value = (path, keyStart) => {
    ws()
    const start = i
    let v
    const c = text[i]
    if (c === '{') {
      i++
      v = {}
      ws()
      if (text[i] === '}') {
        i++
      } else {
        while (true) {
          ws()
          if (text[i] !== '"') fail('expected a string key')
          const ks = i
          const key = string()
          ws()
          if (text[i] !== ':') fail("expected ':' after a key")
          i++
          if (Object.hasOwn(v, key)) duplicates.push(join(path, key))
          v[key] = value(join(path, key), ks)
          ws()
          if (text[i] === ',') {
            i++
            continue
          }
          if (text[i] === '}') {
            i++
            break
          }
          fail("expected ',' or '}'")
        }
      }
    } else if (c === '[') {
      i++
      v = []
      ws()
      if (text[i] === ']') {
        i++
      } else {
        while (true) {
          v.push(value(join(path, v.length)))
          ws()
          if (text[i] === ',') {
            i++
            continue
          }
          if (text[i] === ']') {
            i++
            break
          }
          fail("expected ',' or ']'")
        }
      }
    } else if (c === '"') {
      v = string()
    } else {
      const m = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 400))
      if (!m) fail(i >= text.length ? 'unexpected end of text' : `unexpected '${text[i]}'`)
      i += m[0].length
      v = m[0] === 'true' ? true : m[0] === 'false' ? false : m[0] === 'null' ? null : Number(m[0])
    }
    places.set(path, { start, end: i, keyStart: keyStart ?? start })
    return v
  }

  const result = value('')
  ws()
  if (i < text.length) fail('unexpected text after the document')
  return { value: result, places, duplicates }
}

/**
 * The place of `path` in `places`, or of its longest existing prefix (a violation
 * about a missing field points at the object that lacks it). Returns
 * `{ path, start, end, keyStart, exact }` or null.
 */
export function placeOf(places, path) {
  let p = path ?? ''
  let exact = true
  while (true) {
    const place = places.get(p)
    if (place) return { path: p, ...place, exact }
    if (p === '') return null
    exact = false
    const cut = Math.max(p.lastIndexOf('.'), p.lastIndexOf('['))
    p = cut > 0 ? p.slice(0, cut) : ''
  }
}
