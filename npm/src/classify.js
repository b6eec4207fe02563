// Extracts the facts of a failed call from whatever the caller threw (an Error and its
// `cause` chain, a fetch Response, an axios-style error, one of @llm4ts/core's tagged
// errors) for the core, which classifies them as the roster seed does. No word list
// lives here: the signal table is the core's (`classifyFailure`, a document's
// `signals`), so every host decides alike.

export const FAILURE_KINDS = Object.freeze([
  'usageLimit',
  'rateLimit',
  'authentication',
  'outage',
  'modelUnavailable',
  'other',
])
const kinds = new Set(FAILURE_KINDS)

const MESSAGE_LIMIT = 2_000
const CHAIN_LIMIT = 12

/**
 * `Retry-After` in milliseconds from `now`: delay-seconds ("120", "1.5") or an
 * HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT"). `undefined` when unreadable.
 */
export function parseRetryAfter(value, now = Date.now()) {
  if (value === undefined || value === null) return undefined
  const text = String(value).trim()
  if (text === '') return undefined
  if (/^\d+(?:\.\d+)?$/.test(text)) return Math.round(Number(text) * 1_000)
  const at = Date.parse(text)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

const whole = (n) => (Number.isFinite(n) && n >= 0 ? Math.round(n) : undefined)

/** An instant as epoch ms: effect's DateTime, a Date, epoch ms, or an ISO string. */
function toEpochMs(value) {
  if (value === undefined || value === null) return undefined
  if (value instanceof Date) return whole(value.getTime())
  if (typeof value === 'number') return whole(value)
  if (typeof value === 'string') return whole(Date.parse(value))
  if (typeof value === 'object') {
    // effect 4's DateTime (`epochMilliseconds`, as Temporal.Instant), effect 3's (`epochMillis`).
    if (typeof value.epochMilliseconds === 'number') return whole(value.epochMilliseconds)
    if (typeof value.epochMillis === 'number') return whole(value.epochMillis)
  }
  return undefined
}

/** A span as ms: effect's Duration (`{ value: { _tag: 'Millis' | 'Nanos' | 'Infinity' } }`), or ms. */
function durationMs(value) {
  if (typeof value === 'number') return whole(value)
  if (value === null || typeof value !== 'object') return undefined
  const inner = value.value ?? value // a Duration, or its JSON (`{ _id: 'Duration', _tag, millis }`)
  switch (inner?._tag) {
    case 'Millis': return whole(inner.millis)
    case 'Nanos': return typeof inner.nanos === 'bigint' ? whole(Number(inner.nanos / 1_000_000n)) : whole(inner.nanos / 1e6)
    default: return undefined // Infinity: no end to count to
  }
}

function header(headers, name) {
  if (headers === undefined || headers === null || typeof headers !== 'object') return undefined
  if (typeof headers.get === 'function') {
    const value = headers.get(name)
    if (value !== undefined && value !== null) return value
  }
  for (const key of Object.keys(headers)) {
    if (key.toLowerCase() === name) {
      const value = headers[key]
      return Array.isArray(value) ? value[0] : value
    }
  }
  return undefined
}

/** Whether `value` may be a link of a chain (an object). */
const isLink = (value) => value !== null && typeof value === 'object'

/** The error and its causes (`cause`, AggregateError's `errors`), breadth-first, bounded. */
function chain(error) {
  // Most errors have no cause: no queue to walk.
  if (!isLink(error.cause) && !Array.isArray(error.errors)) return [error]
  const seen = []
  const queue = [error]
  while (queue.length > 0 && seen.length < CHAIN_LIMIT) {
    const next = queue.shift()
    if (next === null || typeof next !== 'object' || seen.includes(next)) continue
    seen.push(next)
    if (next.cause !== undefined) queue.push(next.cause)
    if (Array.isArray(next.errors)) queue.push(...next.errors)
  }
  return seen
}

const tagOf = (link) => (typeof link._tag === 'string' ? link._tag : typeof link.tag === 'string' ? link.tag : undefined)

/** An HTTP status in `value` (a number, or a string of three digits), else undefined. */
function httpStatus(value) {
  const status = typeof value === 'string' && /^\d{3}$/.test(value) ? Number(value) : value
  return Number.isInteger(status) && status >= 100 && status <= 599 ? status : undefined
}

function statusOf(link) {
  const response = link.response
  return (
    httpStatus(link.status) ??
    httpStatus(link.statusCode) ??
    httpStatus(response?.status) ??
    httpStatus(response?.statusCode) ??
    httpStatus(link.$metadata?.httpStatusCode)
  )
}

function retryAfterOf(link, now) {
  if (typeof link.retryAfterMs === 'number') return whole(link.retryAfterMs)
  for (const headers of [link.headers, link.response?.headers]) {
    const ms = header(headers, 'retry-after-ms')
    if (ms !== undefined && /^\d+(?:\.\d+)?$/.test(String(ms).trim())) return Math.round(Number(ms))
    const after = parseRetryAfter(header(headers, 'retry-after'), now)
    if (after !== undefined) return after
  }
  if (link.retryAfter !== undefined) {
    // @llm4ts/core's RateLimitError: an effect Duration; elsewhere a header's text.
    return typeof link.retryAfter === 'object' ? durationMs(link.retryAfter) : parseRetryAfter(link.retryAfter, now)
  }
  return undefined
}

/** What an HTTP body says went wrong (`{ error: { message } }`, `{ message }`, text). */
function bodyMessage(data) {
  if (typeof data === 'string') return data.trim() || undefined
  if (data === null || typeof data !== 'object') return undefined
  const candidate = data.error?.message ?? data.error ?? data.message ?? data.detail
  return typeof candidate === 'string' && candidate.trim() !== '' ? candidate.trim() : undefined
}

/** One link's own text: its message, else what its HTTP answer says. */
function ownMessage(link) {
  if (typeof link.message === 'string' && link.message !== '') return link.message
  const status = statusOf(link)
  if (status !== undefined) {
    const statusText = link.statusText ?? link.response?.statusText
    return `HTTP ${status}${statusText ? ` ${statusText}` : ''}`
  }
  return undefined
}

/**
 * The facts of a failed call, for `Roster#report` and the core's `classifyFailure`:
 * `{ tag?, status?, code?, message, resetAt?, retryAfterMs? }` (only what it found).
 *
 * - @llm4ts/core's tagged errors (anywhere in the `cause` chain): `_tag`, the error's
 *   own message (as the seed quotes it), `resetAt` (an effect DateTime → epoch ms),
 *   `retryAfter` (an effect Duration → ms).
 * - HTTP: `status` (`status`, `statusCode`, axios' `response.status`, AWS'
 *   `$metadata.httpStatusCode`), `Retry-After` (seconds or an HTTP date) or
 *   `retry-after-ms` from `headers`/`response.headers` (a fetch `Headers` or a plain
 *   object); an axios body's error message is added to the message.
 * - `code` (`ECONNREFUSED`, `UND_ERR_SOCKET`, …), the first in the chain.
 * - Untagged errors: their messages along the chain, joined by ": ".
 *
 * An already-classified failure (`{ kind, message, resetAt?, retryAfterMs? }`) keeps
 * its kind (the core lets an explicit kind win).
 *
 * @param {unknown} error
 * @param {{ now?: number }} [options] epoch ms for an HTTP-date `Retry-After` (default Date.now())
 * @returns {import('../types/index.js').Failure}
 */
export function failureFacts(error, { now = Date.now() } = {}) {
  if (error === null || typeof error !== 'object') {
    return { message: String(error ?? '').slice(0, MESSAGE_LIMIT) }
  }
  const plain = classifiedFacts(error)
  if (plain !== undefined) return plain
  const links = chain(error)
  let tagged, tag, status, code
  for (const link of links) {
    if (tag === undefined) {
      tag = tagOf(link)
      if (tag !== undefined) tagged = link
    }
    status ??= statusOf(link)
    if (code === undefined && typeof link.code === 'string' && link.code !== '') code = link.code
  }
  const facts = {}
  if (typeof error.kind === 'string' && kinds.has(error.kind)) facts.kind = error.kind
  if (tag !== undefined) facts.tag = tag
  if (status !== undefined) facts.status = status
  if (code !== undefined) facts.code = code

  let message
  if (tagged !== undefined) {
    message = typeof tagged.message === 'string' ? tagged.message : ''
  } else {
    const parts = []
    for (const link of links) {
      const own = ownMessage(link)
      if (own !== undefined && !parts.some((p) => p.includes(own))) parts.push(own)
      const body = bodyMessage(link.response?.data)
      if (body !== undefined && !parts.some((p) => p.includes(body))) parts.push(body)
    }
    message = parts.join(': ')
  }
  facts.message = message.slice(0, MESSAGE_LIMIT)

  const source = tagged ?? error
  const resetAt = toEpochMs(source.resetAt)
  if (resetAt !== undefined) facts.resetAt = resetAt
  let retryAfterMs
  if (tagged !== undefined) retryAfterMs = retryAfterOf(tagged, now)
  else for (let i = 0; i < links.length && retryAfterMs === undefined; i += 1) retryAfterMs = retryAfterOf(links[i], now)
  if (retryAfterMs !== undefined) facts.retryAfterMs = retryAfterMs
  return facts
}

const CLASSIFIED_KEYS = new Set(['kind', 'message', 'resetAt', 'retryAfterMs'])

/**
 * The facts of an already-classified failure, a plain object of `kind`, `message`,
 * `resetAt` and `retryAfterMs` only (what a host that classified it reports, on every
 * report of a rate-limit storm): the same facts the walk of the chain above finds in
 * it (no tag, status, code, cause or headers to look for), without that walk.
 * `undefined` for anything else.
 */
function classifiedFacts(error) {
  if (Object.getPrototypeOf(error) !== Object.prototype) return undefined
  // (for...in: an own key, or an enumerable one on a polluted Object.prototype)
  for (const key in error) if (!CLASSIFIED_KEYS.has(key)) return undefined
  const facts = {}
  const { kind, message, resetAt, retryAfterMs } = error
  if (typeof kind === 'string' && kinds.has(kind)) facts.kind = kind
  facts.message = (typeof message === 'string' ? message : '').slice(0, MESSAGE_LIMIT)
  const reset = toEpochMs(resetAt)
  if (reset !== undefined) facts.resetAt = reset
  const retry = typeof retryAfterMs === 'number' ? whole(retryAfterMs) : undefined
  if (retry !== undefined) facts.retryAfterMs = retry
  return facts
}
