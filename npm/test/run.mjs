// `npm test`: tests the package as a user gets it. Packs the tarball, installs it into
// a fresh project under os.tmpdir(), copies the tests there (so `import 'rota'`
// resolves to the installed package, never to this directory), runs them with
// node:test, then type-checks the declarations and a typed usage example with
// `tsc --noEmit`, and compiles + runs a TypeScript `using` example (Node 20 cannot
// parse `using` itself; tsc lowers it to the dispose symbols).
//
//   node test/run.mjs [--keep] [test-file-name-filter]

import { execFileSync, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const root = dirname(here)
const args = process.argv.slice(2)
const keep = args.includes('--keep')
const filter = args.find((a) => !a.startsWith('--'))

const step = (message) => console.log(`\n==> ${message}`)
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

for (const file of ['pkg/web/rota_wasm.js', 'pkg/web/rota_wasm_bg.wasm']) {
  if (!existsSync(join(root, file))) {
    console.error(`npm/${file} is missing: build it first (make wasm)`)
    process.exit(1)
  }
}

const work = mkdtempSync(join(tmpdir(), 'rota-npm-test-'))
let failed = false
try {
  step(`npm pack -> ${work}`)
  const packed = JSON.parse(
    execFileSync(npm, ['pack', '--json', '--pack-destination', work], { cwd: root, encoding: 'utf8' }),
  )
  const tarball = join(work, packed[0].filename)
  const files = packed[0].files.map((f) => f.path).sort()
  console.log(`    ${packed[0].filename}: ${files.length} files, ${packed[0].size} bytes packed`)
  for (const f of files) console.log(`      ${f}`)

  step('install the tarball into a fresh project')
  const project = join(work, 'project')
  cpSync(join(here, 'fixture'), project, { recursive: true })
  execFileSync(npm, ['install', '--no-audit', '--no-fund', '--no-save', tarball], {
    cwd: project,
    stdio: 'inherit',
  })

  step('copy the tests into the project')
  const testDir = join(project, 'test')
  const tests = readdirSync(here)
    .filter((f) => f.endsWith('.test.mjs'))
    .filter((f) => filter === undefined || f.includes(filter))
    .sort()
  for (const f of readdirSync(here)) {
    if (f.endsWith('.mjs') && f !== 'run.mjs') cpSync(join(here, f), join(testDir, f))
  }

  step(`node --test (${tests.length} files)`)
  const run = spawnSync(process.execPath, ['--test', '--test-reporter=spec', ...tests.map((t) => join(testDir, t))], {
    cwd: project,
    stdio: 'inherit',
    env: { ...process.env, ROTA_TEST_PROJECT: project },
  })
  if (run.status !== 0) failed = true

  if (filter === undefined || 'types'.includes(filter)) {
    step('tsc --noEmit: the declarations and a typed usage example')
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
    const typeRoots = join(root, 'node_modules', '@types')
    const check = spawnSync(
      process.execPath,
      [tsc, '-p', join(project, 'tsconfig.json'), '--typeRoots', typeRoots],
      { cwd: project, stdio: 'inherit' },
    )
    if (check.status !== 0) failed = true

    step('`using` in TypeScript, lowered by tsc, run on this Node')
    const emit = spawnSync(
      process.execPath,
      [tsc, '-p', join(project, 'tsconfig.using.json'), '--typeRoots', typeRoots],
      { cwd: project, stdio: 'inherit' },
    )
    if (emit.status !== 0) {
      failed = true
    } else {
      const using = spawnSync(process.execPath, [join(project, 'out', 'using.js')], {
        cwd: project,
        stdio: 'inherit',
      })
      if (using.status !== 0) failed = true
    }
  }
} catch (error) {
  console.error(error)
  failed = true
} finally {
  if (keep || failed) {
    console.log(`\n(test project kept at ${work})`)
    writeFileSync(join(work, 'KEEP'), '')
  } else {
    rmSync(work, { recursive: true, force: true })
  }
}
console.log(failed ? '\nnpm tests FAILED' : '\nnpm tests passed')
process.exit(failed ? 1 : 0)
