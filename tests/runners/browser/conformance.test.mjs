// The browser runner: the npm package's web build in headless Chromium (Debian's
// /usr/bin/chromium through playwright-core). The packed tarball is installed into a
// fresh project (npm/test/pack.mjs), a local static server on 127.0.0.1 serves it
// with the right content types (application/wasm for the module), together with a
// test page, tests/runners/shared.mjs, the vectors and the trace file; the page runs
// every vector and every random trace through `Policy#handleJson`.
//
//   cd tests/runners/browser && npm install && npm test   (tests/run.sh does this)
//
// CHROMIUM_PATH overrides /usr/bin/chromium; ROTA_TRACES the trace file.

import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { dirname, extname, join, normalize, resolve, sep } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'
import { packAndInstall } from '../../../npm/test/pack.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, '..', '..', '..')
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const VECTORS = join(root, 'tests', 'vectors')
const TRACES = process.env.ROTA_TRACES ?? join(root, 'target', 'conformance', 'traces.json')
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
}

let packed
let server
let base
let profile
let context
let page
const pageErrors = []

/** A file under `dir`, or null when the path leaves it or does not exist. */
function inside(dir, rel) {
  const path = normalize(join(dir, rel))
  return path.startsWith(dir + sep) && existsSync(path) ? path : null
}

function serve(request, response) {
  const url = new URL(request.url, 'http://127.0.0.1')
  const send = (path) => {
    if (path === null) return response.writeHead(404).end('not found')
    response.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream', 'cache-control': 'no-store' })
    response.end(readFileSync(path))
  }
  const p = decodeURIComponent(url.pathname)
  if (p === '/') return send(join(here, 'page.html'))
  if (p === '/shared.mjs') return send(join(here, '..', 'shared.mjs'))
  if (p === '/traces.json') return send(existsSync(TRACES) ? TRACES : null)
  if (p === '/vectors/' || p === '/vectors/state-file/') {
    const names = readdirSync(join(VECTORS, p.slice('/vectors/'.length))).filter((f) => f.endsWith('.json')).sort()
    return response.writeHead(200, { 'content-type': TYPES['.json'] }).end(JSON.stringify(names))
  }
  if (p.startsWith('/vectors/')) return send(inside(VECTORS, p.slice('/vectors/'.length)))
  if (p.startsWith('/rota/')) return send(inside(join(packed.project, 'node_modules', 'rota'), p.slice('/rota/'.length)))
  return send(null)
}

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: make setup-browser`)
  assert.ok(existsSync(TRACES), `${TRACES} is missing: cargo run -p rota-conformance -- traces`)
  packed = packAndInstall({ quiet: true })
  server = createServer(serve)
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok))
  base = `http://127.0.0.1:${server.address().port}`
  profile = mkdtempSync(join(tmpdir(), 'rota-conformance-chromium-'))
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  })
  page = context.pages()[0] ?? (await context.newPage())
  page.on('pageerror', (error) => pageErrors.push(String(error)))
  page.on('console', (message) => {
    if (message.type() === 'error') pageErrors.push(message.text())
  })
  await page.goto(`${base}/`)
  await page.waitForFunction(() => window.conformanceReady === true, null, { timeout: 30_000 })
})

after(async () => {
  await context?.close()
  await new Promise((ok) => (server ? server.close(ok) : ok()))
  if (profile) rmSync(profile, { recursive: true, force: true })
  if (packed) rmSync(packed.work, { recursive: true, force: true })
})

test('every vector on the web build in Chromium', { timeout: 120_000 }, async () => {
  const result = await page.evaluate(() => window.runConformanceVectors())
  assert.deepEqual(pageErrors, [], 'the page logged errors')
  assert.ok(result.count >= 60, `expected at least 60 vectors, found ${result.count}`)
  assert.equal(result.failures.length, 0, `${result.failures.length} of ${result.count} vectors failed in the browser:\n\n${result.failures.join('\n\n')}`)
  // The browser build leaves out the shared log's rules (Node's, feature `log`): only
  // the vectors that ask them are left out, and each of those is run by Node and wasmtime.
  assert.equal(result.hasLog, false, 'the web build has no Policy.logJson')
  assert.ok(result.askTheLog.length >= 3, `the shared log's vectors: ${result.askTheLog}`)
  assert.deepEqual(result.skipped, result.askTheLog)
  console.log(`browser: ${result.count - result.skipped.length} vectors run; left out (the shared log's rules are the Node build's): ${result.skipped.join(', ')}`)
})

test('every state-file vector on the web build in Chromium', { timeout: 60_000 }, async () => {
  const result = await page.evaluate(() => window.runStateFileVectors())
  assert.deepEqual(pageErrors, [], 'the page logged errors')
  assert.ok(result.count >= 5, `expected at least 5 state-file vectors, found ${result.count}`)
  assert.equal(result.failures.length, 0, `${result.failures.length} state-file cases failed in the browser:\n\n${result.failures.join('\n\n')}`)
})

test('random traces on the web build in Chromium match native', { timeout: 300_000 }, async () => {
  const result = await page.evaluate(() => window.runConformanceTraces())
  assert.deepEqual(pageErrors, [], 'the page logged errors')
  assert.equal(result.failures.length, 0, `random traces differ between native and the browser (seed ${result.seed}):\n\n${result.failures.join('\n\n')}`)
})
