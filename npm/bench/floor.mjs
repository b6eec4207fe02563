// What a step of the Node path costs before the policy decides anything, against what
// a lease+release costs, in one run with generic-pool as the yardstick (machines here
// differ by 2–3× from one session to the next; the ratios travel, the µs do not).
// Not a test.
//
//   node bench/floor.mjs [--rounds 21] [--n 64]
//
// - tick: `Policy.handle({ type: 'tick' })` on a quiet roster: the encode, the call into
//   the module, the core's fixed work per input (limits, time, the grant pass, probes,
//   persistence, the wake-up) and an empty answer. Every input pays it once.
// - lease+release at `debug` (what `Policy.handle` answers: the grant, and the granted
//   and released events) and at `warn` (`HANDLE_AT_LEVEL` 2, as a roster nobody listens
//   to asks: no events built, written or read).
// - generic-pool acquire+release with N resources, in the same rounds.
//
// Read with issue 15's raw target (lease+release ≤ 1.0 µs): two ticks plus the two
// events are what the interface costs a cycle before the lease itself. No collection is
// forced between rounds: one before each round slows these small cases several times
// over (generic-pool's 1.2 µs became 4.9), as bench.mjs notes.

import genericPool from 'generic-pool'
import { HANDLE_AT_LEVEL } from '../src/roster/Roster.js'
import { Policy } from '../src/node.js'
import { takeOption } from './options.mjs'

const args = process.argv.slice(2)
/** A whole number option ≥ 1, or a clear exit (a list such as `4,64` is one N too many). */
const count = (name, fallback) => {
  const text = takeOption(args, name, String(fallback))
  const value = Number(text)
  if (!Number.isInteger(value) || value < 1) {
    console.error(`${name} takes one whole number ≥ 1, not ${JSON.stringify(text)}`)
    process.exit(2)
  }
  return value
}
const rounds = count('--rounds', 21)
const n = count('--n', 64)
const BATCH = 20_000
const NOW = Date.UTC(2026, 0, 1)
const document = { executors: Array.from({ length: n }, (_, i) => ({ id: `e${i}`, harness: 'pi', roles: ['coder'], slots: 1 })) }

const cpu = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[sorted.length >> 1]
}

let id = 0
const cycle = (policy, level) => {
  const { outputs } = policy[HANDLE_AT_LEVEL]({ type: 'lease', now: NOW, id: `r${id++}`, role: 'coder' }, level)
  policy[HANDLE_AT_LEVEL]({ type: 'release', now: NOW, lease: outputs[0].lease }, level)
}
const systems = {
  'tick (one input, nothing to do)': { state: new Policy(document, { canProbe: false }), run: (p) => p.handle({ type: 'tick', now: NOW }) },
  'lease+release at debug (handle)': { state: new Policy(document, { canProbe: false }), run: (p) => cycle(p, 0) },
  'lease+release at warn (no events)': { state: new Policy(document, { canProbe: false }), run: (p) => cycle(p, 2) },
}
let k = 0
const pool = genericPool.createPool({ create: async () => ({ id: `e${k++}` }), destroy: async () => {} }, { max: n, min: n })
await pool.ready()

// Each batch in a function of its own (a loop at a module's top level, with `await` in
// it, is not optimised as one in a function is: generic-pool ran 4× slower there).
const batch = ({ state, run }) => {
  for (let i = 0; i < BATCH; i += 1) run(state)
}
const poolBatch = async () => {
  for (let i = 0; i < BATCH; i += 1) await pool.release(await pool.acquire())
}
const times = Object.fromEntries([...Object.keys(systems), 'generic-pool acquire+release'].map((name) => [name, []]))
for (let round = 0; round < rounds; round += 1) {
  for (const [name, system] of Object.entries(systems)) {
    const t0 = cpu()
    batch(system)
    times[name].push((cpu() - t0) / BATCH)
  }
  const t0 = cpu()
  await poolBatch()
  times['generic-pool acquire+release'].push((cpu() - t0) / BATCH)
}
await pool.drain()
await pool.clear()
for (const { state } of Object.values(systems)) state.free()

const m = Object.fromEntries(Object.entries(times).map(([name, t]) => [name, median(t)]))
const yardstick = m['generic-pool acquire+release']
console.log(`floor: ${rounds} interleaved rounds of ${BATCH.toLocaleString('en')} at N=${n}; CPU µs, median (× generic-pool)`)
for (const [name, us] of Object.entries(m)) console.log(`  ${name.padEnd(36)}${us.toFixed(3).padStart(8)}  ×${(us / yardstick).toFixed(2)}`)
const tick = m['tick (one input, nothing to do)']
const events = m['lease+release at debug (handle)'] - m['lease+release at warn (no events)']
console.log(`  two inputs' floor (2 × tick)          ${(2 * tick).toFixed(3).padStart(8)}`)
console.log(`  the two events of a cycle              ${events.toFixed(3).padStart(8)}`)
console.log(`  the lease and release themselves       ${(m['lease+release at warn (no events)'] - 2 * tick).toFixed(3).padStart(8)}`)
