// Benchmark (not a test): rota's Node path against the pools Node users pick
// (generic-pool, p-limit, p-queue: devDependencies), at 4, 64, 1,024 and 10,000
// executors, the systems interleaved round by round in one process so that a busy
// moment of a shared machine falls on all of them alike. The targets it can check
// alone are checked at the end (the others are ratios to a reference build:
// ab.mjs); README.md next to this file keeps the figures.
//
//   node --expose-gc bench/bench.mjs [--quick] [--only a,b,c,create,memory,size] [--n 4,64]
//   (npm run bench; --expose-gc lets each round's garbage be collected between rounds)
//
//   a       one lease + release at a time: Roster (lease()), raw Policy.handle
//           (objects in and out, the default options), generic-pool acquire+release,
//           p-limit / p-queue running an empty task
//   b       64 callers, 12 free slots, each caller: lease, hold for one setImmediate,
//           release, again; the same hold for every system (the roster's other slots
//           are held, as generic-pool's other resources are; p-limit / p-queue at 12).
//           Beside them, not a contender, the core's own part of that cycle: the raw
//           class at `warn`, a release that grants a waiter and a lease that waits,
//           with no driver, promise or hold; and the floor of any cycle the core
//           decides: p-limit(12)'s whole cycle plus two empty core steps
//   c       a rate-limit report (Roster.report, and raw Policy.handle's `report`),
//           rotating over four executors at every roster size, the sizes interleaved
//           in one run (the flat-in-N target compares them): a pre-classified
//           `{ kind: 'rateLimit', ... }`, and, as the README tells users to report,
//           what the call threw (an Error with `status: 429` and a `retry-after`
//           header, made beforehand) with a listener on the roster's events
//   create  Roster.create against new Policy, the same document
//   memory  (a child process) RSS over the import of a Roster with 10,000 executors,
//           every slot leased, and 10,000 requests waiting
//   size    the two builds' WebAssembly modules, raw and gzipped
//
// Every figure is a median over rounds: CPU time of this process
// (process.cpuUsage: other processes' turns on a shared machine do not count) and
// wall time. The load average is printed at the start and the end: when it is high,
// wall figures (and, through caches and frequency, CPU ones) are inflated.

import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { gzipSync } from 'node:zlib'
import genericPool from 'generic-pool'
import pLimit from 'p-limit'
import PQueue from 'p-queue'
import { DRIVER_STEP, HANDLE_AT_LEVEL, NO_PERSIST } from '../src/roster/Roster.js'
import { Policy, Roster } from '../src/node.js'

const args = process.argv.slice(2)
const quick = args.includes('--quick')
const option = (name) => {
  const i = args.indexOf(name)
  return i < 0 ? undefined : args[i + 1]
}
const only = option('--only')?.split(',')
const wants = (part) => only === undefined || only.includes(part)
const SIZES = option('--n')?.split(',').map(Number) ?? [4, 64, 1_024, 10_000]
const ROUNDS = quick ? 5 : 15
const NOW = Date.UTC(2026, 0, 1)
const ROLE = 'coder'
/** `HANDLE_AT_LEVEL` and `DRIVER_STEP`'s level: events below `warn` left out (a roster nobody listens to). */
const WARN = 2

/** A roster of `executors` executors of one role, `slots` each. */
const roster = (executors, slots = 1) => ({
  executors: Array.from({ length: executors }, (_, i) => ({ id: `e${i}`, harness: 'pi', roles: [ROLE], slots })),
})

const cpuNow = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}
const median = (values) => {
  const sorted = [...values].sort((x, y) => x - y)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ')

/**
 * Between two timed rounds of a system with `settle: true` (and --expose-gc): a
 * collection, and a turn for the finalizers it queues (wasm-bindgen frees an
 * unreachable Policy's memory there), so that one system's garbage is not collected
 * in another's timed round. Only for create: a forced collection before every round
 * slows the small cases that follow it (a, b, c) several times over.
 */
async function settle() {
  if (typeof globalThis.gc !== 'function') return
  globalThis.gc()
  await new Promise((resolve) => setImmediate(resolve))
}

/**
 * Runs `systems` (name → { setup(), round(state) → cycles, teardown(state) }) for
 * ROUNDS interleaved rounds; returns name → { cpu, wall } medians in µs per cycle.
 */
async function interleaved(systems) {
  const states = new Map()
  for (const [name, system] of Object.entries(systems)) {
    const state = await system.setup()
    await system.round(state) // warm up (tier-up)
    await system.after?.(state)
    if (system.settle) await settle()
    states.set(name, { state, cpu: [], wall: [] })
  }
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const [name, system] of Object.entries(systems)) {
      const s = states.get(name)
      const t0 = performance.now()
      const c0 = cpuNow()
      const cycles = await system.round(s.state)
      s.cpu.push((cpuNow() - c0) / cycles)
      s.wall.push(((performance.now() - t0) * 1_000) / cycles)
      await system.after?.(s.state) // untimed clean-up
      if (system.settle) await settle()
    }
  }
  const result = {}
  for (const [name, system] of Object.entries(systems)) {
    const s = states.get(name)
    await system.teardown?.(s.state)
    result[name] = { cpu: median(s.cpu), wall: median(s.wall) }
  }
  return result
}

/** name → N → { cpu, wall } */
const figures = {}
const record = (part, n, results) => {
  for (const [name, r] of Object.entries(results)) {
    figures[`${part}: ${name}`] ??= {}
    figures[`${part}: ${name}`][n] = r
  }
}

/** One table: a row per system, a column per N, `cpu µs (wall)`, and the ratio to `base`. */
function table(part, unit, base) {
  const names = Object.keys(figures).filter((k) => k.startsWith(`${part}: `))
  if (names.length === 0) return
  console.log(`\n${part}: CPU µs per ${unit}, median (wall µs)${base ? `, × ${base} CPU` : ''}`)
  console.log(`  ${''.padEnd(30)}${SIZES.map((n) => `N=${n.toLocaleString('en')}`.padStart(24)).join('')}`)
  for (const name of names) {
    const cells = SIZES.map((n) => {
      const r = figures[name][n]
      if (r === undefined) return ''.padStart(24)
      const ratio = base && figures[`${part}: ${base}`]?.[n] ? ` ×${(r.cpu / figures[`${part}: ${base}`][n].cpu).toFixed(1)}` : ''
      return `${r.cpu.toFixed(2)} (${r.wall.toFixed(2)})${ratio}`.padStart(24)
    })
    console.log(`  ${name.slice(part.length + 2).padEnd(30)}${cells.join('')}`)
  }
}

console.log(`rota bench — Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}${quick ? ' (quick)' : ''}`)
console.log(`load average at start: ${load()}`)

// ---- a: one lease + release at a time ----------------------------------------------

const BATCH_A = quick ? 2_000 : 5_000
const noop = () => {}
if (wants('a')) {
  for (const n of SIZES) {
    const systems = {
      Roster: {
        setup: () => Roster.create({ document: roster(n), probe: false }),
        round: async (r) => {
          for (let i = 0; i < BATCH_A; i += 1) (await r.lease(ROLE)).release()
          return BATCH_A
        },
        teardown: (r) => r.close(),
      },
      'raw Policy.handle': {
        setup: () => ({ policy: new Policy(roster(n), { canProbe: false }), i: 0 }),
        round: (s) => {
          for (let k = 0; k < BATCH_A; k += 1) {
            const { outputs } = s.policy.handle({ type: 'lease', now: NOW, id: `r${s.i++}`, role: ROLE })
            s.policy.handle({ type: 'release', now: NOW, lease: outputs[0].lease })
          }
          return BATCH_A
        },
        teardown: (s) => s.policy.free(),
      },
      'generic-pool': {
        setup: async () => {
          let k = 0
          const pool = genericPool.createPool({ create: async () => ({ id: `e${k++}` }), destroy: async () => {} }, { max: n, min: n })
          await pool.ready()
          return pool
        },
        round: async (pool) => {
          for (let i = 0; i < BATCH_A; i += 1) await pool.release(await pool.acquire())
          return BATCH_A
        },
        teardown: async (pool) => {
          await pool.drain()
          await pool.clear()
        },
      },
      'p-limit': {
        setup: () => pLimit(n),
        round: async (limit) => {
          for (let i = 0; i < BATCH_A; i += 1) await limit(noop)
          return BATCH_A
        },
      },
      'p-queue': {
        setup: () => new PQueue({ concurrency: n }),
        round: async (queue) => {
          for (let i = 0; i < BATCH_A; i += 1) await queue.add(noop)
          return BATCH_A
        },
      },
    }
    record('a', n, await interleaved(systems))
  }
  table('a', 'lease+release', 'generic-pool')
}

// ---- b: 64 callers, 12 free slots, a setImmediate hold ------------------------------

const CALLERS = 64
const FREE = 12
const CYCLES_B = quick ? 6_000 : 20_000
const hold = () => new Promise((resolve) => setImmediate(resolve))

/** Runs CALLERS callers until `cycles` cycles are done; `cycle()` is one lease-hold-release. */
async function callers(cycle, cycles) {
  let left = cycles
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (left > 0) {
        left -= 1
        await cycle()
      }
    }),
  )
  return cycles
}

if (wants('b')) {
  for (const n of SIZES) {
    // N executors; each with enough slots that 12 are free once the rest are held.
    const slots = Math.max(1, Math.ceil(FREE / n))
    const busy = n * slots - FREE
    const systems = {
      Roster: {
        setup: async () => {
          const r = await Roster.create({ document: roster(n, slots), probe: false })
          for (let i = 0; i < busy; i += 1) await r.tryLease(ROLE)
          return r
        },
        round: (r) =>
          callers(async () => {
            const lease = await r.lease(ROLE)
            await hold()
            lease.release()
          }, CYCLES_B),
        teardown: (r) => r.close(),
      },
      'generic-pool': {
        setup: async () => {
          let k = 0
          const pool = genericPool.createPool({ create: async () => ({ id: `e${k++}` }), destroy: async () => {} }, { max: n * slots, min: n * slots })
          await pool.ready()
          const held = []
          for (let i = 0; i < busy; i += 1) held.push(await pool.acquire())
          return { pool, held }
        },
        round: ({ pool }) =>
          callers(async () => {
            const resource = await pool.acquire()
            await hold()
            await pool.release(resource)
          }, CYCLES_B),
        teardown: async ({ pool, held }) => {
          for (const resource of held) await pool.release(resource)
          await pool.drain()
          await pool.clear()
        },
      },
      // Not a contender: the core's own part of a b cycle, a release that grants the
      // longest waiting request and a lease that waits, through the raw class at `warn`
      // (what a roster nobody listens to asks), with no driver, no promise and no hold.
      // Read beside the others: a Roster's cycle costs at least this plus a caller's
      // promise and hold (about p-limit's whole cycle).
      'raw waiting cycle, no hold': {
        setup: () => {
          const s = { policy: new Policy(roster(n, slots), { canProbe: false }), i: 0, held: [] }
          const take = ({ outputs }) => {
            for (const output of outputs) if (output.type === 'granted') s.held.push(output.lease)
          }
          const lease = () => take(s.policy[HANDLE_AT_LEVEL]({ type: 'lease', now: NOW, id: `r${s.i++}`, role: ROLE }, WARN))
          s.cycle = () => {
            take(s.policy[HANDLE_AT_LEVEL]({ type: 'release', now: NOW, lease: s.held.shift() }, WARN))
            lease()
          }
          // Every slot leased, then the callers' other 52 requests waiting; the 12
          // leases the callers hold go round (the others' stay held).
          for (let i = 0; i < busy + CALLERS; i += 1) lease()
          s.held.splice(0, busy)
          return s
        },
        round: (s) => {
          for (let k = 0; k < CYCLES_B; k += 1) s.cycle()
          return CYCLES_B
        },
        teardown: (s) => {
          s.policy.free()
          // Each release granted a waiter: the callers' 12 leases are still 12.
          if (s.held.length !== FREE) throw new Error(`raw waiting cycle: ${s.held.length} leases held, not ${FREE}`)
        },
      },
      // Not a contender: the floor of any cycle the core decides. p-limit(12)'s whole
      // cycle (the leanest promise, queue and hold there is) plus two core steps that
      // decide nothing (a tick through the roster's own step, `DRIVER_STEP` at `warn`
      // without persist outputs), one where the caller asks and one where it releases,
      // on a roster in b's state. A Roster whose lease logic cost nothing and whose
      // driver cost what p-limit's does would cost this; b's p-queue target needs less.
      'floor: p-limit(12) + 2 empty steps': {
        setup: () => {
          const s = { limit: pLimit(FREE), policy: new Policy(roster(n, slots), { canProbe: false }), answers: 0 }
          // b's state: every slot leased, and the callers' other 52 requests waiting.
          for (let i = 0; i < busy + CALLERS; i += 1) {
            s.policy[HANDLE_AT_LEVEL]({ type: 'lease', now: NOW, id: `r${i}`, role: ROLE }, WARN)
          }
          const step = () => {
            // An empty step answers nothing: the floor holds no decision.
            s.answers += s.policy[DRIVER_STEP]({ type: 'tick', now: NOW }, WARN | NO_PERSIST).outputs.length
          }
          s.cycle = () => {
            step()
            return s.limit(async () => {
              await hold()
              step()
            })
          }
          return s
        },
        round: (s) => callers(s.cycle, CYCLES_B),
        teardown: (s) => {
          s.policy.free()
          if (s.answers !== 0) throw new Error(`floor: the empty steps answered ${s.answers} outputs`)
        },
      },
      'p-limit(12)': {
        setup: () => pLimit(FREE),
        round: (limit) => callers(() => limit(hold), CYCLES_B),
      },
      'p-queue(12)': {
        setup: () => new PQueue({ concurrency: FREE }),
        round: (queue) => callers(() => queue.add(hold), CYCLES_B),
      },
    }
    record('b', n, await interleaved(systems))
  }
  table('b', 'cycle', 'generic-pool')
}

// ---- c: a rate-limit report ---------------------------------------------------------

const BATCH_C = quick ? 2_000 : 5_000
const rateLimit = { kind: 'rateLimit', message: '429 Too Many Requests', retryAfterMs: 60_000 }
// (Made beforehand: an Error's stack trace is the caller's cost, not the report's.)
const thrown = Array.from({ length: 4 }, () => Object.assign(new Error('429 Too Many Requests'), { status: 429, headers: { 'retry-after': '60' } }))
if (wants('c')) {
  // Every size in one interleaved run (the target compares N=10,000 with N=4: a busy
  // moment of the machine falls on both alike, not on one size's block alone).
  const all = {}
  for (const n of SIZES) {
    const systems = {
      'Roster.report': {
        // The clock moves on a millisecond per report, as for the raw class: each
        // report ends later than the last, so each is an exclusion and a persist.
        setup: async () => {
          const s = { now: NOW }
          s.roster = await Roster.create({ document: roster(n), probe: false, now: () => s.now })
          return s
        },
        round: (s) => {
          for (let i = 0; i < BATCH_C; i += 1) {
            s.now += 1
            s.roster.report(`e${i & 3}`, rateLimit)
          }
          return BATCH_C
        },
        teardown: (s) => s.roster.close(),
      },
      'Roster.report thrown Error, listener': {
        setup: async () => {
          const s = { now: NOW, heard: 0 }
          s.roster = await Roster.create({ document: roster(n), probe: false, now: () => s.now })
          s.roster.on('event', () => (s.heard += 1))
          return s
        },
        round: (s) => {
          for (let i = 0; i < BATCH_C; i += 1) {
            s.now += 1
            s.roster.report(`e${i & 3}`, thrown[i & 3])
          }
          return BATCH_C
        },
        teardown: (s) => s.roster.close(),
      },
      'raw Policy.handle report': {
        setup: () => ({ policy: new Policy(roster(n), { canProbe: false }), now: NOW }),
        round: (s) => {
          for (let i = 0; i < BATCH_C; i += 1) {
            s.policy.handle({ type: 'report', now: (s.now += 1), executor: `e${i & 3}`, failure: rateLimit })
          }
          return BATCH_C
        },
        teardown: (s) => s.policy.free(),
      },
    }
    for (const [name, system] of Object.entries(systems)) all[`${name}\u0000${n}`] = system
  }
  const results = await interleaved(all)
  for (const n of SIZES) {
    const ofSize = {}
    for (const [key, r] of Object.entries(results)) {
      const [name, size] = key.split('\u0000')
      if (Number(size) === n) ofSize[name] = r
    }
    record('c', n, ofSize)
  }
  table('c', 'report')
}

// ---- create -------------------------------------------------------------------------

if (wants('create')) {
  for (const n of SIZES) {
    const document = roster(n)
    const times = Math.max(1, Math.round((quick ? 2_000 : 10_000) / n))
    const systems = {
      // Construction only: closing and freeing come after the timed part.
      'Roster.create': {
        settle: true,
        setup: () => [],
        round: async (made) => {
          for (let i = 0; i < times; i += 1) made.push(await Roster.create({ document, probe: false }))
          return times
        },
        after: async (made) => {
          for (const r of made.splice(0)) await r.close()
        },
      },
      'new Policy': {
        settle: true,
        setup: () => [],
        round: (made) => {
          for (let i = 0; i < times; i += 1) made.push(new Policy(document, { canProbe: false }))
          return times
        },
        after: (made) => {
          for (const p of made.splice(0)) p.free()
        },
      },
    }
    record('create', n, await interleaved(systems))
  }
  table('create', 'roster', 'new Policy')
}

// ---- memory (a child process, so that nothing else here counts) --------------------

let memory
if (wants('memory')) {
  // RSS moves by several MB from run to run (V8's code and freed pages): the median of five.
  const runs = Array.from({ length: quick ? 3 : 5 }, () =>
    JSON.parse(execFileSync(process.execPath, ['--expose-gc', new URL('memory.mjs', import.meta.url).pathname], { encoding: 'utf8' })),
  )
  const rss = runs.map((r) => r.rssMB)
  memory = { ...runs[0], rssMB: median(rss) }
  console.log(
    `\nmemory: ${memory.executors.toLocaleString('en')} executors, ${memory.leased.toLocaleString('en')} leased, ` +
      `${memory.waiting.toLocaleString('en')} waiting: RSS +${memory.rssMB.toFixed(1)} MB over the import, median of ${runs.length} ` +
      `(${Math.min(...rss).toFixed(1)}–${Math.max(...rss).toFixed(1)}; heap +${memory.heapMB.toFixed(1)} MB, wasm memory ${memory.wasmMB.toFixed(1)} MB)`,
  )
}

// ---- size ---------------------------------------------------------------------------

let webGz
if (wants('size')) {
  for (const build of ['node', 'web']) {
    const wasm = readFileSync(new URL(`../pkg/${build}/rota_wasm_bg.wasm`, import.meta.url))
    const gz = gzipSync(wasm, { level: 9 }).length
    if (build === 'web') webGz = gz
    console.log(
      `\nthe ${build} build's module (npm/pkg/${build}/rota_wasm_bg.wasm): raw ${wasm.length.toLocaleString('en')} bytes, gzipped ${gz.toLocaleString('en')}` +
        (build === 'web' ? ' (budget: test/size.test.mjs)' : ''),
    )
  }
}

// ---- the targets --------------------------------------------------------------------
// Lease+release and b are judged against a reference build, side by side in one run
// (ab.mjs); here they are set beside the peers, for information.

console.log(`\nload average at the end: ${load()}`)
console.log('\ntargets (CPU medians):')
const verdict = (ok) => (ok ? 'met    ' : 'NOT met')
const every = (name, test) => {
  const row = figures[name]
  if (row === undefined) return undefined
  const cells = SIZES.filter((n) => row[n] !== undefined)
  return { ok: cells.every((n) => test(row[n].cpu, n)), text: cells.map((n) => `${n}: ${row[n].cpu.toFixed(2)}`).join(', ') }
}
const target = (label, result) => {
  if (result !== undefined) console.log(`  ${verdict(result.ok)} ${label} (${result.text})`)
}
/** An info line: `name`'s CPU median as a multiple of `peer`'s at each N. */
const beside = (label, name, peer) => {
  const row = figures[name]
  const other = figures[peer]
  const cells = SIZES.filter((n) => row?.[n] && other?.[n]).map((n) => `${n}: ×${(row[n].cpu / other[n].cpu).toFixed(2)}`)
  if (cells.length > 0) console.log(`  (info)  ${label} (${cells.join(', ')})`)
}
beside('a: Roster lease+release × generic-pool', 'a: Roster', 'a: generic-pool')
beside('b: Roster × generic-pool', 'b: Roster', 'b: generic-pool')
beside('b: Roster × p-queue(12)', 'b: Roster', 'b: p-queue(12)')
// The floor of any cycle the core decides, against p-queue's whole cycle: at ×1.00 or
// more no Roster can be faster than p-queue while the core decides every lease.
beside('b: the floor of a core-decided cycle (p-limit(12) + two empty core steps) × p-queue(12)', 'b: floor: p-limit(12) + 2 empty steps', 'b: p-queue(12)')
for (const name of ['c: Roster.report', 'c: Roster.report thrown Error, listener', 'c: raw Policy.handle report']) {
  const row = figures[name]
  if (row === undefined) continue
  target(`${name.slice(3)} ≤ 3 µs`, every(name, (us) => us <= 3))
  const first = SIZES.find((n) => row[n] !== undefined)
  const last = SIZES.findLast((n) => row[n] !== undefined)
  const ratio = row[last].cpu / row[first].cpu
  console.log(`  ${verdict(ratio <= 1.5)} ${name.slice(3)} flat: N=${last} ≤ 1.5× N=${first} (×${ratio.toFixed(2)})`)
}
if (figures['create: Roster.create'] !== undefined) {
  const n = SIZES.at(-1)
  const ratio = figures['create: Roster.create'][n].cpu / figures['create: new Policy'][n].cpu
  console.log(
    `  ${verdict(ratio <= 1.5)} Roster.create ≤ 1.5× new Policy at N=${n} (${(figures['create: Roster.create'][n].cpu / 1000).toFixed(1)} ms vs ${(figures['create: new Policy'][n].cpu / 1000).toFixed(1)} ms: ×${ratio.toFixed(2)})`,
  )
}
if (memory !== undefined) {
  console.log(`  ${verdict(memory.rssMB <= 60)} memory ≤ 60 MB of RSS over the import (+${memory.rssMB.toFixed(1)} MB)`)
}
if (webGz !== undefined) console.log(`  web build gzipped: ${webGz.toLocaleString('en')} bytes (budget in test/size.test.mjs)`)
