// The browser entry in a real browser (Debian's Chromium through playwright-core):
// the packed tarball installed into a fresh project, served from 127.0.0.1, imported
// as `rota` through an import map (what a bundler does with the package's `default`
// export condition). The same driver as in Node, minus the file system: state through
// `webStorageState(localStorage)`, probes with the page's `fetch`.
//
//   npm run test:browser   (CHROMIUM_PATH overrides /usr/bin/chromium)

import assert from 'node:assert/strict'
import { readFileSync, rmSync, mkdtempSync, existsSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { extname, join, normalize, sep } from 'node:path'
import { after, before, test } from 'node:test'
import { chromium } from 'playwright-core'
import { packAndInstall } from '../pack.mjs'

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html', '.json': 'application/json' }

let packed
let server
let base
let context
let page
let profile
const errors = []
const health = { status: 503, requests: 0 }

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: make setup-browser`)
  packed = packAndInstall({ quiet: true })
  writeFileSync(
    join(packed.project, 'index.html'),
    `<!doctype html><meta charset="utf-8"><title>rota</title><link rel="icon" href="data:,">
<script type="importmap">{ "imports": { "rota": "/node_modules/rota/src/browser.js" } }</script>
<p>rota browser test</p>`,
  )
  server = createServer((request, response) => {
    const url = new URL(request.url, 'http://localhost')
    if (url.pathname === '/health') {
      health.requests += 1
      response.writeHead(health.status, { 'content-type': 'text/plain' }).end('health')
      return
    }
    const path = normalize(join(packed.project, url.pathname === '/' ? 'index.html' : url.pathname))
    if (!path.startsWith(packed.project + sep) || !existsSync(path)) {
      response.writeHead(404).end('not found')
      return
    }
    response.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' })
    response.end(readFileSync(path))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${server.address().port}`
  profile = mkdtempSync(join(tmpdir(), 'rota-browser-'))
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  })
  page = context.pages()[0] ?? (await context.newPage())
  page.setDefaultTimeout(15_000)
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`))
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`)
  })
  await page.goto(`${base}/`)
})

after(async () => {
  await context?.close().catch(() => {})
  await new Promise((resolve) => (server ? server.close(resolve) : resolve()))
  if (profile) rmSync(profile, { recursive: true, force: true })
  if (packed) rmSync(packed.work, { recursive: true, force: true })
})

test('the package loads in Chromium: the raw Policy class and the utilities', async () => {
  const result = await page.evaluate(async () => {
    const rota = await import('rota')
    const policy = new rota.Policy({ executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] })
    const step = policy.handle({ type: 'lease', now: 1_000, id: 'r1', role: 'coder' })
    const text = policy.handleJson('{"type":"release","now":1001,"lease":1}')
    let error
    try {
      policy.handle({ type: 'lease', now: 1_002, id: 'r2', role: 'chef' })
    } catch (e) {
      error = { code: e.code, isRota: e instanceof rota.RotaError, message: e.message }
    }
    // The browser build leaves the import out (its download budget); a clone is its checkpoint.
    let importError
    try {
      rota.Policy.importState(policy.exportState())
    } catch (e) {
      importError = { code: e.code, isRota: e instanceof rota.RotaError }
    }
    const clone = policy.clone()
    return {
      exports: Object.keys(rota).sort(),
      importError,
      cloneHash: clone.stateHash() === policy.stateHash(),
      granted: step.outputs[0],
      text,
      error,
      duration: rota.parseDuration('90s'),
      merged: rota.merge({ executors: [{ id: 'a', harness: 'x', roles: ['coder'] }] }, { executors: [{ id: 'a', disabled: true }] }),
    }
  })
  assert.ok(result.exports.includes('Roster') && result.exports.includes('webStorageState'))
  assert.ok(!result.exports.includes('fileStateStore'), 'no file system in the browser entry')
  assert.deepEqual(result.importError, { code: 'NOT_IN_BUILD', isRota: true })
  assert.equal(result.cloneHash, true)
  assert.equal(result.granted.type, 'granted')
  assert.equal(result.granted.executor, 'a')
  assert.match(result.text, /^\{"outputs":\[/)
  assert.deepEqual(result.error.code, 'UNKNOWN_ROLE')
  assert.equal(result.error.isRota, true)
  assert.equal(result.duration, 90_000)
  assert.deepEqual(result.merged, { executors: [] })
  assert.deepEqual(errors, [])
})

test('the Roster driver in Chromium: fair queue, AbortSignal, timeoutMs, events', async () => {
  const result = await page.evaluate(async () => {
    const { Roster } = await import('rota')
    const events = []
    const roster = await Roster.create({
      document: { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], slots: 2 }] },
      onEvent: (e) => events.push(e.name),
    })
    const order = []
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        roster.lease('coder').then(async (lease) => {
          order.push(i)
          await null
          lease.release()
        }),
      ),
    )
    const held = [await roster.lease('coder'), await roster.lease('coder')]
    const controller = new AbortController()
    const aborted = roster.lease('coder', { signal: controller.signal }).catch((e) => e.name)
    controller.abort()
    const timedOut = await roster.lease('coder', { timeoutMs: 30 }).catch((e) => e.code)
    const tryNothing = await roster.tryLease('coder')
    for (const lease of held) lease[Symbol.dispose]()
    const available = roster.available('coder')
    await roster.close()
    return {
      inOrder: order.every((value, index) => value === index) && order.length === 50,
      aborted: await aborted,
      timedOut,
      tryNothing: tryNothing === undefined,
      available,
      events: [...new Set(events)].sort(),
    }
  })
  assert.deepEqual(result, {
    inOrder: true,
    aborted: 'AbortError',
    timedOut: 'TIMEOUT',
    tryNothing: true,
    available: 2,
    events: ['cancelled', 'granted', 'released', 'timedOut', 'unavailable', 'waiting'],
  })
  assert.deepEqual(errors, [])
})

test('state in localStorage survives a new roster; a corrupt entry is moved aside; probes use fetch', async () => {
  health.status = 200
  const result = await page.evaluate(async (healthUrl) => {
    const { Roster, webStorageState } = await import('rota')
    localStorage.clear()
    const document = {
      executors: [
        { id: 'a', harness: 'pi', roles: ['coder'] },
        { id: 'b', harness: 'pi', roles: ['coder'], health: healthUrl },
      ],
    }
    const first = await Roster.create({ document, state: webStorageState(localStorage, 'rota') })
    first.exclude('a', { reason: 'maintenance' })
    await first.idle()
    const saved = JSON.parse(localStorage.getItem('rota')).value
    const back = new Promise((resolve) => first.on('event', (e) => e.name === 'back' && resolve(e.fields.executors[0])))
    first.report('b', Object.assign(new Error('502: backend is unhealthy'), { status: 502 }))
    const cameBack = await back
    await first.close()

    const second = await Roster.create({ document, state: webStorageState(localStorage, 'rota') })
    const restored = second.snapshot().executors.find((e) => e.id === 'a').exclusion?.reason
    await second.close()

    localStorage.setItem('rota', '{ not json')
    const corrupt = []
    const third = await Roster.create({
      document,
      state: webStorageState(localStorage, 'rota'),
      onEvent: (e) => e.name === 'stateFileCorrupt' && corrupt.push(e.fields.movedTo),
    })
    await third.close()
    return {
      saved: saved.exclusions.map((e) => [e.id, e.kind]),
      cameBack,
      restored,
      corrupt,
      aside: corrupt.length === 1 ? localStorage.getItem(corrupt[0]) : null,
      cleared: localStorage.getItem('rota'),
    }
  }, `${base}/health`)
  assert.deepEqual(result.saved, [['a', 'manual']])
  assert.equal(result.cameBack, 'b')
  assert.ok(health.requests >= 1, 'the page probed the health URL')
  assert.equal(result.restored, 'maintenance')
  assert.equal(result.corrupt.length, 1)
  assert.match(result.corrupt[0], /^rota\.corrupt-\d{4}-\d\d-\d\dT\d{6}\.\d{3}Z$/)
  assert.equal(result.aside, '{ not json')
  assert.equal(result.cleared, null)
  assert.deepEqual(errors, [])
})
