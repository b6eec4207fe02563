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
