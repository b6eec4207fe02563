// The driver's live requests by id: a Map, with the newest entry held apart.
//
// Most requests are granted (or refused) by the very step that feeds them: set, then
// get and delete within one call. A Map pays for that churn (its table fills with
// deleted entries and is rebuilt every few requests, and the core's answer names the
// request with a string of its own, hashed anew); here the newest entry waits in a
// slot, found by comparing one string, and goes into the Map only when another entry
// comes after it. Iteration is in insertion order, as a Map's.

export class PendingRequests {
  #map = new Map()
  /** The newest entry (undefined id: none); every entry of #map is older. */
  #id = undefined
  #value = undefined

  get size() {
    return this.#map.size + (this.#id === undefined ? 0 : 1)
  }

  get(id) {
    return id === this.#id ? this.#value : this.#map.get(id)
  }

  has(id) {
    return id === this.#id || this.#map.has(id)
  }

  /** Sets `id`: an id already held keeps its place, as in a Map. */
  set(id, value) {
    if (id === this.#id) {
      this.#value = value
      return this
    }
    if (this.#map.size > 0 && this.#map.has(id)) {
      this.#map.set(id, value)
      return this
    }
    if (this.#id !== undefined) this.#map.set(this.#id, this.#value)
    this.#id = id
    this.#value = value
    return this
  }

  delete(id) {
    if (id === this.#id) {
      this.#id = undefined
      this.#value = undefined
      return true
    }
    return this.#map.delete(id)
  }

  *[Symbol.iterator]() {
    yield* this.#map
    if (this.#id !== undefined) yield [this.#id, this.#value]
  }
}

/**
 * A live request (a lease's, a tryLease's, an occupy's): what the driver knows of it,
 * and the resolvers of its promise once the caller has one. Most requests are settled
 * by the very step that feeds them, before `promise()` is called: such a one gets an
 * already settled promise (`Promise.resolve(value)` or `Promise.reject(error)`, what a
 * `new Promise` settled in its executor is) and never makes resolvers. As with a
 * promise's resolvers, the first settlement wins.
 */
export class PendingRequest {
  constructor(type, role, label, timeoutMs, input) {
    this.type = type
    this.role = role
    this.label = label
    this.timeoutMs = timeoutMs
    this.input = input
    /** The core's last `waiting` report; whether it waits in the core's queue. */
    this.report = undefined
    this.queued = false
    this.abortReason = undefined
    this.cleanup = undefined
    this.keepsAlive = false
    /** 0 unsettled, 1 resolved, 2 rejected (with `value`), while there is no promise. */
    this.settled = 0
    this.value = undefined
    this.onResolve = undefined
    this.onReject = undefined
  }

  resolve(value) {
    if (this.onResolve !== undefined) this.onResolve(value)
    else if (this.settled === 0) {
      this.settled = 1
      this.value = value
    }
  }

  reject(error) {
    if (this.onReject !== undefined) this.onReject(error)
    else if (this.settled === 0) {
      this.settled = 2
      this.value = error
    }
  }

  /** The request's promise (asked for once). */
  promise() {
    if (this.settled === 1) return Promise.resolve(this.value)
    if (this.settled === 2) return Promise.reject(this.value)
    // One executor for every request (no closure made per promise): it runs inside
    // the constructor, so `resolving` is this request's for exactly that call.
    resolving = this
    const promise = new Promise(takeResolvers)
    resolving = undefined
    return promise
  }
}

/** The request whose promise is being made (see `promise`). */
let resolving

function takeResolvers(resolve, reject) {
  resolving.onResolve = resolve
  resolving.onReject = reject
}
