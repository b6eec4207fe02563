// A/B of two (or more) builds in one process, interleaved round by round: on a shared
// machine whose load moves, a change is judged by the ratio of medians, not by two
// runs minutes apart. Not a test.
//
//   node bench/ab.mjs <variant> <variant> ... [--n 4,10000] [--rounds 21] [--only raw,b]
//
// A variant is `<pkg dir>` (wasm-bindgen's glue and its rota_wasm_bg.wasm, as
// npm/pkg/node) or `<pkg dir>,<src dir>` (a copy of npm/src, for a driver change);
// `json:` before it runs that build with the JSON step only (its own instance of the
// module, without the binary step's exports), to weigh the binary step.
// Copy npm/pkg/node (and npm/src) aside before a change, rebuild, and compare:
//
//   cp -r pkg/node /tmp/before && make -C .. wasm && node bench/ab.mjs /tmp/before pkg/node

import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { takeOption } from './options.mjs'

const args = process.argv.slice(2)
const option = (name, fallback) => takeOption(args, name, fallback)
const sizes = option('--n', '4,10000').split(',').map(Number)
const rounds = Number(option('--rounds', '21'))
// Cases whose name contains one of these words (all of them when absent).
const only = option('--only', '').split(',').filter(Boolean)
const variants = args
if (variants.length < 2) {
  console.error('usage: node bench/ab.mjs <pkg dir>[,<src dir>] <pkg dir>[,<src dir>] ... [--n 4,10000] [--rounds 21] [--only raw,b]')
  process.exit(2)
}
const here = new URL('..', import.meta.url).pathname

const apis = []
const copies = []
process.on('exit', () => copies.forEach((copy) => rmSync(copy, { recursive: true, force: true })))
for (const variant of variants) {
  const json = variant.startsWith('json:')
  const [pkg, src = `${here}src`] = variant.slice(json ? 5 : 0).split(',').map((p) => resolve(p))
  // A fresh instance per variant (the query): each buildApi wraps its own Policy class.
  const query = `?v=${apis.length}`
  let wasm = await import(pathToFileURL(`${pkg}/rota_wasm.js`).href + query)
  wasm.initSync({ module: readFileSync(`${pkg}/rota_wasm_bg.wasm`) })
  if (json) wasm = { ...wasm, __memory: undefined }
  // The sources copied per variant: two variants never share a module (and the JIT's
  // feedback on its functions), as the JSON step's objects would make the binary
  // step's call sites polymorphic.
  const copy = mkdtempSync(join(here, 'bench', '.ab-'))
  copies.push(copy)
  cpSync(src, copy, { recursive: true })
  const { buildApi } = await import(pathToFileURL(`${copy}/api.js`).href)
  apis.push({ name: variant, ...buildApi(wasm, { name: 'ab' }) })
}

const NOW = Date.UTC(2026, 0, 1)
const BATCH = 5_000
const roster = (n) => ({ executors: Array.from({ length: n }, (_, i) => ({ id: `e${i}`, harness: 'pi', roles: ['coder'], slots: 1 })) })
const cpuNow = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}
const median = (v) => [...v].sort((x, y) => x - y)[v.length >> 1]
const rateLimit = { kind: 'rateLimit', message: '429 Too Many Requests', retryAfterMs: 60_000 }
/**
 * What a caller's HTTP client throws on a 429, as the README tells users to report it
 * (made beforehand: an Error's stack trace is the caller's cost, not the report's).
 */
const thrown = Array.from({ length: 4 }, () => Object.assign(new Error('429 Too Many Requests'), { status: 429, headers: { 'retry-after': '60' } }))

const cases = {
  'raw lease+release': async (api, n) => {
    const policy = new api.Policy(roster(n), { canProbe: false })
    let i = 0
    return () => {
      for (let k = 0; k < BATCH; k += 1) {
        const { outputs } = policy.handle({ type: 'lease', now: NOW, id: `r${i++}`, role: 'coder' })
        policy.handle({ type: 'release', now: NOW, lease: outputs[0].lease })
      }
    }
  },
  'Roster lease+release': async (api, n) => {
    const r = await api.Roster.create({ document: roster(n), probe: false })
    return async () => {
      for (let k = 0; k < BATCH; k += 1) (await r.lease('coder')).release()
    }
  },
  // bench.mjs's b: 64 callers, 12 free slots, a setImmediate hold (BATCH cycles a round).
  'Roster b (64 callers, 12 free)': async (api, n) => {
    const slots = Math.max(1, Math.ceil(12 / n))
    const r = await api.Roster.create({
      document: { executors: roster(n).executors.map((e) => ({ ...e, slots })) },
      probe: false,
    })
    for (let i = 0; i < n * slots - 12; i += 1) await r.tryLease('coder')
    const hold = () => new Promise((resolve) => setImmediate(resolve))
    return async () => {
      let left = BATCH
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          while (left > 0) {
            left -= 1
            const lease = await r.lease('coder')
            await hold()
            lease.release()
          }
        }),
      )
    }
  },
  'raw report': async (api, n) => {
    const policy = new api.Policy(roster(n), { canProbe: false })
    let now = NOW
    return () => {
      for (let k = 0; k < BATCH; k += 1) policy.handle({ type: 'report', now: (now += 1), executor: `e${k & 3}`, failure: rateLimit })
    }
  },
  'Roster.report': async (api, n) => {
    const clock = { now: NOW }
    const r = await api.Roster.create({ document: roster(n), probe: false, now: () => clock.now })
    return () => {
      for (let k = 0; k < BATCH; k += 1) {
        clock.now += 1
        r.report(`e${k & 3}`, rateLimit)
      }
    }
  },
  // The report the README shows: what the call threw, with a listener on the events.
  'Roster.report thrown Error, listener': async (api, n) => {
    const clock = { now: NOW }
    const r = await api.Roster.create({ document: roster(n), probe: false, now: () => clock.now })
    let heard = 0
    r.on('event', () => (heard += 1))
    return () => {
      for (let k = 0; k < BATCH; k += 1) {
        clock.now += 1
        r.report(`e${k & 3}`, thrown[k & 3])
      }
    }
  },
}

console.log(`ab: ${rounds} interleaved rounds of ${BATCH}; CPU µs per cycle, median (× the first variant)`)
for (const [name, make] of Object.entries(cases)) {
  if (only.length > 0 && !only.some((word) => name.includes(word))) continue
  for (const n of sizes) {
    const runs = []
    for (const api of apis) {
      const run = await make(api, n)
      await run() // warm up
      runs.push({ run, cpu: [] })
    }
    for (let round = 0; round < rounds; round += 1) {
      for (const r of runs) {
        const c0 = cpuNow()
        await r.run()
        r.cpu.push((cpuNow() - c0) / BATCH)
      }
    }
    const first = median(runs[0].cpu)
    const cells = runs.map((r, i) => `${median(r.cpu).toFixed(3)}${i === 0 ? '' : ` (×${(median(r.cpu) / first).toFixed(2)})`}`)
    console.log(`  ${`${name}, N=${n}`.padEnd(34)} ${cells.map((c) => c.padEnd(18)).join('')}`)
  }
}
