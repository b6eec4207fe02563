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
  /** The start's preflights still awaited, while the roster starts: { awaiting, failed?, resolve?, reject? }. */
  #starting
  /** The document of a reload that waits for its preflights. */
  pendingDocument

  /** `context`: { spec(id), feed(input), signal, track(promise) }. */
  constructor(preflight, context) {
    this.#preflight = preflight
    this.#context = context
  }

  /** The roster starts with preflights: they are collected from the first answer. */
  starting() {
    this.#starting = { awaiting: new Set() }
  }

  /** Waits for the start's preflights (after the first tick was fed); throws PREFLIGHT_FAILED. */
  async started() {
    const starting = this.#starting
    if (starting === undefined) return
    const done = new Promise((resolve, reject) => Object.assign(starting, { resolve, reject }))
    if (starting.failed === undefined && starting.awaiting.size === 0) {
      this.#starting = undefined
      return
    }
    try {
      if (starting.failed !== undefined) throw starting.failed
      await done
    } finally {
      this.#starting = undefined
    }
  }

  /** A `preflight` output: run it, feed its result. */
  run({ executor }) {
    this.#starting?.awaiting.add(executor)
    const context = this.#context
    const preflight = this.#preflight
    const run = (async () => {
      let ok = true
      let error
      try {
        if (typeof preflight === 'function') {
          const spec = this.pendingDocument?.executors?.find((e) => e.id === executor) ?? context.spec(executor)
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
      this.#answered(executor)
    })()
    context.track(run)
  }

  #answered(executor) {
    const starting = this.#starting
    if (starting === undefined || starting.failed !== undefined) return
    starting.awaiting.delete(executor)
    if (starting.awaiting.size === 0) {
      this.#starting = undefined
      starting.resolve?.()
    }
  }

  /** A `startFailed` output. */
  failed({ executor, error }) {
    const starting = this.#starting
    if (starting === undefined) return
    starting.failed = new RotaError('PREFLIGHT_FAILED', `the roster does not start: the preflight of ${executor} failed (${error})`, {
      executor,
      error,
    })
    starting.reject?.(starting.failed)
  }
}
