// The log in memory: a roster's inputs folded in the process as they are appended (one
// instance, always the leader and every request's owner, nobody to fence). Appending
// folds at once, synchronously (Roster's `#step`); what this module keeps is the clock
// that stamps each input's `now` and the one timer that feeds a `tick` at the core's
// wake-up time.

import { RotaError } from '../errors.js'

const MAX_TIMER_MS = 2 ** 31 - 1

export class MemoryLog {
  /** Every owner is this instance: outputs carry no owner, nor do inputs. */
  instance = undefined
  isLeader = true
  leaderEpoch = null
  fenced = false
  fence = null
  /** The roster closed: no timer is armed any more. */
  closed = false
  #clock
  #scheduler
  #side
  #timer
  #timerAt
  #lastTickAt

  /** `scheduler`: `{ now(), setTimer(at, fn), clearTimer(handle) }` (scheduler.js); `side`: the roster's (Roster.js `#side`). */
  constructor(scheduler, side) {
    this.#scheduler = scheduler
    this.#clock = () => scheduler.now()
    this.#side = side
  }

  /**
   * Starts the roster on `policy`: the state file restored, the start's preflights
   * passed (`preflight`: a failure closes the roster and throws PREFLIGHT_FAILED), the
   * timer armed.
   */
  async open(policy, resolved, preflight) {
    const side = this.#side
    side.adopt(policy)
    // A clock that cannot give a time fails the start, not a later timer.
    this.now()
    side.warnings(resolved, () => policy.document())
    await side.restore()
    if (preflight) {
      side.feed({ type: 'tick' })
      try {
        await side.preflights().started()
      } catch (error) {
        await side.close()
        throw error
      }
    }
    this.wake(side.wakeAt())
  }

  /** A `probe` output: this instance leads, so it runs the probe and appends the result. */
  probe(executor, url) {
    const side = this.#side
    side.probe(executor, url, (up) => side.feed({ type: 'probeResult', executor, up }))
  }

  /**
   * The clock's time: whole epoch milliseconds, as every input's `now` must be
   * (rota_core::limits::MAX_SAFE_INTEGER at most). A clock that gives anything else
   * (NaN, a fraction, a negative, Infinity, not a number) throws INVALID_INPUT naming
   * it, rather than running the roster at a made-up time.
   */
  now() {
    const time = this.#clock()
    const now = time instanceof Date ? time.getTime() : time
    if (typeof now !== 'number' || !Number.isSafeInteger(now) || now < 0) {
      throw new RotaError(
        'INVALID_INPUT',
        `invalid input: the clock (options.now) gave ${typeof now === 'number' ? String(now) : typeof now}; it must give whole epoch milliseconds from 0 to ${Number.MAX_SAFE_INTEGER}`,
      )
    }
    return now
  }

  /** The time of a tick about to be fed (a wake-up at or before it waits a second). */
  ticking() {
    const now = this.now()
    this.#lastTickAt = now
    return now
  }

  /** Arms the timer for the core's wake-up `at` (null: none wanted). */
  wake(at) {
    if (this.closed) return
    const none = at === undefined || at === null
    // A timer armed for no later than `at` stays (issue 15: each report of a rotation
    // moves the wake-up later, and re-arming cost a clearTimeout and a setTimeout):
    // its early tick is harmless, and the core's answer to it arms the next.
    if (this.#timer !== undefined && (none || at >= this.#timerAt)) return
    // No wake-up wanted and no timer armed (most steps of a steady roster).
    if (none && this.#timer === undefined) return
    this.stop()
    if (none) return
    const now = this.now()
    // A wake-up at or before a time already ticked would spin: wait a second instead.
    const delay = this.#lastTickAt !== undefined && at <= this.#lastTickAt ? 1_000 : at - now
    this.#timerAt = at
    this.#timer = this.#scheduler.setTimer(now + Math.min(Math.max(0, delay), MAX_TIMER_MS), () => {
      this.#timer = undefined
      this.#timerAt = undefined
      this.#side.tick()
    })
    // The timer never keeps a process alive on its own (probes, exclusion ends).
    if (typeof this.#timer === 'object') this.#timer.unref?.()
  }

  /** Leaves (close): every waiting request cancelled (one the core no longer knows: the roster's close rejects it CLOSED), the timer stopped. */
  leave() {
    const requests = this.#side.requests
    for (const [id, pending] of [...requests]) if (requests.get(id) === pending) this.#side.feed({ type: 'cancel', id })
    this.stop()
  }

  stop() {
    if (this.#timer !== undefined) this.#scheduler.clearTimer(this.#timer)
    this.#timer = undefined
    this.#timerAt = undefined
  }

  checkOpen() {}
}
