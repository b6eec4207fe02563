// The Node runner's entry (tests/run.sh calls it): packs the npm package and installs
// the tarball into a fresh project (npm/test/pack.mjs, the npm side's own approach),
// copies the conformance tests there so `import 'rota'` resolves to the installed
// package, and runs them with node:test.
//
//   node tests/runners/node/run.mjs [--keep]
//
// Environment for the tests: ROTA_VECTORS (the vectors directory) and ROTA_TRACES
// (the trace file `cargo run -p rota-conformance -- traces` wrote).

import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, rmSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { packAndInstall } from '../../../npm/test/pack.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, '..', '..', '..')
const keep = process.argv.includes('--keep')
const traces = process.env.ROTA_TRACES ?? join(root, 'target', 'conformance', 'traces.json')
if (!existsSync(traces)) {
  console.error(`${traces} is missing: write it with \`cargo run -p rota-conformance -- traces\` (tests/run.sh does)`)
  process.exit(1)
}

console.log('==> npm pack, and install the tarball into a fresh project')
const packed = packAndInstall({ quiet: true })
console.log(`    ${packed.filename} (${packed.size} bytes) in ${packed.project}`)
const dir = join(packed.project, 'conformance')
mkdirSync(dir, { recursive: true })
cpSync(join(here, 'conformance.test.mjs'), join(dir, 'conformance.test.mjs'))
cpSync(join(here, '..', 'shared.mjs'), join(dir, 'shared.mjs'))

console.log('==> node --test (the installed package)')
const run = spawnSync(process.execPath, ['--test', '--test-reporter=spec', join(dir, 'conformance.test.mjs')], {
  cwd: packed.project,
  stdio: 'inherit',
  env: { ...process.env, ROTA_VECTORS: join(root, 'tests', 'vectors'), ROTA_TRACES: traces },
})
if (!keep) rmSync(packed.work, { recursive: true, force: true })
process.exit(run.status ?? 1)
