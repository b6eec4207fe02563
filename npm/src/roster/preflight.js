// Preflights (a roster over a log in memory whose caller gives `preflight`): the core
// asks for one per executor at start and per added or grown executor on a reload
// (`preflight` outputs); the roster runs the caller's function and feeds back
// `preflightResult`. At start the roster serves once every preflight has passed; a
// failure (`startFailed`) closes it and rejects PREFLIGHT_FAILED.

import { RotaError } from '../errors.js'
import { omitUndefined } from './requests.js'

export class Preflights {
  #preflight
  #context
  /** The preflights running, and the start's failure (a `startFailed` output). */
  #runs = new Set()
  #failed
  /** The document of a reload that waits for its preflights. */
  pendingDocument

  /** `context`: { spec(id), feed(input), signal, track(promise) }. */
  constructor(preflight, context) {
    this.#preflight = preflight
    this.#context = context
  }

  /** Waits for the start's preflights (the first tick asked for them); throws PREFLIGHT_FAILED once one failed. */
  async started() {
    while (this.#failed === undefined && this.#runs.size > 0) await Promise.race(this.#runs)
    if (this.#failed !== undefined) throw this.#failed
  }

  /** A `preflight` output: run it, feed its result. */
  run({ executor }) {
    const context = this.#context
    const preflight = this.#preflight
    const run = (async () => {
      let ok = true
      let error
      try {
        if (typeof preflight === 'function') {
          const pending = this.pendingDocument === undefined ? undefined : context.entriesOf(this.pendingDocument).find(([id]) => id === executor)
          const spec = pending?.[1] ?? context.spec(executor)
          const result = await preflight({ executor, spec, signal: context.signal })
          if (result === false) {
            ok = false
            error = 'the preflight answered false'
          }
        }
      } catch (cause) {
        ok = false
        error = String(cause?.message ?? cause)
      }
      context.feed(omitUndefined({ type: 'preflightResult', executor, ok, error }))
    })()
    this.#runs.add(run)
    run.then(() => this.#runs.delete(run))
    context.track(run)
  }

  /** A `startFailed` output. */
  failed({ executor, error }) {
    this.#failed = new RotaError('PREFLIGHT_FAILED', `the roster does not start: the preflight of ${executor} failed (${error})`, {
      executor,
      error,
    })
  }
}
