// Replay of a trace through the real core: every recorded input is fed again, and what
// the core says now is compared with what the trace recorded (the same document and
// inputs must give the same outputs on every host). The replay can then be positioned
// anywhere: checkpoints (`Policy#clone`) every few steps make a seek cheap.
//
// Position p means "the first p steps applied": 0 is the fresh policy, `length` the end.
//
// The chart's timeline holds samples of the board (a snapshot each, the dear part of a
// replay): after every step of a trace up to SAMPLES steps long; for a longer one every
// few steps (still more than a chart has pixels) and after every step whose events may
// change an exclusion, a provisioning pause, draining or the slots, so no band is lost.

/** About this many samples on the grid of a long trace (the chart's resolution). */
const SAMPLES = 4000
/** The state file is kept after every this many of the steps that write or read it (a seek back folds fewer). */
const FILE_CHECKPOINT_EVERY = 64
/** Events of the lease flow: they change only busy slots and the queue (sampled on the grid). */
const FLOW_EVENTS = new Set(['granted', 'waiting', 'creatingMachine'])

import { StateFile } from './statefile.js'
import { jsonEqual } from './trace.js'

export class Replay {
  /**
   * @param rota the package's entry (`{ Policy, stateFile }`)
   * @param trace a trace from `parseTrace`
   * @param deferred when true, nothing is fed yet: call `complete()` (the page does, so
   *   that a long trace replays in slices and the page stays responsive)
   */
  constructor(rota, trace, { checkpointEvery, sampleEvery, deferred = false } = {}) {
    const { Policy } = rota
    this.Policy = Policy
    this.stateRule = rota.stateFile
    this.trace = trace
    this.length = trace.steps.length
    // A seek replays at most this many steps; a long trace keeps about 1,000 checkpoints.
    this.checkpointEvery = checkpointEvery ?? Math.max(32, Math.ceil(this.length / 1000))
    this.sampleEvery = sampleEvery ?? Math.max(1, Math.ceil(this.length / SAMPLES))
    /** What the core answered at each step: `{ outputs, wakeAt }` or `{ error }`. */
    this.results = []
    /** Steps whose answer differs from the trace's: `{ step, expected, actual }`. */
    this.mismatches = []
    /** Steps the trace recorded no outputs for. */
    this.unverified = 0
    /** Executor ids in order of first appearance (the chart's lanes). */
    this.executorIds = []
    /** The virtual time at each position. */
    this.times = []
    /**
     * Samples of the board, by position: `{ position, now, queue, lanes: { id: { busy,
     * slots, exclusion, draining, paused } } }`; each holds until the next.
     */
    this.timeline = []
    this.checkpoints = new Map()
    /** Steps that write the state file (a persist) or read it (a restore), in order. */
    this.fileSteps = []
    /** The file folded up to a position (moves forward), and copies of it every few file steps. */
    this.fileCache = null
    this.fileCheckpoints = []
    this.done = false

    this.building = new Policy(trace.document, trace.options)
    this.startNow = trace.steps.find((s) => Number.isSafeInteger(s.input.now))?.input.now ?? this.building.now
    this.times.push(this.clock(this.building))
    this.sample(this.building, 0)
    this.checkpoints.set(0, this.building.clone())
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
      if (step.input.type === 'restore' || result.outputs?.some((o) => o.type === 'persist')) this.fileSteps.push(p)
      this.verify(p, step, result)
      this.times.push(this.clock(policy))
      if ((p + 1) % this.sampleEvery === 0 || p + 1 === this.length || marksLanes(step.input, result)) this.sample(policy, p + 1)
      if ((p + 1) % this.checkpointEvery === 0) this.checkpoints.set(p + 1, policy.clone())
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

  /**
   * Feeds every step in slices, yielding to the event loop between them; stops early
   * (returns false) once `cancelled()` says so.
   */
  async complete(onProgress = () => {}, { sliceMs = 40, cancelled = () => false } = {}) {
    while (!this.done) {
      if (cancelled()) return false
      onProgress(this.feedSome(sliceMs), this.length)
      await new Promise((resolve) => setTimeout(resolve, 0))
    }
    return true
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

  /** Before its first input a policy's clock reads 0: the trace starts at its first input. */
  clock(policy) {
    return Math.max(policy.now, this.startNow)
  }

  sample(policy, position) {
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
    this.timeline.push({ position, now: this.times[position], queue: snap.queue.length, lanes })
  }

  /** The virtual time at position p. */
  nowAt(p) {
    return this.times[Math.max(0, Math.min(p, this.length))]
  }

  /** The first position whose time is at least `t` (`length + 1` when none is). */
  positionAt(t) {
    let lo = 0
    let hi = this.length + 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (this.times[mid] < t) lo = mid + 1
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
        this.policy = this.checkpoints.get(base).clone()
        this.position = base
      }
    }
    while (this.position < p) {
      feed(this.policy, this.trace.steps[this.position].input)
      this.position++
    }
    return this.policy
  }

  /** The state file after the first p steps: the persists so far, folded by the core. */
  stateFileAt(p) {
    let cache = this.fileCache
    if (!cache || cache.position > p) {
      // From the last copy at or before p (the fresh file when there is none).
      let k = this.fileCheckpoints.length - 1
      while (k >= 0 && this.fileSteps[(k + 1) * FILE_CHECKPOINT_EVERY - 1] >= p) k--
      cache = this.fileCache =
        k >= 0
          ? { position: 0, next: (k + 1) * FILE_CHECKPOINT_EVERY, file: this.fileCheckpoints[k].clone() }
          : { position: 0, next: 0, file: new StateFile(this.stateRule) }
    }
    while (cache.next < this.fileSteps.length && this.fileSteps[cache.next] < p) {
      const n = this.fileSteps[cache.next++]
      cache.file.applyStep({ input: this.trace.steps[n].input, outputs: this.results[n].outputs, error: this.results[n].error }, n)
      const k = cache.next / FILE_CHECKPOINT_EVERY - 1
      if (k === this.fileCheckpoints.length) this.fileCheckpoints.push(cache.file.clone())
    }
    cache.position = p
    return cache.file
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

/** Whether a step may change more than busy slots and the queue (so its board is sampled). */
function marksLanes(input, result) {
  if (result.error) return false // a rejected input changes nothing
  if (input.type === 'reload' || input.type === 'restore') return true
  // Exclusions, pauses and draining change with an event of their own (the design says so).
  return result.outputs.some((o) => o.type === 'event' && !FLOW_EVENTS.has(o.name))
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
