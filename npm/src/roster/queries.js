// What a roster answers without changing anything: the policy's queries (from the
// replica as folded, on a shared log), the log's membership (a log in memory is its
// own leader, never fenced), the ledger's counts and the metrics. Defined on the
// Roster's prototype, non-enumerable as class methods are; `sideOf(roster)` gives its
// side (Roster.js `#side`).

import { list } from './requests.js'

const QUERIES = {
  snapshot: (policy) => policy.snapshot(),
  available: (policy, role) => policy.available(role),
  slots: (policy, role) => policy.slots(role),
  canEverServe: (policy, role, avoid = []) => policy.canEverServe(role, list(avoid, 'avoid') ?? []),
  /** Slots for `role` on the executors in the round, held or not. */
  capacity: (policy, role) => policy.capacity(role),
  /** `'held'`, `'out'`, or undefined: why a request outside `avoid` cannot be served by a call ending. */
  independenceBlocked: (policy, role, avoid = []) => policy.independenceBlocked(role, list(avoid, 'avoid') ?? []),
  coderHeld: (policy, role, avoid = []) => policy.independenceBlocked(role, list(avoid, 'avoid') ?? []) === 'held',
  /** The effort `role` runs at on `executor` (its `effort`: one, or per role with `default`), or undefined. */
  effortOf: (policy, executor, role) => policy.effortOf(executor, role) ?? undefined,
  explain: (policy, request) => policy.explain(typeof request === 'string' ? { role: request } : request),
  plan: (policy, document) => policy.plan(document),
  /** The state hash (16 hex digits): equal on every replica at the same foldedSeq. */
  stateHash: (policy) => policy.stateHash(),
}

/** The log's membership: `instance` (`<name>:<8 hex>`, shared), `isLeader`, `leaderEpoch`, `fenced`, `fence`, `foldedSeq`. */
const MEMBERSHIP = ['instance', 'isLeader', 'leaderEpoch', 'fenced', 'fence', 'foldedSeq']

export function defineQueries(Class, sideOf) {
  const define = (name, descriptor) => Object.defineProperty(Class.prototype, name, { configurable: true, enumerable: false, ...descriptor })
  for (const [name, query] of Object.entries(QUERIES)) {
    define(name, { writable: true, value: { [name](...args) { return query(sideOf(this).policy(), ...args) } }[name] })
  }
  /**
   * Resolves with `capacity(role)` once it is no longer `from` (at once when it already
   * differs): checked after every input the roster folds, a wake-up tick at an
   * exclusion's end included. Rejects CLOSED when the roster closes first.
   */
  define('capacityChanged', {
    writable: true,
    value: function capacityChanged(role, from) {
      const side = sideOf(this)
      try {
        const now = side.policy().capacity(role)
        if (now !== from) return Promise.resolve(now)
        if (side.signal.aborted) return Promise.reject(side.signal.reason)
      } catch (error) {
        return Promise.reject(error)
      }
      return new Promise((resolve, reject) => {
        const done = (settle, value) => {
          side.watchers.delete(check)
          side.signal.removeEventListener('abort', closed)
          settle(value)
        }
        const check = () => {
          try {
            const now = side.policy().capacity(role)
            if (now !== from) done(resolve, now)
          } catch (error) {
            done(reject, error)
          }
        }
        const closed = () => done(reject, side.signal.reason)
        side.watchers.add(check)
        side.signal.addEventListener('abort', closed)
      })
    },
  })
  // The running roster document, and its executors (the seed's `executors`).
  define('document', { get: function document() { return sideOf(this).policy().document() } })
  // (A worker's entry is its declaration: `name`, `kind`, `maxConcurrentAttempts`, …, and its `id`.)
  define('executors', { get: function executors() { return [...sideOf(this).entries().values()] } })
  for (const name of MEMBERSHIP) define(name, { get: { [name]() { return sideOf(this).log()[name] } }[name] })
  // Lease requests waiting in the queue and leases held (granted or occupied, not yet
  // released): all roles, or `{ waiting, leased }` of one (shared: this instance's).
  define('waiting', { get: function waiting() { return sideOf(this).ledger.queuedTotal } })
  define('leased', { get: function leased() { return sideOf(this).ledger.heldTotal } })
  define('counts', { writable: true, value: function counts(role) { return sideOf(this).ledger.counts(role) } })
  /**
   * The roster's metrics as Prometheus text: rota_leases_granted_total,
   * rota_lease_wait_seconds, rota_exclusions_total{kind}, rota_probes_total,
   * rota_queue_length{role}, rota_state_writes_total.
   */
  define('metrics', { writable: true, value: function metrics() { return sideOf(this).metrics().prometheus() } })
}
