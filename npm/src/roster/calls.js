// The caller's calls that change state beyond a lease: `report`, `exclude`, `resume`,
// `reload`, and `use` (lease, run, report, release), with `classify` beside `report`.
// Each builds its input and hands it to the roster's `call` (Roster.js): in memory it is
// folded at once and the call returns its value (a refusal throws); on a shared log it
// is appended and the call returns a Promise settled when its entry is folded.
// Defined on the Roster's prototype; `inner(roster)` gives the roster's side:
// { call(build, answer), now(), remote(), closing(), checkClosing(), policy(), resolve(document) }.

import { FAILURE_KINDS, failureFacts } from '../classify.js'
import { RotaError } from '../errors.js'
import { exclusionFrom, omitUndefined } from './requests.js'

/**
 * The kind the core gave a reported failure, for `rota_failures_total`: its
 * classification, and `outage` for a call that could not reach its engine when the
 * report took the executor out for its health check (the core's `unreachable` rule).
 */
function failureKind(inner, failure, exclusion) {
  try {
    const { kind, rule } = inner.policy().classify(failure)
    return rule === 'unreachable' && exclusion?.kind === 'health' ? 'outage' : kind
  } catch {
    return failure.kind ?? 'other' // the roster closed meanwhile
  }
}

const CALLS = {
  /**
   * Leases, runs `fn(lease)`, reports what it throws (then rethrows it) and releases:
   * generic-pool's `use`. Resolves with what `fn` returns. `report: false` leaves
   * failures unreported.
   */
  async use(inner, role, fn, options = {}) {
    if (typeof fn !== 'function') {
      throw new RotaError('INVALID_INPUT', `use(role, fn): fn must be a function, not ${fn === null ? 'null' : typeof fn}`)
    }
    const { report = true, ...leaseOptions } = options ?? {}
    const lease = await this.lease(role, leaseOptions)
    try {
      return await fn(lease)
    } catch (error) {
      if (report !== false && !inner.closing()) {
        try {
          // (In memory it answers at once: the lease is released with no wait.)
          if (inner.remote()) await this.report(lease.executorId, error)
          else this.report(lease.executorId, error)
        } catch {
          // A report the core refuses must not hide the caller's own error.
        }
      }
      throw error
    } finally {
      lease.release()
    }
  },

  /**
   * Reports a failed call on an executor: a real error (its facts extracted with
   * `failureFacts`, classified by the core with the document's signals) or an
   * already-classified `{ kind, message, resetAt?, retryAfterMs? }`. Returns the
   * exclusion it earned, if any (shared: a Promise of it).
   */
  report(inner, executor, error) {
    let failure
    return inner.call(
      (now) => {
        if (error !== null && typeof error === 'object' && !(error instanceof Error) && 'kind' in error && !FAILURE_KINDS.includes(error.kind)) {
          // A classified failure with a kind this package does not know would count as
          // `other` (excluding nothing) without a word: refuse it.
          throw new RotaError('INVALID_INPUT', `unknown failure kind ${JSON.stringify(error.kind)}: one of ${FAILURE_KINDS.join(', ')}`)
        }
        failure = failureFacts(error, { now: now ?? inner.now() })
        return now === undefined ? { type: 'report', executor, failure } : { type: 'report', now, executor, failure }
      },
      (outputs) => {
        const exclusion = exclusionFrom(outputs, executor)
        inner.metrics().failed(executor, failureKind(inner, failure, exclusion))
        return exclusion
      },
    )
  },

  /** The kind the core gives `error` with this roster's signals, reporting nothing: `{ kind, rule, resetAt? }`. */
  classify(inner, error) {
    inner.checkClosing()
    const now = inner.now()
    return inner.policy().classify(failureFacts(error, { now }), now)
  },

  /**
   * Takes an executor out of the round: `exclude(id, { kind, reason, until })`, or the
   * seed's `exclude({ id, kind, reason, until })`. Kind defaults to `manual`.
   */
  exclude(inner, executor, options = {}) {
    return inner.call((now) => {
      const spec = typeof executor === 'object' && executor !== null ? executor : { ...options, id: executor }
      const until = spec.until instanceof Date ? spec.until.getTime() : spec.until
      return omitUndefined({ type: 'exclude', now, executor: spec.id, kind: spec.kind, reason: spec.reason, until })
    })
  },

  /** Ends an executor's exclusion, whatever its kind. */
  resume(inner, executor) {
    return inner.call((now) => omitUndefined({ type: 'resume', now, executor }))
  },

  /**
   * Replaces the roster live (on a shared log: for every instance). Without a document,
   * re-reads `rosterPath` and `repoRosterPath` (merged and narrowed as at create).
   * Rejects INVALID_DOCUMENT and changes nothing.
   */
  async reload(inner, document) {
    const next = await inner.resolve(document)
    await inner.call((now) => omitUndefined({ type: 'reload', now, document: next }))
  },
}

export function defineCalls(Class, innerOf) {
  for (const [name, call] of Object.entries(CALLS)) {
    // (Three parameters, the most any call takes: no rest array per call.)
    const value = { [name](a, b, c) { return call.call(this, innerOf(this), a, b, c) } }[name]
    Object.defineProperty(Class.prototype, name, { value, writable: true, configurable: true, enumerable: false })
  }
}
