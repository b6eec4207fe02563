// The requests a roster waits on (its callers' pending promises, by request id) and the
// leases it holds, counted by role as they come and go (`waiting`, `leased`, `counts`,
// the queue gauge); and what keeps a Node process alive while a lease with `timeoutMs`
// or a `signal` waits (its promise must settle, and an abort may come from a timer that
// does not hold the process, as `AbortSignal.timeout()`'s does not).

import { PendingRequests } from '../pending.js'

const MAX_TIMER_MS = 2 ** 31 - 1

export class Ledger {
  pending = new PendingRequests()
  /** role → requests waiting in the core's queue (a `waiting` output, not settled) */
  queued = new Map()
  queuedTotal = 0
  /** role → { n: leases held (granted or occupied, not released) }: one lookup a change */
  #held = new Map()
  heldTotal = 0
  #keepAliveWaiters = 0
  #keepAlive
  #stopped = false

  /** Removes a pending request and its abort listener; returns it. */
  settle(id) {
    const pending = this.pending.get(id)
    if (pending === undefined) return undefined
    this.pending.delete(id)
    pending.cleanup?.()
    if (pending.queued) {
      this.queued.set(pending.role, this.queued.get(pending.role) - 1)
      this.queuedTotal -= 1
    }
    if (pending.keepsAlive) this.#keepAliveChange(-1)
    return pending
  }

  /** Settles every pending request with `error()` (one error each). */
  rejectAll(error) {
    for (const [id] of [...this.pending]) this.settle(id)?.reject(error())
  }

  /** A `waiting` output: the core's report kept, the request counted once as waiting. */
  waiting(output) {
    const pending = this.pending.get(output.request)
    if (pending === undefined) return
    pending.report = output.report
    if (!pending.queued) {
      pending.queued = true
      this.queued.set(pending.role, (this.queued.get(pending.role) ?? 0) + 1)
      this.queuedTotal += 1
    }
  }

  /** A lease of `role` held (`delta` 1) or released (-1). */
  hold(role, delta) {
    let held = this.#held.get(role)
    if (held === undefined) this.#held.set(role, (held = { n: 0 }))
    held.n += delta
    this.heldTotal += delta
  }

  counts(role) {
    return { waiting: this.queued.get(role) ?? 0, leased: this.#held.get(role)?.n ?? 0 }
  }

  /** A waiter that keeps the process alive until it settles. */
  keepAlive(pending) {
    pending.keepsAlive = true
    this.#keepAliveChange(1)
  }

  #keepAliveChange(delta) {
    this.#keepAliveWaiters += delta
    if (this.#keepAliveWaiters > 0 && this.#keepAlive === undefined && !this.#stopped) {
      this.#keepAlive = setInterval(() => {}, MAX_TIMER_MS)
    } else if (this.#keepAliveWaiters === 0 && this.#keepAlive !== undefined) {
      this.stop(false)
    }
  }

  /** Lets the process go (`closed`: for good). */
  stop(closed = true) {
    this.#stopped ||= closed
    clearInterval(this.#keepAlive)
    this.#keepAlive = undefined
  }
}
