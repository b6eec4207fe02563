// A long trace for the visualizer's load tests and benchmark, written in the format of
// `rota simulate --trace FILE` (the same world, simplified, over the package's Node
// entry; no wasmtime build needed): jobs arrive and hold leases, calls hit rate and
// usage limits, executors go down and are probed, machines are created (some fail), an
// operator pauses one executor mid-run. The same seed writes the same file.
//
//   node visualizer/test/simulate.mjs [--hours 200] [--seed 1] [--out FILE]
//
// 200 hours gives about as many steps as `rota simulate --hours 200` (75,739 there).

import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const MINUTE = 60_000
export const SIM_START_MS = Date.UTC(2026, 0, 1)
// The roster `rota simulate` runs by default (six executors, 13 slots), else the page's example.
const SIM_ROSTER = new URL('../../../host-wasmtime/examples/roster.json', import.meta.url)
export const ROSTER = JSON.parse(readFileSync(existsSync(SIM_ROSTER) ? SIM_ROSTER : new URL('../example-roster.json', import.meta.url), 'utf8'))

/** splitmix64, as the wasmtime host's simulator draws. */
class Rng {
  constructor(seed) {
    this.state = BigInt.asUintN(64, BigInt(seed))
  }
  next() {
    this.state = BigInt.asUintN(64, this.state + 0x9e3779b97f4a7c15n)
    let z = this.state
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n)
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn)
    return z ^ (z >> 31n)
  }
  unit() {
    return Number(this.next() >> 11n) / 2 ** 53
  }
  chance(p) {
    return this.unit() < p
  }
  between(lo, hi) {
    return lo + Number(this.next() % BigInt(hi - lo + 1))
  }
  exp(mean) {
    return Math.round(-Math.log(1 - this.unit()) * mean)
  }
}

/**
 * Runs the world for `hours` on `Policy` and writes the trace to `out`.
 * Returns `{ steps, bytes }`.
 */
export function writeSimulatedTrace(Policy, { hours = 200, seed = 1, out, document = ROSTER } = {}) {
  const rng = new Rng(seed)
  const policy = new Policy(document, null)
  const start = SIM_START_MS
  const end = start + Math.round(hours * 3_600_000)
  const executors = document.executors.map((e) => ({ id: e.id, slots: e.slots ?? e.maxConcurrentAttempts ?? 1, downUntil: 0 }))
  const slots = executors.reduce((n, e) => n + e.slots, 0)
  const meanJob = 4 * MINUTE
  const meanGap = meanJob / (slots * 0.8)
  const roles = [...new Set(document.executors.flatMap((e) => e.roles))].map((r) => [r, r === 'coder' ? 4 : r === 'reviewer' ? 2 : 1])
  const totalWeight = roles.reduce((n, [, w]) => n + w, 0)

  // The agenda: [when, seq, happening], earliest first (seq keeps equal times in order).
  const agenda = []
  let seq = 0
  const at = (when, what) => {
    const item = [when, seq++, what]
    let lo = 0
    let hi = agenda.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      const [w, s] = agenda[mid]
      if (w < when || (w === when && s < item[1])) lo = mid + 1
      else hi = mid
    }
    agenda.splice(lo, 0, item)
  }
  let tickAt = null
  let nextJob = 0
  let nextMachine = 0
  const waiting = new Set()
  const up = (id, now) => now >= (executors.find((e) => e.id === id)?.downUntil ?? 0)

  const inputFor = (now, what) => {
    switch (what.type) {
      case 'arrival': {
        const gap = Math.max(1, rng.exp(meanGap))
        if (now + gap < end) at(now + gap, { type: 'arrival' })
        nextJob++
        let draw = rng.between(0, totalWeight - 1)
        const role = roles.find(([, w]) => (draw -= w) < 0)[0]
        const input = { type: 'lease', now, id: `j${nextJob}`, role }
        if (rng.chance(0.3)) input.rank = rng.between(0, 5)
        if (rng.chance(0.15)) input.deadline = now + rng.between(5, 30) * MINUTE
        if (rng.chance(0.1)) input.avoid = [executors[rng.between(0, executors.length - 1)].id]
        input.label = `job ${nextJob}`
        waiting.add(input.id)
        return input
      }
      case 'jobEnd': {
        let failure = null
        if (!up(what.executor, now)) failure = { kind: 'outage', message: 'connection refused' }
        else if (rng.chance(0.004)) failure = { kind: 'usageLimit', message: 'usage limit reached', resetAt: now + rng.between(10, 60) * MINUTE }
        else if (rng.chance(0.03)) {
          failure = { kind: 'rateLimit', message: 'HTTP 429' }
          if (rng.chance(0.5)) failure.retryAfterMs = rng.between(30, 300) * 1000
        }
        if (!failure) return { type: 'release', now, lease: what.lease }
        at(now, { type: 'release', lease: what.lease })
        return { type: 'report', now, executor: what.executor, failure }
      }
      case 'release':
        return { type: 'release', now, lease: what.lease }
      case 'probeAnswer':
        return { type: 'probeResult', now, executor: what.executor, up: up(what.executor, now) }
      case 'machineAnswer':
        if (rng.chance(0.1)) return { type: 'machineFailed', now, id: what.request, message: 'quota exceeded in zone' }
        return { type: 'machineCreated', now, id: what.request, hold: { machine: `m${++nextMachine}`, executor: what.executor } }
      case 'preflight':
        return { type: 'preflightResult', now, executor: what.executor, ok: true }
      case 'outage': {
        const length = rng.between(2 * MINUTE, 15 * MINUTE)
        const next = now + length + rng.exp(180 * MINUTE)
        if (next < end) at(next, what)
        executors.find((e) => e.id === what.executor).downUntil = now + length
        return null
      }
      case 'tick':
        if (tickAt === now) tickAt = null
        return { type: 'tick', now }
      case 'pause':
        return { type: 'exclude', now, executor: what.executor, kind: 'manual', reason: 'operator: maintenance window', until: now + 30 * MINUTE }
      case 'resume':
        return { type: 'resume', now, executor: what.executor }
      case 'end':
        for (const id of waiting) at(now, { type: 'cancel', id })
        return null
      case 'cancel':
        return waiting.has(what.id) ? { type: 'cancel', now, id: what.id } : null
    }
    return null
  }

  const absorb = (now, result) => {
    for (const o of result.outputs) {
      if (o.type === 'granted') {
        waiting.delete(o.request)
        const length = Math.min(45 * MINUTE, Math.max(20_000, rng.exp(meanJob)))
        at(now + length, { type: 'jobEnd', lease: o.lease, executor: o.executor })
      } else if (o.type === 'exhausted' || o.type === 'timedOut' || o.type === 'cancelled') waiting.delete(o.request)
      else if (o.type === 'probe') at(now + 150, { type: 'probeAnswer', executor: o.executor })
      else if (o.type === 'createMachine') at(now + rng.between(20, 40) * 1000, { type: 'machineAnswer', request: o.request, executor: o.executor })
      else if (o.type === 'preflight') at(now + 1000, { type: 'preflight', executor: o.executor })
    }
    const wake = result.wakeAt
    if (wake != null && (tickAt === null || wake < tickAt) && wake < end) {
      tickAt = wake
      at(Math.max(wake, now), { type: 'tick' })
    }
  }

  at(start, { type: 'arrival' })
  at(end, { type: 'end' })
  for (const e of executors) {
    const first = start + rng.exp(180 * MINUTE)
    if (first < end) at(first, { type: 'outage', executor: e.id })
  }
  at(start + (end - start) / 2, { type: 'pause', executor: executors[0].id })
  at(start + (end - start) / 2 + 20 * MINUTE, { type: 'resume', executor: executors[0].id })

  const fd = openSync(out, 'w')
  let bytes = 0
  let buffer = ''
  const write = (text) => {
    buffer += text
    if (buffer.length > 1 << 20) flush()
  }
  const flush = () => {
    bytes += writeSync(fd, buffer)
    buffer = ''
  }
  write(`{"format":"rota-trace","version":1,"recorder":"visualizer/test/simulate.mjs","document":${JSON.stringify(document)},"options":null,"steps":[`)
  let steps = 0
  while (agenda.length) {
    const [when, , what] = agenda.shift()
    if (when > end && what.type !== 'jobEnd' && what.type !== 'release') continue
    const input = inputFor(when, what)
    if (!input) continue
    let record
    try {
      const result = policy.handle(input)
      const wakeAt = result.wakeAt ?? null
      record = { input, outputs: result.outputs, wakeAt }
      absorb(when, { outputs: result.outputs, wakeAt })
    } catch (error) {
      record = { input, error: { code: error.code ?? 'ERROR', message: error.message } }
    }
    write(`${steps === 0 ? '\n' : ',\n'}${JSON.stringify(record)}`)
    steps++
  }
  write('\n]}\n')
  flush()
  closeSync(fd)
  return { steps, bytes }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (name, fallback) => {
    const i = process.argv.indexOf(`--${name}`)
    return i > 0 ? process.argv[i + 1] : fallback
  }
  const { Policy } = await import('../../src/node.js')
  const out = arg('out', 'trace.json')
  const t = performance.now()
  const { steps, bytes } = writeSimulatedTrace(Policy, { hours: Number(arg('hours', 200)), seed: Number(arg('seed', 1)), out })
  console.log(`${out}: ${steps} steps, ${(bytes / 1e6).toFixed(1)} MB in ${((performance.now() - t) / 1000).toFixed(1)} s`)
}
