// The download-size budget of the browser build, as a test that fails: at most
// 200,000 bytes gzipped. Measured on the module the installed package ships, gzip
// level 9 as Node's zlib computes it (the figure `npm run bench` prints beside it).

import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { gzipSync } from 'node:zlib'

export const WEB_BUDGET_GZIPPED = 200_000

test(`the web build's .wasm is at most ${WEB_BUDGET_GZIPPED.toLocaleString('en')} bytes gzipped`, () => {
  const packageRoot = dirname(createRequire(import.meta.url).resolve('rota/package.json'))
  const wasm = readFileSync(join(packageRoot, 'pkg', 'web', 'rota_wasm_bg.wasm'))
  const gzipped = gzipSync(wasm, { level: 9 }).length
  console.log(`web build: ${wasm.length} bytes raw, ${gzipped} bytes gzipped (budget ${WEB_BUDGET_GZIPPED})`)
  assert.ok(wasm.length > 10_000, `the web .wasm is ${wasm.length} bytes: not a real build`)
  assert.ok(
    gzipped <= WEB_BUDGET_GZIPPED,
    `the web build's .wasm is ${gzipped} bytes gzipped, over the ${WEB_BUDGET_GZIPPED}-byte budget`,
  )
})
