// The README's browser example, bundled with esbuild (aliased to rota/inline), webpack
// and Vite from the installed tarball, each bundle served from 127.0.0.1 and loaded in
// Chromium (Debian's, through playwright-core): the page must show the lease's answer
// with no error.
//
//   npm run test:browser   (CHROMIUM_PATH overrides /usr/bin/chromium)

import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { extname, join, normalize, sep } from 'node:path'
import { after, before, test } from 'node:test'
import { chromium } from 'playwright-core'
import { bundleForBrowser, readmeExamples } from '../bundle.mjs'
import { PACKAGE_ROOT, packAndInstall } from '../pack.mjs'

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' }

let packed
let bundles
let server
let base
let context
let profile

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: make setup-browser`)
  packed = packAndInstall({ quiet: true })
  const examples = readmeExamples(join(packed.project, 'node_modules', 'rota', 'README.md'))
  assert.ok(examples.browser, 'the README has the browser example')
  bundles = await bundleForBrowser({ root: PACKAGE_ROOT, dir: join(packed.project, 'bundles', 'browser'), example: examples.browser })
  // /<bundler>/<file> serves bundles[<bundler>]/<file>.
  server = createServer((request, response) => {
    const [, name, ...rest] = new URL(request.url, 'http://localhost').pathname.split('/')
    const dir = bundles[name]
    const path = dir && normalize(join(dir, rest.join('/') || 'index.html'))
    if (!path || !path.startsWith(dir + sep) || !existsSync(path)) {
      response.writeHead(404).end('not found')
      return
    }
    response.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' })
    response.end(readFileSync(path))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${server.address().port}`
  profile = mkdtempSync(join(tmpdir(), 'rota-bundlers-'))
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  })
})

after(async () => {
  await context?.close().catch(() => {})
  await new Promise((resolve) => (server ? server.close(resolve) : resolve()))
  if (profile) rmSync(profile, { recursive: true, force: true })
  if (packed) rmSync(packed.work, { recursive: true, force: true })
})

for (const name of ['esbuild', 'webpack', 'vite']) {
  test(`the README browser example bundled with ${name} runs in Chromium`, async () => {
    const page = await context.newPage()
    const errors = []
    page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`))
    page.on('console', (message) => message.type() === 'error' && errors.push(`console: ${message.text()}`))
    page.on('requestfailed', (request) => errors.push(`request failed: ${request.url()}`))
    try {
      const started = Date.now()
      await page.goto(`${base}/${name}/`)
      await page.waitForFunction(() => document.body.textContent.includes('took coder'), null, { timeout: 15_000 }).catch(() => {})
      console.log(`${name}: the page answered in ${Date.now() - started} ms`)
      assert.deepEqual(errors, [])
      assert.equal((await page.textContent('body')).trim(), 'local took coder')
    } finally {
      await page.close()
    }
  })
}
