// A live session: one policy (the real core, in wasm) driven by hand, on virtual time.
// Every action is one input to the core; every input and what it caused is recorded in
// the trace format of `trace.js`, so a session can be saved and replayed.
//
// The module takes the package's entry as an argument (its `Policy` class and the
// core's state-file rule, `stateFile`): the page passes the browser entry, Node tests
// the Node entry.

import { StateFile } from './statefile.js'

/** Virtual time starts here: 2026-01-01T00:00:00.000Z. */
export const EPOCH = Date.UTC(2026, 0, 1)

/** The failure kinds a report may carry, with a message a host would see. */
export const FAILURE_KINDS = {
  usageLimit: 'Claude usage limit reached. Your limit will reset later.',
  rateLimit: '429 Too Many Requests: rate limit exceeded',
  authentication: '401 Unauthorized: invalid API key',
  outage: 'connect ECONNREFUSED 127.0.0.1:1234',
  modelUnavailable: "There's an issue with the selected model. It may not exist or you may not have access to it.",
  other: 'the tests failed',
}

export class Session {
  /**
   * @param rota the package's entry (`{ Policy, stateFile }`)
   * @param document the roster document (throws INVALID_DOCUMENT)
   * @param options policy options or null
   * @param from `{ policy, steps, now }` to continue a replay from its position
   */
  constructor(rota, document, options = null, from = null) {
    const { Policy } = rota
    this.Policy = Policy
    this.options = options ?? null
    this.policy = from?.policy ?? new Policy(document, this.options)
    this.startDocument = from?.startDocument ?? document
    this.now = Math.max(from?.now ?? EPOCH, this.policy.now || 0)
    /** The trace: `{ input, outputs, wakeAt }` or `{ input, error }`. */
    this.steps = from?.steps ? [...from.steps] : []
    /** The log: `{ step, now, kind: 'input'|'output'|'error', ... }`, oldest first. */
    this.log = []
    /** The state file a host would hold: every persist so far, folded by the core. */
    this.stateFile = new StateFile(rota.stateFile)
    for (const [n, step] of this.steps.entries()) {
      this.logStep(n, step)
      this.stateFile.applyStep(step, n)
    }
    this.nextRequest = 1 + this.steps.filter((s) => s.input.type === 'lease' || s.input.type === 'tryLease').length
    this.nextMachine = 1
  }

  /** Feeds one input (without `now`: the session's virtual time is added). */
  feed(input) {
    const full = { ...input, now: this.now }
    const n = this.steps.length
    let step
    try {
      const result = this.policy.handle(full)
      step = { input: full, outputs: result.outputs, wakeAt: result.wakeAt ?? null }
    } catch (error) {
      // As every host records a rejected input (the core's error JSON).
      step = { input: full, error: { code: error.code ?? 'ERROR', message: error.message } }
      if (error.violations) step.error.violations = error.violations
    }
    this.steps.push(step)
    this.logStep(n, step)
    this.stateFile.applyStep(step, n)
    if (step.error) {
      const error = new Error(step.error.message)
      error.code = step.error.code
      throw error
    }
    return step
  }

  logStep(n, step) {
    const now = step.input.now
    this.log.push({ step: n, now, kind: 'input', input: step.input })
    if (step.error) this.log.push({ step: n, now, kind: 'error', error: step.error })
    for (const output of step.outputs ?? []) this.log.push({ step: n, now, kind: 'output', output })
  }

  get wakeAt() {
    return this.policy.wakeAt ?? null
  }

  /** Time passes by `ms` and the core hears of it. */
  advance(ms) {
    this.now += ms
    return this.feed({ type: 'tick' })
  }

  /** Time jumps to the core's next wake-up (nothing when it wants none). */
  toWake() {
    const at = this.wakeAt
    if (at == null) return null
    this.now = Math.max(this.now, at)
    return this.feed({ type: 'tick' })
  }

  /** A lease request; returns the step. `deadlineMs` is relative to now. */
  lease({ role, avoid = [], prefer, pin, rank, label, deadlineMs, tryLease = false, id } = {}) {
    const input = { type: tryLease ? 'tryLease' : 'lease', id: id ?? `r${this.nextRequest}`, role }
    if (!id) this.nextRequest++
    if (avoid.length) input.avoid = avoid
    if (prefer) input.prefer = prefer
    if (pin) input.pin = pin
    if (rank !== undefined && rank !== null && rank !== '') input.rank = Number(rank)
    if (label) input.label = label
    if (deadlineMs) input.deadline = this.now + Number(deadlineMs)
    return this.feed(input)
  }

  release(lease) {
    return this.feed({ type: 'release', lease: Number(lease) })
  }

  cancel(id) {
    return this.feed({ type: 'cancel', id })
  }

  report(executor, kind, { message, retryAfterMs, resetAt } = {}) {
    const failure = { kind, message: message ?? FAILURE_KINDS[kind] ?? '' }
    if (retryAfterMs) failure.retryAfterMs = Number(retryAfterMs)
    if (resetAt) failure.resetAt = Number(resetAt)
    return this.feed({ type: 'report', executor, failure })
  }

  exclude(executor, { reason = 'paused by the operator', untilMs, kind = 'manual' } = {}) {
    const input = { type: 'exclude', executor, kind, reason }
    if (untilMs) input.until = this.now + Number(untilMs)
    return this.feed(input)
  }

  resume(executor) {
    return this.feed({ type: 'resume', executor })
  }

  probeResult(executor, up) {
    return this.feed({ type: 'probeResult', executor, up: Boolean(up) })
  }

  machineCreated(id) {
    return this.feed({ type: 'machineCreated', id, hold: { machine: `m-${this.nextMachine++}` } })
  }

  machineFailed(id, message = 'quota exceeded: no capacity in the region') {
    return this.feed({ type: 'machineFailed', id, message })
  }

  preflightResult(executor, ok, error) {
    const input = { type: 'preflightResult', executor, ok: Boolean(ok) }
    if (!ok) input.error = error || 'preflight failed'
    return this.feed(input)
  }

  reload(document) {
    return this.feed({ type: 'reload', document })
  }

  plan(document) {
    return this.policy.plan(document)
  }

  explain(request) {
    return this.policy.explain(request)
  }

  snapshot() {
    return this.policy.snapshot()
  }

  /** The session so far as a trace (the format `trace.js` reads). */
  trace() {
    return {
      format: 'rota-trace',
      version: 1,
      recorder: 'rota visualizer',
      document: this.startDocument,
      options: this.options,
      steps: this.steps,
    }
  }
}
