// `npm test`: tests the package as a user gets it. Packs the tarball, installs it into
// a fresh project under os.tmpdir(), copies the tests there (so `import 'rota'`
// resolves to the installed package, never to this directory), runs them with
// node:test, then type-checks the declarations and a typed usage example with
// `tsc --noEmit`, and compiles + runs a TypeScript `using` example (Node 20 cannot
// parse `using` itself; tsc lowers it to the dispose symbols).
//
//   node test/run.mjs [--keep] [test-file-name-filter]

import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PACKAGE_ROOT as root, packAndInstall, requireBuild } from './pack.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const keep = args.includes('--keep')
const filter = args.find((a) => !a.startsWith('--'))

const step = (message) => console.log(`\n==> ${message}`)

try {
  requireBuild()
} catch (error) {
  console.error(error.message)
  process.exit(1)
}

let failed = false
let work
try {
  step('npm pack, and install the tarball into a fresh project')
  const packed = packAndInstall()
  work = packed.work
  const project = packed.project
  console.log(`    ${packed.filename}: ${packed.files.length} files, ${packed.size} bytes packed`)
  for (const f of packed.files) console.log(`      ${f}`)

  step('copy the tests into the project')
  const testDir = join(project, 'test')
  const tests = readdirSync(here)
    .filter((f) => f.endsWith('.test.mjs') || f.endsWith('.test.cjs'))
    .filter((f) => filter === undefined || f.includes(filter))
    .sort()
  for (const f of readdirSync(here)) {
    if ((f.endsWith('.mjs') || f.endsWith('.cjs')) && f !== 'run.mjs' && f !== 'pack.mjs') cpSync(join(here, f), join(testDir, f))
  }

  step(`node --test (${tests.length} files)`)
  const run = spawnSync(process.execPath, ['--test', '--test-reporter=spec', ...tests.map((t) => join(testDir, t))], {
    cwd: project,
    stdio: 'inherit',
    env: {
      ...process.env,
      ROTA_TEST_PROJECT: project,
      // The package's own directory: its dev dependencies (bundlers, TypeScript, Ajv,
      // OpenTelemetry, the seed's persistence) and README.md, for the tests that need them.
      ROTA_PACKAGE_ROOT: root,
      // For classify.test.mjs: the dev dependencies it builds real errors with
      // (@llm4ts/core and effect), which the test project does not install.
      ROTA_DEV_MODULES: join(root, 'node_modules'),
      // For handle-binary.test.mjs: the conformance vectors and the native random traces
      // (when tests/run.sh has written them) of the repository around the package.
      ROTA_VECTORS: process.env.ROTA_VECTORS ?? join(root, '..', 'tests', 'vectors'),
      ROTA_TRACES: process.env.ROTA_TRACES ?? join(root, '..', 'target', 'conformance', 'traces.json'),
    },
  })
  if (run.status !== 0) failed = true

  if (filter === undefined || 'types'.includes(filter)) {
    step('tsc --noEmit: the declarations and a typed usage example')
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
    const typeRoots = join(root, 'node_modules', '@types')
    /** tsc on the project's `config`; then, when it compiles, `emitted` (a file tsc wrote) run on this Node. Whether both passed. */
    const compile = (config, emitted) => {
      const tscRun = spawnSync(process.execPath, [tsc, '-p', join(project, config), '--typeRoots', typeRoots], { cwd: project, stdio: 'inherit' })
      if (tscRun.status !== 0) return false
      return emitted === undefined || spawnSync(process.execPath, [join(project, emitted)], { cwd: project, stdio: 'inherit' }).status === 0
    }
    if (!compile('tsconfig.json')) failed = true

    step('tsc --noEmit: a misspelt role must fail to compile (the document narrows Role)')
    const misspelt = spawnSync(
      process.execPath,
      [tsc, '-p', join(project, 'tsconfig.misspelt.json'), '--typeRoots', typeRoots, '--pretty', 'false'],
      { cwd: project, encoding: 'utf8' },
    )
    const expected = /misspelt-role\.ts\(\d+,\d+\): error TS2345: Argument of type '"codr"' is not assignable to parameter of type '"coder" \| "judge"'/
    if (misspelt.status === 0 || !expected.test(misspelt.stdout) || misspelt.stdout.trim().split('\n').length !== 1) {
      console.error(`    expected exactly one error, ${expected}; tsc said (status ${misspelt.status}):\n${misspelt.stdout}${misspelt.stderr}`)
      failed = true
    } else {
      console.log(`    ok: ${misspelt.stdout.trim()}`)
    }

    step('`using` in TypeScript, lowered by tsc, run on this Node')
    if (!compile('tsconfig.using.json', join('out', 'using.js'))) failed = true

    step('rota/effect: a program written against the roster seed\'s types compiles (--strict, exactOptionalPropertyTypes)')
    // `effect` is an optional peer dependency: the project gets the dev copy (or ROTA_EFFECT_MODULES').
    const effectLink = join(project, 'node_modules', 'effect')
    if (!existsSync(effectLink)) symlinkSync(join(process.env.ROTA_EFFECT_MODULES ?? join(root, 'node_modules'), 'effect'), effectLink, 'dir')
    if (!compile('tsconfig.effect.json')) failed = true

    step('exactOptionalPropertyTypes: options given as `undefined` compile, and run as absent ones')
    if (!compile('tsconfig.exact.json', join('out-exact', 'exact.js'))) failed = true
  }
} catch (error) {
  console.error(error)
  failed = true
} finally {
  if (work === undefined) {
    // nothing was made
  } else if (keep || failed) {
    console.log(`\n(test project kept at ${work})`)
    writeFileSync(join(work, 'KEEP'), '')
  } else {
    rmSync(work, { recursive: true, force: true })
  }
}
console.log(failed ? '\nnpm tests FAILED' : '\nnpm tests passed')
process.exit(failed ? 1 : 0)
