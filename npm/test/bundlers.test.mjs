// The README's Node example, bundled with esbuild (ESM and CommonJS), webpack and Vite
// (SSR build) from the installed package, and each bundle run with node: the wasm is
// found with no file beside the bundle (its bytes are embedded), YAML read, state kept.

import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { bundleForNode, readmeExamples } from './bundle.mjs'

const root = process.env.ROTA_PACKAGE_ROOT
const project = process.env.ROTA_TEST_PROJECT
const skip = (root === undefined || project === undefined) && 'run through test/run.mjs'

test('the README example bundled for Node (esbuild esm/cjs, webpack, vite) runs', { skip }, async (t) => {
  const examples = readmeExamples(join(project, 'node_modules', 'rota', 'README.md'))
  assert.ok(examples.node, 'the README has the Node example')
  const dir = join(project, 'bundles', 'node')
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const bundles = await bundleForNode({ root, dir, example: examples.node })
  for (const [name, file] of Object.entries(bundles)) {
    // Each bundle runs in a directory of its own, with only the roster file beside it.
    const cwd = join(dir, 'run', name.replace(/\W+/g, '-'))
    mkdirSync(cwd, { recursive: true })
    writeFileSync(join(cwd, 'roster.yaml'), 'executors:\n  - { id: local, harness: lm-studio, roles: [coder], slots: 2 }\n  - { id: claude, harness: claude, roles: [coder] }\n')
    const run = spawnSync(process.execPath, [file], { cwd, encoding: 'utf8', timeout: 30_000 })
    assert.equal(run.status, 0, `${name}: exit ${run.status}\n${run.stderr}`)
    assert.deepEqual(
      run.stdout.trim().split('\n').filter((l) => !l.startsWith('roster: ')),
      ['local did story-1', 'claude did story-2', 'local did story-3'],
      `${name}: ${run.stdout}`,
    )
  }
})
