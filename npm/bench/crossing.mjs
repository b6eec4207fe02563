// How the query answers cross into JS: two builds side by side in one process, each
// call timed round by round (median CPU µs a call). Not a test. A build answers a
// query either by serde-wasm-bindgen (a JS value built property by property) or by
// JSON text and the engine's JSON.parse; comparing a build of each says which pays
// for which call (`wasm/src/js.rs` keeps the faster one per call).
//
//   node bench/crossing.mjs <pkg dir> <pkg dir> [--n 4,10000] [--rounds 11]

import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { takeOption } from './options.mjs'

const args = process.argv.slice(2)
const sizes = takeOption(args, '--n', '4,10000').split(',').map(Number)
const rounds = Number(takeOption(args, '--rounds', '11'))
if (args.length < 2) {
  console.error('usage: node bench/crossing.mjs <pkg dir> <pkg dir> [--n 4,10000] [--rounds 11]')
  process.exit(2)
}

const builds = []
for (const dir of args) {
  const pkg = resolve(dir)
  const wasm = await import(pathToFileURL(`${pkg}/rota_wasm.js`).href)
  wasm.initSync({ module: readFileSync(`${pkg}/rota_wasm_bg.wasm`) })
  builds.push({ name: dir, wasm })
}

const NOW = Date.UTC(2026, 0, 1)
const roster = (n) => ({ executors: Array.from({ length: n }, (_, i) => ({ id: `e${i}`, harness: 'pi', roles: ['coder', 'reviewer'], slots: 2 })) })
const cpuNow = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}
const median = (v) => [...v].sort((x, y) => x - y)[v.length >> 1]
const failure = { status: 429, message: '429 Too Many Requests', retryAfterMs: 30_000 }

const calls = {
  snapshot: (p) => p.snapshot(),
  explain: (p) => p.explain({ role: 'coder' }),
  plan: (p, n) => p.plan(roster(Math.max(1, n - 1))),
  classify: (p) => p.classify(failure),
  exportState: (p) => p.exportState(),
  validate: (p, n, w) => w.validate(roster(n)),
  check: (p, n, w) => w.check(roster(n)),
}

for (const n of sizes) {
  const policies = builds.map(({ wasm }) => {
    const p = new wasm.Policy(roster(n), { canProbe: false })
    for (let i = 0; i < Math.min(n, 50); i += 1) p.handleJson(JSON.stringify({ type: 'lease', now: NOW, id: `r${i}`, role: 'coder' }))
    return p
  })
  for (const [name, call] of Object.entries(calls)) {
    const repeat = Math.max(1, Math.round(20_000 / n))
    const times = builds.map(() => [])
    for (let round = 0; round < rounds; round += 1) {
      builds.forEach(({ wasm }, b) => {
        const start = cpuNow()
        for (let k = 0; k < repeat; k += 1) call(policies[b], n, wasm)
        times[b].push((cpuNow() - start) / repeat)
      })
    }
    const medians = times.map(median)
    const row = medians.map((m, b) => `${builds[b].name}: ${m.toFixed(1)} µs`).join('   ')
    console.log(`N=${n}  ${name.padEnd(12)} ${row}   ×${(medians[1] / medians[0]).toFixed(2)}`)
  }
  policies.forEach((p) => p.free())
}
