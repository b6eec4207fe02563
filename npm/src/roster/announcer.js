// Events and metrics: every event the core decides (`event` outputs, with the log's
// time, and on a shared log the entry's `seq`) and the roster's own (with the clock's
// time, and on a shared log this `instance`), to the `event` listeners; every raw
// output to the `output` listeners; the counts of metrics.js. Nothing is built for a
// listener nobody added.

import { Metrics } from '../metrics.js'

export class Announcer {
  #emitter
  /** Whether a listener was ever added (`on`, `once`, `onEvent`); `off` leaves it set. */
  listened = false
  metrics
  #time
  #instance

  /** `time()`: the roster's clock; `instance()`: this instance's id on a shared log (else undefined). */
  constructor(emitter, { meter, onEvent, queueByRole, state, time, instance }) {
    this.#emitter = emitter
    this.#time = time
    this.#instance = instance
    this.metrics = new Metrics(meter, queueByRole, state)
    if (typeof onEvent === 'function') this.listen('on', 'event', onEvent)
  }

  /** `on`, `off` or `once` of the emitter; a listener added sets `listened`. */
  listen(method, name, listener) {
    if (method !== 'off') this.listened = true
    this.#emitter[method](name, listener)
  }

  /** Whether anyone listens for `name` ('event' or 'output'). */
  heard(name) {
    return this.listened && this.#emitter.listenerCount(name) > 0
  }

  /** A raw output (with its entry's `seq` on a shared log). */
  output(output, seq) {
    if (this.heard('output')) this.#emitter.emit('output', seq === undefined ? output : { ...output, seq })
  }

  /** An `event` output, folded at `time`. */
  core(output, time, seq) {
    if (output.name === 'excluded') this.metrics.excluded(output.fields?.kind)
    if (!this.heard('event')) return
    const event = { level: output.level, name: output.name, message: output.message, fields: output.fields, time }
    if (seq !== undefined) event.seq = seq
    this.#emitter.emit('event', event)
  }

  /** The roster's own event. */
  emit(level, name, message, fields = {}) {
    const event = { level, name, message, fields, time: this.#time() }
    const instance = this.#instance()
    if (instance !== undefined) event.instance = instance
    this.#emitter.emit('event', event)
  }

  /**
   * A resolved document's warnings: `executors` named ids the roster does not have
   * (ignored, as the seed does) and, from `check()` (the core's), each literal secret
   * in an executor's `env` (naming its place, never the value) and each misspelt field
   * ("did you mean"), under the event name the core gives it. The document still runs.
   */
  warnings({ unknown, warnings }, check) {
    for (const warning of warnings ?? []) this.emit('warn', 'narrowIgnored', `roster: ${warning.message}`, { executors: unknown ?? [] })
    // (Only with a listener: the document crosses from the module in full.)
    if (!this.heard('event')) return
    let found
    try {
      found = check()
    } catch {
      return
    }
    for (const warning of found ?? []) this.emit('warn', warning.event ?? 'literalSecret', `roster: ${warning.message}`, { path: warning.path })
  }
}
