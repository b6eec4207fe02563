// Errors the package throws: the core's (built in WebAssembly, name `RotaError`) and the
// driver's own (a request that ends without a lease). Every one is an `Error` with a
// stable `code`; `instanceof RotaError` holds for all of them.

/** The core's codes (rota_core::Error::code) and the driver's. */
export const ERROR_CODES = Object.freeze([
  // core
  'INVALID_DOCUMENT',
  'UNKNOWN_ROLE',
  'UNKNOWN_LEASE',
  'UNKNOWN_REQUEST',
  'DUPLICATE_REQUEST',
  'UNKNOWN_EXECUTOR',
  'INVALID_INPUT',
  'INVALID_OPTIONS',
  'INVALID_STATE',
  'UNSUPPORTED_VERSION',
  'STATE_FILE_CORRUPT',
  // driver
  'EXHAUSTED',
  'TIMEOUT',
  'ABORT_ERR',
  'CLOSED',
  'STATE_FILE_UNREADABLE',
  'PREFLIGHT_FAILED',
  // a shared roster (src/roster/pg-log.js): an instance that lost the log; a log
  // that does not start with a genesis entry
  'FENCED',
  'INVALID_LOG',
  // a function the browser build leaves out for its download size (`Policy.importState`)
  'NOT_IN_BUILD',
])

const codes = new Set(ERROR_CODES)

export class RotaError extends Error {
  /**
   * @param {string} code one of ERROR_CODES
   * @param {string} message what and where
   * @param {object} [fields] extra properties (violations, role, reasons ...)
   * @param {{cause?: unknown}} [options]
   */
  constructor(code, message, fields = {}, options = undefined) {
    super(message, options)
    this.name = 'RotaError'
    this.code = code
    Object.assign(this, fields)
  }

  // Errors built inside the WebAssembly module are plain `Error`s with a `code`.
  static [Symbol.hasInstance](value) {
    return value instanceof Error && typeof value.code === 'string' && codes.has(value.code)
  }
}

/** `INVALID_DOCUMENT` with every violation, the way the core reports it. */
export function invalidDocument(violations) {
  const list = violations.map((v) => `${v.path}: ${v.message}`).join('; ')
  return new RotaError('INVALID_DOCUMENT', `the roster document is invalid: ${list}`, {
    violations,
  })
}

/** "a: busy (1 of 1 slots); b: avoided by the request" from an explanation. */
export function explainReasons(explanation) {
  return (explanation?.executors ?? [])
    .filter((e) => !e.ok)
    .map((e) => `${e.id}: ${e.reasons.join(', ')}`)
}

/**
 * The seed's `RosterExhausted`: no executor outside `avoid` can ever serve the role,
 * with the core's reasons (one per executor). `explanation` is the core's `explain`
 * of the request at that moment, kept on the error.
 */
export function exhausted(output, label, explanation) {
  const reasons = output.reasons
  const error = new RotaError(
    'EXHAUSTED',
    `no executor can ever take ${output.role}${label === undefined ? '' : ` for ${label}`}: ${reasons.join('; ')}`,
    { role: output.role, reasons, request: output.request, ...(explanation === undefined ? {} : { explain: explanation }) },
  )
  error.name = 'RosterExhausted'
  return error
}

/**
 * No executor took the request before its deadline (`timeoutMs`, or an
 * `AbortSignal.timeout()` signal: then `cause` is its reason). Says why: the core's
 * reasons at the deadline (its `timedOut` output), else (a signal's timeout, which the
 * core does not see) the `explain` of the request then; and the last waiting report.
 */
export function timedOut({ request, role, timeoutMs, label, reasons, report, explanation, cause }) {
  const why = reasons ?? explainReasons(explanation)
  const error = new RotaError(
    'TIMEOUT',
    `no executor took ${role}${label === undefined ? '' : ` for ${label}`}${timeoutMs === undefined ? '' : ` within ${timeoutMs} ms`}${why.length > 0 ? `: ${why.join('; ')}` : report ? `: ${report}` : ''}`,
    omitUndefined({ role, request, timeoutMs, reasons: why, report, explain: explanation }),
    cause === undefined ? undefined : { cause },
  )
  error.name = 'TimeoutError'
  return error
}

const omitUndefined = (object) => Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined))

/** An aborted signal without a reason (a signal-like object): Node's convention, name AbortError, code ABORT_ERR. */
export function aborted(reason) {
  const error = new RotaError('ABORT_ERR', 'the lease request was aborted', {}, { cause: reason })
  error.name = 'AbortError'
  return error
}

export function closed(what = 'the roster is closed') {
  return new RotaError('CLOSED', what)
}

/**
 * A shared roster's instance is fenced (sql/PROTOCOL.md, "Heartbeats, fencing,
 * rejoining"): it lost the log, so it grants nothing until it has rejoined.
 */
export function fenced(reason, since) {
  return new RotaError(
    'FENCED',
    `this shared roster instance is fenced since ${new Date(since).toISOString()}: ${reason}; it grants nothing until it rejoins the log (leases it still holds may already be another's)`,
    { reason, since },
  )
}
