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
