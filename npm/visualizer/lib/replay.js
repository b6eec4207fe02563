// Replay of a trace through the real core: every recorded input is fed again, and what
// the core says now is compared with what the trace recorded (the same document and
// inputs must give the same outputs on every host). The replay can then be positioned
// anywhere: checkpoints (`exportState`) every few steps make a seek cheap.
//
// Position p means "the first p steps applied": 0 is the fresh policy, `length` the end.

import { jsonEqual } from './trace.js'

export class Replay {
  /**
   * @param Policy the wasm-bindgen policy class
   * @param trace a trace from `parseTrace`
   * @param deferred when true, nothing is fed yet: call `complete()` (the page does, so
   *   that a long trace replays in slices and the page stays responsive)
   */
  constructor(Policy, trace, { checkpointEvery = 32, deferred = false } = {}) {
    this.Policy = Policy
    this.trace = trace
    this.checkpointEvery = checkpointEvery
    this.length = trace.steps.length
    /** What the core answered at each step: `{ outputs, wakeAt }` or `{ error }`. */
    this.results = []
    /** Steps whose answer differs from the trace's: `{ step, expected, actual }`. */
    this.mismatches = []
    /** Steps the trace recorded no outputs for. */
    this.unverified = 0
    /** Executor ids in order of first appearance (the chart's lanes). */
    this.executorIds = []
    /** Per position: `{ now, queue, lanes: { id: { busy, slots, exclusion, draining, paused } } }`. */
    this.timeline = []
    this.checkpoints = new Map()
    this.done = false

    this.building = new Policy(trace.document, trace.options)
    this.startNow = trace.steps.find((s) => Number.isSafeInteger(s.input.now))?.input.now ?? this.building.now
    this.sample(this.building)
    this.checkpoints.set(0, this.building.exportState())
    if (!deferred) this.feedSome(Infinity)
  }

  /** Feeds recorded steps for up to `budgetMs`; returns how many are done. */
  feedSome(budgetMs) {
    const until = performance.now() + budgetMs
    const policy = this.building
    while (this.results.length < this.length) {
      const p = this.results.length
      const step = this.trace.steps[p]
      const result = feed(policy, step.input)
      this.results.push(result)
      this.verify(p, step, result)
      this.sample(policy)
      if ((p + 1) % this.checkpointEvery === 0) this.checkpoints.set(p + 1, policy.exportState())
      if ((p & 15) === 15 && performance.now() > until) break
    }
    if (this.results.length === this.length && !this.done) {
      this.finalSnapshot = policy.snapshot()
      this.policy = policy
      this.position = this.length
      this.building = null
      this.done = true
    }
    return this.results.length
  }

  /** Feeds every step in slices, yielding to the event loop between them. */
  async complete(onProgress = () => {}, { sliceMs = 40 } = {}) {
    while (!this.done) {
      onProgress(this.feedSome(sliceMs), this.length)
      await new Promise((resolve) => setTimeout(resolve, 0))
    }
    return this
  }

  verify(p, step, result) {
    if (step.outputs === undefined && step.error === undefined) {
      this.unverified++
      return
    }
    const expected = step.error ? { error: step.error.code } : { outputs: step.outputs }
    const actual = result.error ? { error: result.error.code } : { outputs: result.outputs }
    let same = jsonEqual(expected, actual)
    if (same && step.wakeAt !== undefined && !result.error) same = (step.wakeAt ?? null) === (result.wakeAt ?? null)
    if (!same) this.mismatches.push({ step: p, expected: { ...expected, wakeAt: step.wakeAt }, actual: { ...actual, wakeAt: result.wakeAt } })
  }

  sample(policy) {
    const snap = policy.snapshot()
    const lanes = {}
    for (const e of snap.executors) {
      if (!this.executorIds.includes(e.id)) this.executorIds.push(e.id)
      lanes[e.id] = {
        busy: e.busy,
        slots: e.slots,
        exclusion: e.exclusion ? e.exclusion.kind : null,
        draining: e.draining,
        paused: Boolean(e.pause?.blocked),
      }
    }
    // Before its first input a policy's clock reads 0: the trace starts at its first input.
    this.timeline.push({ now: Math.max(snap.now, this.startNow), queue: snap.queue.length, lanes })
  }

  /** The virtual time at position p. */
  nowAt(p) {
    return this.timeline[Math.max(0, Math.min(p, this.length))].now
  }

  /** The first position whose time is at least `t` (`length + 1` when none is). */
  positionAt(t) {
    let lo = 0
    let hi = this.length + 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (this.timeline[mid].now < t) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** Moves to position p (0..length) and returns the policy there. */
  seek(p) {
    p = Math.max(0, Math.min(this.length, Math.trunc(p)))
    if (p < this.position || p - this.position > this.checkpointEvery) {
      let base = p - (p % this.checkpointEvery)
      while (!this.checkpoints.has(base)) base -= this.checkpointEvery
      if (base > this.position || p < this.position) {
        this.policy = this.Policy.importState(this.checkpoints.get(base))
        this.position = base
      }
    }
    while (this.position < p) {
      feed(this.policy, this.trace.steps[this.position].input)
      this.position++
    }
    return this.policy
  }

  /** Log entries (`{ step, now, kind, ... }`, as a session's) of the first p steps. */
  logUpTo(p, limit = Infinity) {
    const out = []
    for (let n = Math.min(p, this.length) - 1; n >= 0 && out.length < limit; n--) {
      const input = this.trace.steps[n].input
      const result = this.results[n]
      const entries = [{ step: n, now: input.now, kind: 'input', input }]
      if (result.error) entries.push({ step: n, now: input.now, kind: 'error', error: result.error })
      for (const output of result.outputs ?? []) entries.push({ step: n, now: input.now, kind: 'output', output })
      out.unshift(...entries)
    }
    return out
  }

  /** The trace's steps up to position p (to continue by hand from there). */
  stepsUpTo(p) {
    return this.trace.steps.slice(0, p).map((step, n) => {
      const result = this.results[n]
      return result.error ? { input: step.input, error: result.error } : { input: step.input, outputs: result.outputs, wakeAt: result.wakeAt }
    })
  }
}

/** One input into the policy: `{ outputs, wakeAt }` or `{ error: { code, message } }`. */
function feed(policy, input) {
  try {
    const result = policy.handle(input)
    return { outputs: result.outputs, wakeAt: result.wakeAt ?? null }
  } catch (error) {
    return { error: { code: error.code ?? 'ERROR', message: error.message } }
  }
}
