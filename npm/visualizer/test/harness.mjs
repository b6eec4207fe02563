// Test harness: the static server, Debian's Chromium through playwright-core (no
// browser download), a fresh profile per run, screenshots under test-output/visualizer/.

import { mkdtempSync, mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'
import { startServer } from '../serve.mjs'

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url))
export const SHOTS = join(REPO_ROOT, 'test-output', 'visualizer')
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium'

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
]

/**
 * Starts the server and a browser; returns `{ url, context, page, shot(name), errors, close() }`.
 * `errors` collects page errors and console errors: tests assert it stays empty.
 */
export async function open({ width = 1500, height = 1100 } = {}) {
  const server = await startServer({ port: 0, quiet: true })
  const profile = mkdtempSync(join(tmpdir(), 'rota-visualizer-'))
  // launchPersistentContext is playwright's way to pass a fresh --user-data-dir.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width, height },
    acceptDownloads: true,
  })
  const page = context.pages()[0] ?? (await context.newPage())
  page.setDefaultTimeout(15_000)
  const errors = []
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`))
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`)
  })
  mkdirSync(SHOTS, { recursive: true })
  return {
    url: server.url,
    context,
    page,
    errors,
    shot: (name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true }),
    async close() {
      await context.close().catch(() => {})
      await server.close()
      rmSync(profile, { recursive: true, force: true })
    },
  }
}

/** Opens the visualizer and waits until the core is loaded and a session runs. */
export async function ready(page, url) {
  await page.goto(url)
  await page.waitForSelector('body[data-ready="true"]')
  await page.waitForSelector('.exec[data-executor]')
}
