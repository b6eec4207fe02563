// A 200-hour trace (about 75,000 steps, 30 MB: the size of `rota simulate --hours 200`)
// opens with a progress bar, and the page answers meanwhile: the bar is painted at
// many values through parsing and replaying, and Cancel stops a load half way.
// (How long it takes is a benchmark's business: visualizer/bench/load-trace.mjs.)

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { statSync } from 'node:fs'
import { join } from 'node:path'
import * as rota from '../../src/node.js'
import { open, ready, SHOTS } from './harness.mjs'
import { writeSimulatedTrace } from './simulate.mjs'

let b
let file
let steps

before(async () => {
  b = await open()
  file = join(SHOTS, 'simulated-200h.json')
  steps = writeSimulatedTrace(rota.Policy, { hours: 200, seed: 1, out: file }).steps
})

after(async () => {
  await b?.close()
})

/** Records, at every painted frame, the loading bar's phase and value (when it changed). */
const recordFrames = (page) =>
  page.evaluate(() => {
    const seen = []
    window.__loadFrames = seen
    window.__stopFrames = false
    let last = ''
    const tick = (t) => {
      const box = document.querySelector('#trace-loading')
      const phase = box.hidden ? 'hidden' : box.dataset.phase
      const value = Number(document.querySelector('#trace-progress').value)
      const key = `${phase}:${value}`
      if (key !== last) seen.push({ t, phase, value })
      last = key
      if (!window.__stopFrames) requestAnimationFrame(tick)
    }
    requestAnimationFrame(tick)
  })
const recorded = (page) => page.evaluate(() => ((window.__stopFrames = true), window.__loadFrames))

describe('a long trace', { timeout: 600_000 }, () => {
  test('loads with a progress bar painted through parsing and replaying', async () => {
    const { page, url, errors } = b
    assert.ok(steps > 60_000, `a long trace (${steps} steps, ${(statSync(file).size / 1e6).toFixed(1)} MB)`)
    await ready(page, url)
    await page.click('#mode-replay')
    await recordFrames(page)
    await page.setInputFiles('#trace-file', file)
    await page.waitForSelector('#trace-loading[data-phase="replaying"]')
    await b.shot('15-long-trace-loading')
    await page.waitForSelector('#rp-verify[data-verified="ok"]', { timeout: 300_000 })
    await page.waitForSelector('#trace-loading', { state: 'hidden' })
    const frames = await recorded(page)
    const values = (phase) => frames.filter((f) => f.phase === phase).map((f) => f.value)
    for (const phase of ['parsing', 'replaying']) {
      const seen = values(phase)
      assert.ok(new Set(seen).size >= 5, `${phase}: the bar was painted at ${new Set(seen).size} values (${seen.join(', ')})`)
    }
    const shown = frames.filter((f) => f.phase !== 'hidden').map((f) => f.value)
    assert.deepEqual(shown, [...shown].sort((x, y) => x - y), 'the bar only moves forward')
    assert.ok(frames.some((f) => f.phase === 'drawing'), 'the bar says when the chart is drawn')
    assert.equal(await page.getAttribute('#rp-pos', 'data-length'), String(steps))
    const loadMs = Number(await page.getAttribute('#trace-loading', 'data-load-ms'))
    console.log(`${steps} steps loaded in ${(loadMs / 1000).toFixed(1)} s (this machine, now)`)
    await page.locator('#chart').scrollIntoViewIfNeeded()
    await b.shot('15-long-trace-loaded')

    // the loaded replay moves: the end, then the middle
    await page.click('#rp-end')
    await page.waitForSelector(`#rp-pos[data-position="${steps}"]`)
    const middle = Math.floor(steps / 2)
    await page.fill('#rp-scrub', String(middle))
    await page.waitForSelector(`#rp-pos[data-position="${middle}"]`)
    assert.deepEqual(errors, [])
  })

  test('Cancel (or Explore) stops a load half way; the page answers it', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await page.click('#mode-replay')
    await page.setInputFiles('#trace-file', file)
    await page.waitForSelector('#trace-loading[data-phase="replaying"]')
    await page.click('#trace-cancel')
    await page.waitForSelector('#trace-loading', { state: 'hidden' })
    assert.match(await page.textContent('#status'), /stopped loading the trace/)
    assert.equal(await page.isHidden('#replay-body'), true)
    assert.equal(await page.evaluate(() => window.rotaVisualizer.replay), null)
    // and a trace opened afterwards loads as ever
    await page.click('#trace-from-session')
    await page.waitForSelector('#rp-verify[data-verified]')

    // going back to Explore mid-load stops it too (it would pull the page back to Replay)
    await page.setInputFiles('#trace-file', file)
    await page.waitForSelector('#trace-loading[data-phase="replaying"]')
    await page.click('#mode-explore')
    await page.waitForSelector('#trace-loading', { state: 'hidden' })
    await page.waitForSelector('body[data-mode="explore"]')
    assert.match(await page.textContent('#status'), /^explore: the session/)
    assert.deepEqual(errors, [])
  })
})
