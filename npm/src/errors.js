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
  // driver
  'EXHAUSTED',
  'TIMEOUT',
  'ABORT_ERR',
  'CLOSED',
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

/** The seed's `RosterExhausted`: no executor outside `avoid` can ever serve the role. */
export function exhausted(output, label) {
  const error = new RotaError(
    'EXHAUSTED',
    `no executor can ever take ${output.role}${label === undefined ? '' : ` for ${label}`}: ${output.reasons.join('; ')}`,
    { role: output.role, reasons: output.reasons, request: output.request },
  )
  error.name = 'RosterExhausted'
  return error
}

export function timedOut(request, role, timeoutMs, label) {
  const error = new RotaError(
    'TIMEOUT',
    `no executor took ${role}${label === undefined ? '' : ` for ${label}`} within ${timeoutMs} ms`,
    { role, request, timeoutMs },
  )
  error.name = 'TimeoutError'
  return error
}

/** Node's convention for an aborted operation: name AbortError, code ABORT_ERR. */
export function aborted(reason) {
  const error = new RotaError('ABORT_ERR', 'the lease request was aborted', {}, { cause: reason })
  error.name = 'AbortError'
  return error
}

export function closed(what = 'the roster is closed') {
  return new RotaError('CLOSED', what)
}
