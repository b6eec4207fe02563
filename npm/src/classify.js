// Turns what callers really get when a call fails (an HTTP status with headers, a
// connection error, a CLI's message) into the core's failure kinds, as the roster seed
// classifies its LLM errors. Only infrastructure signals exclude an executor; anything
// unrecognised is `other`, which excludes nothing.

export const FAILURE_KINDS = Object.freeze([
  'usageLimit',
  'rateLimit',
  'authentication',
  'outage',
  'modelUnavailable',
  'other',
])
const kinds = new Set(FAILURE_KINDS)

// The seed's model-unavailable messages (claude: "There's an issue with the selected model").
export const MODEL_UNAVAILABLE_SIGNALS = Object.freeze([
  'issue with the selected model',
  'may not exist or you may not have access',
  'model not found',
  'model_not_found',
  'unknown model',
  'invalid model',
  'does not exist or you do not have access',
])

/** Connection-level error codes (Node, undici) that mean the serving engine is down. */
export const OUTAGE_CODES = Object.freeze([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
])
const outageCodes = new Set(OUTAGE_CODES)

const MESSAGE_LIMIT = 2_000

export const isModelUnavailableMessage = (message) => {
  const normalized = String(message).toLowerCase()
  return MODEL_UNAVAILABLE_SIGNALS.some((signal) => normalized.includes(signal))
}

const usagePattern =
  /usage[ _-]?limit|hit your (?:usage )?limit|quota|credit balance|out of credits|limit will reset/i
const rateMentioned = /rate[ _-]?limit/i
const ratePattern = /rate[ _-]?limit|too many requests|resource[ _]exhausted|per (?:minute|min|second|sec)\b/i
const authPattern =
  /unauthori[sz]ed|invalid (?:x-)?api[ _-]?key|authentication|not signed in|not logged in|please (?:log|sign) ?in|forbidden|permission denied/i
const outagePattern =
  /connection (?:refused|reset|closed)|socket hang up|econnrefused|econnreset|etimedout|network error|fetch failed|service unavailable|bad gateway|gateway time-?out|overloaded|internal server error/i

// A quota per minute (Gemini's "Quota exceeded for ... requests per minute") is a rate limit.
const perWindow = /per (?:minute|min|second|sec)\b|\b(?:rpm|tpm|rps)\b/i

const isUsageMessage = (message) =>
  !perWindow.test(message) &&
  (usagePattern.test(message) || (/limit reached/i.test(message) && !rateMentioned.test(message)))

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

const unitMs = [
  [/^(?:d|days?)$/, 86_400_000],
  [/^(?:h|hrs?|hours?)$/, 3_600_000],
  [/^(?:m|mins?|minutes?)$/, 60_000],
  [/^(?:s|secs?|seconds?)$/, 1_000],
  [/^(?:ms|milliseconds?)$/, 1],
]

/** "2 days 3 hours, 5 minutes" / "45m" → milliseconds, or undefined. */
function parseSpan(text) {
  const parts = text.matchAll(/(\d+(?:\.\d+)?)\s*([a-z]+)/gi)
  let total = 0
  let any = false
  for (const [, amount, unit] of parts) {
    const scale = unitMs.find(([pattern]) => pattern.test(unit.toLowerCase()))?.[1]
    if (scale === undefined) break
    total += Number(amount) * scale
    any = true
  }
  return any ? Math.round(total) : undefined
}

/** A time to epoch ms: a Date, epoch ms or seconds, or an ISO string. */
function toEpochMs(value) {
  if (value === undefined || value === null) return undefined
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : value.getTime()
  if (typeof value === 'number' && Number.isFinite(value)) {
    return value < 1e11 ? Math.round(value * 1_000) : Math.round(value)
  }
  if (typeof value === 'object' && typeof value.epochMilliseconds === 'number') {
    return value.epochMilliseconds // Temporal.Instant, effect's DateTime
  }
  if (typeof value === 'string') {
    if (/^\d{10}$/.test(value)) return Number(value) * 1_000
    if (/^\d{13}$/.test(value)) return Number(value)
    const at = Date.parse(value)
    return Number.isNaN(at) ? undefined : at
  }
  return undefined
}

/**
 * The reset instant a usage-limit message names, if any: claude's `…|1735689600`,
 * an ISO timestamp, "try again in 2 hours 5 minutes", "resets at 3:04 PM".
 */
export function parseResetTime(message, now = Date.now()) {
  const text = String(message)
  const epoch = /\|\s*(\d{10}|\d{13})\b/.exec(text) ?? /\breset[a-z]*\D{0,8}(\d{10}|\d{13})\b/i.exec(text)
  if (epoch) return toEpochMs(epoch[1])
  const iso = /\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?/.exec(text)
  if (iso) {
    const at = Date.parse(iso[0].replace(' ', 'T'))
    if (!Number.isNaN(at)) return at
  }
  const span = /\b(?:in|after)\s+((?:\d+(?:\.\d+)?\s*[a-z]+[\s,]*(?:and\s+)?)+)/i.exec(text)
  if (span && /(?:try|again|reset|available|wait)/i.test(text)) {
    const ms = parseSpan(span[1])
    if (ms !== undefined) return now + ms
  }
  const clock = /\b(?:at|resets?|until)\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm)?\b/i.exec(text)
  if (clock && (clock[2] !== undefined || clock[3] !== undefined)) {
    let hours = Number(clock[1])
    const minutes = Number(clock[2] ?? 0)
    const meridiem = clock[3]?.toLowerCase()
    if (meridiem === 'pm' && hours < 12) hours += 12
    if (meridiem === 'am' && hours === 12) hours = 0
    if (hours < 24 && minutes < 60) {
      const at = new Date(now)
      at.setHours(hours, minutes, 0, 0)
      if (at.getTime() <= now) at.setDate(at.getDate() + 1)
      return at.getTime()
    }
  }
  return undefined
}

function header(headers, name) {
  if (headers === undefined || headers === null) return undefined
  if (typeof headers.get === 'function') return headers.get(name) ?? undefined
  if (typeof headers === 'object') {
    for (const [key, value] of Object.entries(headers)) {
      if (key.toLowerCase() === name) return Array.isArray(value) ? value[0] : value
    }
  }
  return undefined
}

/** The error and its causes (`cause`, AggregateError's `errors`), breadth-first, bounded. */
function chain(error) {
  const seen = []
  const queue = [error]
  while (queue.length > 0 && seen.length < 12) {
    const next = queue.shift()
    if (next === null || typeof next !== 'object' || seen.includes(next)) continue
    seen.push(next)
    if (next.cause !== undefined) queue.push(next.cause)
    if (Array.isArray(next.errors)) queue.push(...next.errors)
  }
  return seen
}

function statusOf(error) {
  for (const value of [
    error.status,
    error.statusCode,
    error.response?.status,
    error.response?.statusCode,
    error.$metadata?.httpStatusCode,
  ]) {
    const status = Number(value)
    if (Number.isInteger(status) && status >= 100 && status <= 599) return status
  }
  return undefined
}

function retryAfterOf(error, now) {
  if (typeof error.retryAfterMs === 'number' && error.retryAfterMs >= 0) {
    return Math.round(error.retryAfterMs)
  }
  for (const headers of [error.headers, error.response?.headers]) {
    const ms = header(headers, 'retry-after-ms')
    if (ms !== undefined && /^\d+(?:\.\d+)?$/.test(String(ms).trim())) {
      return Math.round(Number(ms))
    }
    const after = parseRetryAfter(header(headers, 'retry-after'), now)
    if (after !== undefined) return after
  }
  if (error.retryAfter !== undefined) return parseRetryAfter(error.retryAfter, now)
  return undefined
}

function messageOf(error) {
  if (typeof error === 'string') return error
  if (error === null || error === undefined) return String(error)
  const parts = []
  if (typeof error.message === 'string' && error.message !== '') parts.push(error.message)
  const status = statusOf(error)
  if (status !== undefined && !parts.some((p) => p.includes(String(status)))) {
    parts.unshift(`HTTP ${status}${error.statusText ? ` ${error.statusText}` : ''}`)
  }
  if (parts.length === 0) parts.push(String(error))
  return parts.join(': ')
}

/**
 * Classifies a failed call for `Roster.report`: an HTTP error (status 429 with
 * `Retry-After` → rateLimit and retryAfterMs; 401/403 → authentication; 5xx → outage),
 * a connection error (ECONNREFUSED, ECONNRESET, ETIMEDOUT … anywhere in its causes) →
 * outage, a usage-limit message → usageLimit with its reset time, the seed's
 * model-unavailable messages → modelUnavailable. An already-classified failure
 * (`{ kind, message, resetAt?, retryAfterMs? }`) passes through, normalised.
 *
 * @param {unknown} error
 * @param {{ now?: number }} [options] epoch ms for relative times (default Date.now())
 * @returns {import('../types/index.js').Failure}
 */
export function classifyFailure(error, { now = Date.now() } = {}) {
  const failure = (kind, extra = {}) => {
    const result = { kind, message: messageOf(error).slice(0, MESSAGE_LIMIT) }
    if (extra.resetAt !== undefined) result.resetAt = extra.resetAt
    if (extra.retryAfterMs !== undefined) result.retryAfterMs = extra.retryAfterMs
    return result
  }
  if (error === null || error === undefined || typeof error !== 'object') {
    const message = String(error ?? '')
    if (isModelUnavailableMessage(message)) return failure('modelUnavailable')
    if (isUsageMessage(message)) {
      return failure('usageLimit', { resetAt: parseResetTime(message, now) })
    }
    if (ratePattern.test(message)) return failure('rateLimit')
    if (authPattern.test(message)) return failure('authentication')
    if (outagePattern.test(message)) return failure('outage')
    return failure('other')
  }

  // Already classified.
  if (typeof error.kind === 'string' && kinds.has(error.kind)) {
    const result = { kind: error.kind, message: String(error.message ?? '').slice(0, MESSAGE_LIMIT) }
    const resetAt = toEpochMs(error.resetAt)
    if (resetAt !== undefined) result.resetAt = resetAt
    if (typeof error.retryAfterMs === 'number' && Number.isFinite(error.retryAfterMs)) {
      result.retryAfterMs = Math.max(0, Math.round(error.retryAfterMs))
    }
    return result
  }

  const links = chain(error)
  const message = links.map(messageOf).join(' | ')
  if (isModelUnavailableMessage(message)) return failure('modelUnavailable')

  const status = links.map(statusOf).find((s) => s !== undefined)
  const retryAfterMs = links.map((e) => retryAfterOf(e, now)).find((ms) => ms !== undefined)
  const resetAt = toEpochMs(error.resetAt) ?? parseResetTime(message, now)
  const usage = isUsageMessage(message)

  if (status === 429) {
    return usage
      ? failure('usageLimit', { resetAt, retryAfterMs })
      : failure('rateLimit', { retryAfterMs })
  }
  if (usage) return failure('usageLimit', { resetAt, retryAfterMs })
  if (status === 401 || status === 403) return failure('authentication')
  if (status !== undefined && status >= 500) return failure('outage')

  const code = links
    .map((e) => e.code ?? e.errno)
    .find((c) => typeof c === 'string' && outageCodes.has(c))
  if (code !== undefined) return failure('outage')

  if (ratePattern.test(message)) return failure('rateLimit', { retryAfterMs })
  if (authPattern.test(message)) return failure('authentication')
  if (outagePattern.test(message)) return failure('outage')
  return failure('other')
}
