// A shared roster's appends (sql/PROTOCOL.md, "Calls"): one batch in flight per
// instance, and whatever arrives meanwhile goes in the next batch (one commit). The
// leader's entries (ticks, probe results, expiries) go in batches of their own, with
// the epoch, first.

/**
 * `log`: the instance's PgLog (pg-log.js): its `store`, `instance`, `leaderEpoch`, and
 * `appended(batch, result, sentAt, instance)`, `appendFailed(error, calls)` (a plain
 * batch's append failed: whether it landed is unknown). A refused leader batch rejects
 * its entries (`pushLeader`).
 */
export class Appender {
  #log
  #retryMs
  #queue = []
  #leaderQueue = []
  #running = null
  #retry
  #stopped = false
  /** The batch whose append is in flight, or null. */
  inFlight = null
  /** The last seq of this instance's latest append that returned: its entries above it are in flight. */
  sentThrough = 0

  constructor(log, retryMs) {
    this.#log = log
    this.#retryMs = retryMs
  }

  /** Queues an entry (JSON text) for the next batch; `call` comes back in `appended`. */
  push(text, call) {
    this.#queue.push({ text, call })
    this.kick()
  }

  /** A leader-only entry; resolves with its seq, rejects when refused or not the leader. */
  pushLeader(text) {
    return new Promise((resolve, reject) => {
      this.#leaderQueue.push({ text, resolve, reject })
      this.kick()
    })
  }

  /** Drops the queued calls (a call's `reject`, when it has one) and leader entries with `error()`; the rest stays queued. */
  dropCalls(error) {
    for (const item of this.#queue) item.call?.reject?.(error())
    this.#queue = this.#queue.filter((item) => item.call === undefined)
    for (const item of this.#leaderQueue.splice(0)) item.reject(error())
  }

  /** Whether a call for request `id` is queued or in flight (not in the log as far as we know). */
  unsent(id) {
    const match = (item) => item.call?.request === id
    return this.#queue.some(match) || this.inFlight?.some(match) === true
  }

  /** Resolves once nothing is queued or in flight (or the appends stopped on a failure). */
  async drain() {
    while (this.#running !== null) await this.#running
  }

  stop() {
    this.#stopped = true
    clearTimeout(this.#retry)
    this.#retry = undefined
  }

  /** Sends what is queued (after a failure: once the retry delay is over). */
  kick() {
    if (this.#running !== null || this.#stopped || this.#retry !== undefined) return
    if (this.#queue.length === 0 && this.#leaderQueue.length === 0) return
    // Assigned after the call: a loop that ends at once must not leave a stale promise.
    const run = this.#loop().finally(() => {
      if (this.#running !== run) return
      this.#running = null
      // What was queued between the loop's last check and here is sent now.
      this.kick()
    })
    this.#running = run
  }

  async #loop() {
    const log = this.#log
    while (!this.#stopped && (this.#queue.length > 0 || this.#leaderQueue.length > 0)) {
      const leader = this.#leaderQueue.length > 0
      const batch = leader ? this.#leaderQueue.splice(0) : this.#queue.splice(0)
      const epoch = leader ? log.leaderEpoch : undefined
      if (epoch === null) {
        for (const item of batch) item.reject(Object.assign(new Error('not the leader any more'), { code: 'STALE_EPOCH' }))
        continue
      }
      const instance = log.instance
      this.inFlight = batch
      const sentAt = Date.now()
      let result
      try {
        result = await log.store.append(
          batch.map((item) => item.text),
          epoch === undefined ? { instance } : { instance, epoch },
        )
      } catch (error) {
        this.inFlight = null
        if (this.#stopped) return
        if (leader) {
          for (const item of batch) item.reject(error)
          continue
        }
        // Whether it landed is unknown: what needs no answer (a release, a cancel:
        // harmless twice) is sent again later; the calls fail (appendFailed fences).
        this.#queue.unshift(...batch.filter((item) => item.call === undefined))
        log.appendFailed(error, batch.filter((item) => item.call !== undefined))
        this.#retry = setTimeout(() => {
          this.#retry = undefined
          this.kick()
        }, this.#retryMs)
        this.#retry.unref?.()
        return
      }
      this.inFlight = null
      if (this.#stopped) return
      if (instance === log.instance) this.sentThrough = result.lastSeq
      batch.forEach((item, i) => item.resolve?.(result.firstSeq + i))
      log.appended(batch, result, sentAt, instance)
    }
  }
}
