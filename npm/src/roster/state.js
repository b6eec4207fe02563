// The state file (a roster over a log in memory): the core's `persist` outputs written
// through a store ({ load, save, discard? }), one write at a time, coalesced, retried
// with back-off until the store holds every pending entry; and the restore at start.

/** Coalesces persist updates: applying the result equals applying each in turn. */
export function combineUpdates(updates) {
  let ids = []
  let exclusions = []
  for (const update of updates) {
    const replaced = new Set(update.ids)
    exclusions = exclusions.filter((e) => !replaced.has(e.id)).concat(update.state.exclusions)
    ids = [...new Set([...ids, ...update.ids])]
  }
  return { ids, state: { version: 1, exclusions } }
}

export class StateWriter {
  #store
  #retry
  #context
  #queue = []
  #saving
  /** Failed write attempts in a row, and the timer of the next one. */
  #failures = 0
  #retryTimer
  /** The last write's error (`settled()` rejects with it). */
  #lastError

  /** `context`: { now(), scheduler(), event(level, name, message, fields), track(promise), closing(), closed(), written() }. */
  constructor(store, retry, context) {
    this.#store = store
    this.#retry = retry
    this.#context = context
  }

  #pathField() {
    return this.#store.path === undefined ? {} : { path: this.#store.path }
  }

  persist(update) {
    this.#queue.push(update)
    // After a failure the retry timer writes it, with what else came meanwhile.
    if (this.#saving === undefined && this.#retryTimer === undefined) this.#saving = this.#context.track(this.#drain())
  }

  /**
   * Writes what is queued, one write at a time; updates that arrive meanwhile are
   * written together next. A failed write keeps its updates and is tried again after
   * a back-off (stateRetry: 500 ms doubling to 30 s), merged again with what came
   * since, until the store holds every pending entry.
   */
  async #drain() {
    const context = this.#context
    while (this.#queue.length > 0) {
      const update = combineUpdates(this.#queue.splice(0))
      try {
        await this.#store.save(update, { now: context.now(), event: this.#context.event })
        context.written()
        if (this.#failures > 0) {
          this.#context.event('info', 'stateFileRecovered', `the roster state is written again after ${this.#failures} failed attempts`, {
            ...this.#pathField(),
            attempts: this.#failures,
          })
          this.#failures = 0
        }
      } catch (error) {
        this.#queue.unshift(update)
        this.#lastError = error
        this.#failures += 1
        const { firstMs = 500, maxMs = 30_000 } = this.#retry ?? {}
        const retryInMs = Math.min(firstMs * 2 ** Math.min(this.#failures - 1, 20), maxMs)
        const closing = context.closing()
        const again = closing ? 'the roster is closing, not retrying' : `retrying in ${retryInMs} ms`
        this.#context.event(
          'warn',
          error?.code === 'STATE_FILE_UNREADABLE' ? 'stateFileUnreadable' : 'stateFileWriteFailed',
          `could not save the roster state (${error?.message ?? error}): ${update.ids.length} changed executors kept; ${again}`,
          { ...this.#pathField(), error: String(error?.message ?? error), retryInMs: closing ? 0 : retryInMs },
        )
        if (!closing) {
          // Kept referenced: unwritten changes keep the process alive until they land
          // (or `close()` gives up after one more try).
          this.#retryTimer = context.scheduler().setTimer(context.now() + retryInMs, () => {
            this.#retryTimer = undefined
            if (this.#saving === undefined && !context.closed()) this.#saving = context.track(this.#drain())
          })
        }
        break
      }
    }
    this.#saving = undefined
  }

  /** Stops retrying (close); `flush()` then tries once more. */
  stopRetry() {
    if (this.#retryTimer !== undefined) this.#context.scheduler().clearTimer(this.#retryTimer)
    this.#retryTimer = undefined
  }

  async flush() {
    if (this.#queue.length > 0) await this.#context.track(this.#drain())
  }

  /**
   * Resolves once every update persisted so far is in the store: waits for the write
   * in flight, and writes at once what a failed write left (instead of at its retry).
   * Rejects with the store's error when that write fails (it is retried as before).
   */
  async settled() {
    while (this.#saving !== undefined) await this.#saving
    if (this.#queue.length === 0) return
    this.stopRetry()
    await (this.#saving = this.#context.track(this.#drain()))
    if (this.#queue.length > 0) throw this.#lastError
  }

  /** Loads the state and feeds it to `step` as `restore`; what cannot be read or restored is said, never written over. */
  async restore(step) {
    const context = this.#context
    let state
    try {
      state = await this.#store.load({ now: context.now(), event: this.#context.event })
    } catch (error) {
      // Never written over: saves read it again (and retry) until it can be read.
      // (Another failure, a lock held too long say, is named as a failed write is.)
      const name = error?.code === 'STATE_FILE_UNREADABLE' || error?.code === undefined ? 'stateFileUnreadable' : 'stateFileWriteFailed'
      this.#context.event('warn', name, `could not read the roster state; starting without it: ${error?.message ?? error}`, {
        ...this.#pathField(),
        error: String(error?.message ?? error),
      })
      return
    }
    if (state === undefined || state === null) return
    try {
      step({ type: 'restore', now: context.now(), state })
    } catch (error) {
      const message = `the roster state is not one rota reads (${error.message})`
      if (typeof this.#store.discard === 'function') {
        await this.#store.discard(message, { now: context.now(), event: this.#context.event })
      } else {
        this.#context.event('warn', 'stateFileCorrupt', `${message}; starting clean`, { error: error.message })
      }
    }
  }
}
