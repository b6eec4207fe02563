// The Node runner: every vector and every random trace through the npm package as a
// user installs it (`import { Policy } from 'rota'` resolves to the installed tarball's
// Node entry), calling `Policy#handleJson` with each input's JSON text. Started by
// run.mjs, which sets ROTA_VECTORS and ROTA_TRACES.

import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { Policy } from 'rota'
import { PolicyHost, replayTraces, runVectors } from './shared.mjs'

const vectorsDir = process.env.ROTA_VECTORS
const tracesFile = process.env.ROTA_TRACES

function loadVectors() {
  return readdirSync(vectorsDir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(vectorsDir, f), 'utf8')))
}

test('every vector on node (the npm package, handleJson)', () => {
  const vectors = loadVectors()
  assert.ok(vectors.length >= 60, `expected at least 60 vectors, found ${vectors.length}`)
  const failures = runVectors(new PolicyHost(Policy, 'node'), vectors)
  assert.equal(failures.length, 0, `${failures.length} of ${vectors.length} vectors failed on node:\n\n${failures.join('\n\n')}`)
})

test('random traces on node match native, byte for byte', () => {
  const file = JSON.parse(readFileSync(tracesFile, 'utf8'))
  assert.equal(file.traces.length, file.count)
  const failures = replayTraces(new PolicyHost(Policy, 'node'), file)
  assert.equal(failures.length, 0, `random traces differ between native and node (seed ${file.seed}):\n\n${failures.join('\n\n')}`)
})
