// Health probes: the core asks (`probe` output), the instance that acts on it (the
// leader: with a log in memory, always this one) runs the probe and feeds back
// `probeResult`. One probe per executor at a time; each ends at `probeTimeoutMs` (or
// close), even when the probe function ignores its signal.

import { timeoutSignal } from './scheduler.js'

export const DEFAULT_PROBE_TIMEOUT_MS = 5_000

/**
 * The core's probe rule (`probeIsUp`): 2xx is up; a redirect is not followed and is down
 * (in a browser, `manual` gives an opaque redirect with status 0: down too).
 */
export const defaultProbe = (api) => async (url, { signal }) => {
  const response = await fetch(url, { signal, redirect: 'manual' })
  try {
    await response.body?.cancel()
  } catch {
    // the status is all a health check needs
  }
  return Number.isInteger(response.status) && api.probeIsUp(response.status)
}

/** A promise that rejects with the reason of the first of `signals` to abort; `cancel()` detaches it. */
function untilAborted(signals) {
  let cancel = () => {}
  const promise = new Promise((_resolve, reject) => {
    const onAbort = (event) => {
      cancel()
      const reason = event.target.reason
      reject(reason?.name === 'TimeoutError' ? new Error('timed out', { cause: reason }) : reason)
    }
    for (const signal of signals) signal.addEventListener('abort', onAbort)
    cancel = () => {
      for (const signal of signals) signal.removeEventListener('abort', onAbort)
    }
    for (const signal of signals) if (signal.aborted) onAbort({ target: signal })
  })
  // A race that the probe won leaves this one unobserved: never an unhandled rejection.
  promise.catch(() => {})
  return { promise, cancel }
}

export class Probes {
  #probing = new Set()
  #probe
  #timeoutMs
  #context

  /** `context`: { signal (close), scheduler(), event(level, name, message, fields), track(promise), probed() }. */
  constructor(probe, timeoutMs, context) {
    this.#probe = probe
    this.#timeoutMs = timeoutMs
    this.#context = context
  }

  /** Runs the probe of `executor` unless one runs; `answer(up)` once it ends. */
  run(executor, url, answer) {
    if (this.#probing.has(executor)) return
    this.#context.probed()
    const probe = this.#probe
    if (probe === undefined) {
      queueMicrotask(() => answer(false))
      return
    }
    this.#probing.add(executor)
    const timeoutMs = this.#timeoutMs
    const { signal: timeout, clear } = timeoutSignal(this.#context.scheduler(), timeoutMs)
    const close = this.#context.signal
    const signal = typeof AbortSignal.any === 'function' ? AbortSignal.any([timeout, close]) : timeout
    const ended = untilAborted([timeout, close])
    const run = (async () => {
      let up = false
      try {
        up = (await Promise.race([probe(url, { signal, executor, timeoutMs }), ended.promise])) === true
      } catch (error) {
        this.#context.event('debug', 'probeFailed', `health probe of ${executor} at ${url} failed: ${error?.message ?? error}`, {
          executor,
          url,
        })
      }
      ended.cancel()
      clear()
      this.#probing.delete(executor)
      answer(up)
    })()
    this.#context.track(run)
  }
}
