// The driver's live requests by id: in insertion order, as a Map, but without a Map's
// churn on the hot path.
//
// Most requests are granted (or refused) by the very step that feeds them: set, then
// get and delete within one call. Those wait in a slot, the newest entry, found by
// comparing one string. An entry moves on when another comes after it:
//
// - one named as the driver names them (`r<n>`, n rising) goes to the back of a queue
//   of arrays, found by its number (the front first: the core grants in the order
//   requests wait, mostly; else a binary search), its place emptied when it goes;
// - any other to a Map.
//
// Why not a Map for all (issue 15, b): a Map whose entries come and go rebuilds its
// table every few dozen entries, and V8 leaves the old table, once promoted, holding
// every entry it had until the next full collection. Each request waiting in that
// churn then outlived two scavenges with everything it referenced (its input, its
// promise, its lease): 1.4 MB copied per scavenge in b at 64 executors, 265 KB with
// the values boxed, and the scavenges 0.4–0.6 µs of a 3.8–4.3 µs cycle. The queue's arrays stay
// the same arrays (compacted in place), so an empty place holds nothing.

/**
 * The number in `r<digits>`, or -1; -1 for an id that is no string (a caller's, which
 * the core then refuses). (`r05` and `r5` give one number: a queue place is matched
 * by the whole id, and holds one entry a number, so they cannot be mistaken.)
 */
function ownNumber(id) {
  if (typeof id !== 'string') return -1
  const length = id.length
  if (length < 2 || length > 16 || id.charCodeAt(0) !== 114 /* r */) return -1
  let n = 0
  for (let i = 1; i < length; i += 1) {
    const digit = id.charCodeAt(i) - 48
    if (digit < 0 || digit > 9) return -1
    n = n * 10 + digit
  }
  return n <= Number.MAX_SAFE_INTEGER ? n : -1
}

/** Empty places tolerated in the queue before it is compacted (and at most half of it). */
const QUEUE_SLACK = 32

export class PendingRequests {
  /** Entries not named `r<n>` in rising order, each in a box emptied when it goes. */
  #map = new Map()
  /** The queue: numbers rising, a gone entry's id and value undefined; from #head on. */
  #numbers = []
  #ids = []
  #values = []
  #head = 0
  #queued = 0
  /** Insertion order between the queue and the Map (only iteration reads it). */
  #orders = []
  #order = 0
  /** The newest entry (undefined id: none); every other entry is older. */
  #id = undefined
  #value = undefined
  #valueOrder = 0

  get size() {
    return this.#map.size + this.#queued + (this.#id === undefined ? 0 : 1)
  }

  /** The queue place holding `id`, or -1. */
  #place(id) {
    if (this.#queued === 0) return -1
    const n = ownNumber(id)
    if (n < 0) return -1
    const numbers = this.#numbers
    let low = this.#head
    // The front first: the core mostly grants the longest waiting.
    if (numbers[low] !== n) {
      let high = numbers.length - 1
      if (n < numbers[low] || n > numbers[high]) return -1
      while (low < high) {
        const middle = (low + high) >>> 1
        if (numbers[middle] < n) low = middle + 1
        else high = middle
      }
      if (numbers[low] !== n) return -1
    }
    return this.#ids[low] === id ? low : -1
  }

  get(id) {
    if (id === this.#id) return this.#value
    const place = this.#place(id)
    if (place >= 0) return this.#values[place]
    return this.#map.size > 0 ? this.#map.get(id)?.value : undefined
  }

  has(id) {
    return id === this.#id || this.#place(id) >= 0 || (this.#map.size > 0 && this.#map.has(id))
  }

  /** Sets `id`: an id already held keeps its place, as in a Map. */
  set(id, value) {
    if (id === this.#id) {
      this.#value = value
      return this
    }
    const place = this.#place(id)
    if (place >= 0) {
      this.#values[place] = value
      return this
    }
    const box = this.#map.size > 0 ? this.#map.get(id) : undefined
    if (box !== undefined) {
      box.value = value
      return this
    }
    if (this.#id !== undefined) this.#keep(this.#id, this.#value, this.#valueOrder)
    this.#id = id
    this.#value = value
    this.#valueOrder = this.#order++
    return this
  }

  /** Files the newest entry when another comes: in the queue if it is `r<n>` past its back. */
  #keep(id, value, order) {
    const n = ownNumber(id)
    const numbers = this.#numbers
    if (n >= 0 && (numbers.length === 0 || n > numbers[numbers.length - 1])) {
      numbers.push(n)
      this.#ids.push(id)
      this.#values.push(value)
      this.#orders.push(order)
      this.#queued += 1
    } else {
      this.#map.set(id, { value, order })
    }
  }

  delete(id) {
    if (id === this.#id) {
      this.#id = undefined
      this.#value = undefined
      return true
    }
    const place = this.#place(id)
    if (place >= 0) {
      this.#ids[place] = undefined
      this.#values[place] = undefined
      this.#queued -= 1
      this.#shrink()
      return true
    }
    const box = this.#map.size > 0 ? this.#map.get(id) : undefined
    if (box === undefined) return false
    box.value = undefined
    return this.#map.delete(id)
  }

  /** Moves the head past gone entries; compacts in place once they are most of it. */
  #shrink() {
    const ids = this.#ids
    const length = ids.length
    let head = this.#head
    while (head < length && ids[head] === undefined) head += 1
    this.#head = head
    if (this.#queued === 0) {
      this.#numbers.length = 0
      ids.length = 0
      this.#values.length = 0
      this.#orders.length = 0
      this.#head = 0
      return
    }
    const empty = length - this.#queued
    if (empty <= QUEUE_SLACK || empty * 2 <= length) return
    const numbers = this.#numbers
    const values = this.#values
    const orders = this.#orders
    let to = 0
    for (let from = head; from < length; from += 1) {
      if (ids[from] === undefined) continue
      numbers[to] = numbers[from]
      ids[to] = ids[from]
      values[to] = values[from]
      orders[to] = orders[from]
      to += 1
    }
    numbers.length = to
    ids.length = to
    values.length = to
    orders.length = to
    this.#head = 0
  }

  *[Symbol.iterator]() {
    const entries = []
    for (let i = this.#head; i < this.#ids.length; i += 1) {
      if (this.#ids[i] !== undefined) entries.push([this.#orders[i], this.#ids[i], this.#values[i]])
    }
    for (const [id, box] of this.#map) entries.push([box.order, id, box.value])
    entries.sort((a, b) => a[0] - b[0])
    for (const [, id, value] of entries) yield [id, value]
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
    /** When it was asked for (the log's time): its grant's wait is counted from then. */
    this.sentAt = undefined
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
