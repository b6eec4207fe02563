// What a roster answers without changing anything: the policy's queries (from the
// replica as folded, on a shared log) and the log's membership (a log in memory is its
// own leader, never fenced). Defined on the Roster's prototype, non-enumerable as class
// methods are; `policyOf(roster)` and `logOf(roster)` reach its private fields.

import { list } from './requests.js'

const QUERIES = {
  snapshot: (policy) => policy.snapshot(),
  available: (policy, role) => policy.available(role),
  slots: (policy, role) => policy.slots(role),
  canEverServe: (policy, role, avoid = []) => policy.canEverServe(role, list(avoid, 'avoid') ?? []),
  explain: (policy, request) => policy.explain(typeof request === 'string' ? { role: request } : request),
  plan: (policy, document) => policy.plan(document),
  /** The state hash (16 hex digits): equal on every replica at the same foldedSeq. */
  stateHash: (policy) => policy.stateHash(),
}

/** The log's membership: `instance` (`<name>:<8 hex>`, shared), `isLeader`, `leaderEpoch`, `fenced`, `fence`, `foldedSeq`. */
const MEMBERSHIP = ['instance', 'isLeader', 'leaderEpoch', 'fenced', 'fence', 'foldedSeq']

export function defineQueries(Class, policyOf, logOf) {
  const define = (name, descriptor) => Object.defineProperty(Class.prototype, name, { configurable: true, enumerable: false, ...descriptor })
  for (const [name, query] of Object.entries(QUERIES)) {
    define(name, { writable: true, value: { [name](...args) { return query(policyOf(this), ...args) } }[name] })
  }
  // The running roster document, and its executors (the seed's `executors`).
  define('document', { get: function document() { return policyOf(this).document() } })
  define('executors', { get: function executors() { return policyOf(this).document()?.executors ?? [] } })
  for (const name of MEMBERSHIP) define(name, { get: { [name]() { return logOf(this)[name] } }[name] })
}
