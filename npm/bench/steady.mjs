// bench.mjs's b run long in a process of its own: what a roster serving all day costs,
// garbage collector included. Not a test.
//
//   node bench/steady.mjs [<src dir>] [--n 4,64,1024,10000] [--cycles 200000]
//                         [--system Roster|generic-pool|p-limit|p-queue]
//
// Garbage that outlives scavenges (issue 15, session 22: the waiting requests a
// churning Map kept alive) showed in a fresh process's first roster, and less or not at
// all in one that had run other rosters or systems first (ab.mjs, bench.mjs, this
// script's later sizes), so a change is judged here, one N a process. One roster runs
// `--cycles` cycles after a warm-up; the figures are CPU µs per cycle and the
// scavenges' part of it (PerformanceObserver 'gc' entries, minor; wall µs per cycle).
// Compare a change in separate processes, alternating which goes first:
//
//   cp -r src /tmp/before-src && <change> && for i in 1 2 3; do
//     node bench/steady.mjs /tmp/before-src --n 64; node bench/steady.mjs --n 64; done
//
// `<src dir>` is a copy of npm/src next to a `pkg/node` (its `../pkg/node`), as npm/src.
// `--system` runs one of bench.mjs's peers instead, with the same callers and hold.
import { constants, PerformanceObserver } from 'node:perf_hooks'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import genericPool from 'generic-pool'
import pLimit from 'p-limit'
import PQueue from 'p-queue'
import { takeOption } from './options.mjs'

const args = process.argv.slice(2)
const option = (name, fallback) => takeOption(args, name, fallback)
const sizes = option('--n', '4,64,1024,10000').split(',').map(Number)
const cycles = Number(option('--cycles', '200000'))
const system = option('--system', 'Roster')
const src = resolve(args[0] ?? new URL('../src', import.meta.url).pathname)
const { Roster } = await import(pathToFileURL(`${src}/node.js`).href)

const CALLERS = 64
const FREE = 12
const WARM_UP = 20_000
const hold = () => new Promise((done) => setImmediate(done))

let scavengeMs = 0
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) scavengeMs += entry.duration
  }
}).observe({ entryTypes: ['gc'] })

const cpuNow = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}

/** N executors with 12 slots free: a system's `cycle` (lease, hold, release) and `close`. */
const systems = {
  Roster: async (n, slots, busy) => {
    const document = {
      executors: Array.from({ length: n }, (_, i) => ({ id: `e${i}`, harness: 'pi', roles: ['coder'], slots })),
    }
    const roster = await Roster.create({ document, probe: false })
    for (let i = 0; i < busy; i += 1) await roster.tryLease('coder')
    return {
      cycle: async () => {
        const lease = await roster.lease('coder')
        await hold()
        lease.release()
      },
      close: () => roster.close(),
    }
  },
  'generic-pool': async (n, slots, busy) => {
    let k = 0
    const max = n * slots
    const pool = genericPool.createPool({ create: async () => ({ id: `e${k++}` }), destroy: async () => {} }, { max, min: max })
    await pool.ready()
    const held = []
    for (let i = 0; i < busy; i += 1) held.push(await pool.acquire())
    return {
      cycle: async () => {
        const resource = await pool.acquire()
        await hold()
        await pool.release(resource)
      },
      close: async () => {
        for (const resource of held) await pool.release(resource)
        await pool.drain()
        await pool.clear()
      },
    }
  },
  'p-limit': async () => {
    const limit = pLimit(FREE)
    return { cycle: () => limit(hold), close: () => {} }
  },
  'p-queue': async () => {
    const queue = new PQueue({ concurrency: FREE })
    return { cycle: () => queue.add(hold), close: () => {} }
  },
}
if (systems[system] === undefined) {
  console.error(`steady: no system '${system}' (one of ${Object.keys(systems).join(', ')})`)
  process.exit(2)
}

console.log(`steady b: ${system === 'Roster' ? src : system}, ${cycles.toLocaleString('en')} cycles after ${WARM_UP.toLocaleString('en')}, Node ${process.version}`)
for (const n of sizes) {
  const slots = Math.max(1, Math.ceil(FREE / n))
  const { cycle, close } = await systems[system](n, slots, n * slots - FREE)
  const run = async (count) => {
    let left = count
    await Promise.all(
      Array.from({ length: CALLERS }, async () => {
        while (left > 0) {
          left -= 1
          await cycle()
        }
      }),
    )
  }
  await run(WARM_UP)
  // The observer's entries come in a later task: let the warm-up's arrive first.
  await hold()
  scavengeMs = 0
  const start = cpuNow()
  await run(cycles)
  const cpu = cpuNow() - start
  await hold()
  const perCycle = (cpu / cycles).toFixed(2)
  const scavenges = ((scavengeMs * 1000) / cycles).toFixed(2)
  console.log(`  N=${String(n).padEnd(6)} ${perCycle} CPU µs per cycle, of which scavenges ${scavenges}`)
  await close()
}
