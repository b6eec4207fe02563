// Requests and their leases: what a caller's lease, tryLease and occupy become (the
// input's fields, checked), and the `Lease` a grant resolves with.

import { RotaError, aborted, exhausted, timedOut } from '../errors.js'

// Node 20 ships Symbol.dispose/asyncDispose (as Symbol.for('nodejs.dispose') ...);
// elsewhere fall back to the registered symbols Babel and TypeScript helpers use.
export const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose')
export const asyncDisposeSymbol = Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose')

/** A granted lease. `release()` is idempotent; `using` releases it on scope exit. */
export class Lease {
  #release
  #released = false

  constructor(output, spec, release, grantedAt, purpose, effort) {
    /** The lease id (the core's). */
    this.id = output.lease
    /** The request id the driver gave the request. */
    this.request = output.request
    /** The executor's entry in the running roster document (the seed's `executor`). */
    this.executor = spec
    this.executorId = output.executor
    this.role = output.role
    /** The effort its role runs at on its executor (the executor's `effort`), when it sets one. */
    if (effort != null) this.effort = effort
    if (output.hold !== undefined) this.hold = output.hold
    /** Earlier waiting requests for the role that this one passed. */
    this.passed = output.passed
    this.occupied = output.occupied === true
    /** Its clone number on the executor, when the document numbers clones (`cloneName(executorId, clone)`). */
    if (output.clone !== undefined) this.clone = output.clone
    /** What the call is for beyond its role, as its request said. */
    if (purpose !== undefined) this.purpose = purpose
    /** On the request's `borrow` executor without a slot (it holds none). */
    if (output.borrowed === true) this.borrowed = true
    /** On the request's `borrow` executor (not independent): 'nobody' | 'held' | 'out'. */
    if (output.because !== undefined) this.because = output.because
    this.grantedAt = grantedAt
    this.#release = release
  }

  get released() {
    return this.#released
  }

  release() {
    if (this.#released) return
    this.#released = true
    this.#release(this.id, this.role)
  }

  [disposeSymbol]() {
    this.release()
  }

  async [asyncDisposeSymbol]() {
    this.release()
  }
}

export const omitUndefined = (object) => {
  const out = {}
  for (const key in object) {
    const value = object[key]
    if (value !== undefined) out[key] = value
  }
  return out
}

export const list = (value, what) => {
  if (value === undefined || value === null) return undefined
  if (typeof value === 'string') return [value]
  if (Array.isArray(value)) return value
  throw new RotaError('INVALID_INPUT', `${what} must be a list of executor ids`)
}

/** A lease's options, checked: its signal (or undefined), an AbortSignal or one like it (a polyfill's). */
export function checkRequest(type, options) {
  if (options === null || typeof options !== 'object') throw new RotaError('INVALID_INPUT', `${type} options must be an object`)
  const signal = options.signal
  const methods = typeof signal?.addEventListener === 'function' && typeof signal.removeEventListener === 'function'
  if (signal !== undefined && !(signal !== null && typeof signal === 'object' && typeof signal.aborted === 'boolean' && methods)) {
    throw new RotaError('INVALID_INPUT', `signal must be an AbortSignal, not ${signal === null ? 'null' : typeof signal}`)
  }
  return signal
}

/** Adds the request's optional fields to `input`, only those given; returns `timeoutMs` rounded up, or undefined. */
export function requestFields(input, options) {
  // Built field by field (the hot path of every lease).
  const avoid = list(options.avoid, 'avoid')
  if (avoid !== undefined) input.avoid = avoid
  if (options.prefer !== undefined) input.prefer = options.prefer
  if (options.pin !== undefined) input.pin = options.pin
  if (options.rank !== undefined) input.rank = options.rank
  const eventTime = options.eventTime instanceof Date ? options.eventTime.getTime() : options.eventTime
  if (eventTime !== undefined) input.eventTime = eventTime
  if (options.label !== undefined) input.label = options.label
  if (options.purpose !== undefined) input.purpose = options.purpose
  if (options.tenant !== undefined) input.tenant = options.tenant
  // A cache key: the core prefers the executor of the key's last grant.
  if (options.affinity !== undefined) input.affinity = options.affinity
  // An id, or the executor's entry (the upstream's `borrow: ExecutorSpec`).
  if (options.borrow !== undefined) input.borrow = typeof options.borrow === 'object' && options.borrow !== null ? options.borrow.id : options.borrow
  if (options.timeoutMs === undefined) return undefined
  const ms = Number(options.timeoutMs)
  if (!Number.isFinite(ms) || ms < 0) {
    throw new RotaError('INVALID_INPUT', `timeoutMs must be a number of milliseconds, not ${options.timeoutMs}`)
  }
  return Math.ceil(ms)
}

export const duplicate = (id) => new RotaError('DUPLICATE_REQUEST', `request id '${id}' is already in use by a live request`)

/** `explain` of a request's constraints, or undefined if the core refuses it. */
function explainQuietly(policy, { role, avoid, prefer, pin, affinity }) {
  try {
    return policy.explain(omitUndefined({ role, avoid, prefer, pin, affinity }))
  } catch {
    return undefined
  }
}

/** A request's TIMEOUT error (the core's `timedOut`, or an abort signal's timeout). */
export function timeoutError(policy, request, pending, cause, reasons) {
  return timedOut({
    request,
    role: pending.role,
    timeoutMs: pending.timeoutMs,
    label: pending.label,
    reasons,
    report: pending.report,
    explanation: pending.input && explainQuietly(policy, pending.input),
    cause,
  })
}

export const exhaustedError = (policy, output, pending) =>
  exhausted(output, pending.label, pending.input && explainQuietly(policy, pending.input))

/**
 * What an aborted lease rejects with: the signal's reason, as `fetch` does; a timeout
 * signal's (`AbortSignal.timeout()`) is a TIMEOUT saying why, with that reason as its cause.
 */
export function abortError(policy, signal, pending, request) {
  const reason = signal.reason
  if (reason?.name === 'TimeoutError') return timeoutError(policy, request, pending, reason)
  return reason === undefined ? aborted(reason) : reason
}

/**
 * The exclusion a report put in force, from the core's answer (its `excluded` event,
 * always emitted: warn is the highest level), in the seed's shape `{ id, kind, reason,
 * until? }`; undefined when it earned none or a stronger one stays.
 */
export function exclusionFrom(outputs, executor) {
  const event = outputs.find((o) => o.type === 'event' && o.name === 'excluded' && o.fields?.executor === executor)
  if (event === undefined) return undefined
  const { kind, reason, until } = event.fields
  return until === undefined ? { id: executor, kind, reason } : { id: executor, kind, reason, until }
}
