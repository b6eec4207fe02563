// How long the page takes to open a long trace, and how long its main thread is ever
// held while doing it: a 200-hour simulated trace (visualizer/test/simulate.mjs, the
// format of `rota simulate --trace`) opened with "Open trace…", in Debian's Chromium.
//
//   node visualizer/bench/load-trace.mjs [--hours 200] [--runs 3] [--trace FILE]
//
// Prints, per run: the time from choosing the file to the verified replay and its chart
// on screen, the frames painted meanwhile, and the longest gaps between two frames (the
// longest the page could not answer a click) with the loading phase around each. The
// figures are the machine's, not a test.

import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import * as rota from '../../src/node.js'
import { open, ready, SHOTS } from '../test/harness.mjs'
import { writeSimulatedTrace } from '../test/simulate.mjs'

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? process.argv[i + 1] : fallback
}
const hours = Number(arg('hours', 200))
const runs = Number(arg('runs', 3))
const file = arg('trace', join(SHOTS, `simulated-${hours}h.json`))

const b = await open()
try {
  if (!existsSync(file)) {
    const { steps, bytes } = writeSimulatedTrace(rota.Policy, { hours, seed: 1, out: file })
    console.log(`wrote ${file}: ${steps} steps, ${(bytes / 1e6).toFixed(1)} MB`)
  }
  console.log(`${file}: ${(statSync(file).size / 1e6).toFixed(1)} MB`)
  const rows = []
  for (let run = 1; run <= runs; run++) {
    const { page, url } = b
    await ready(page, url)
    await page.click('#mode-replay')
    // A frame clock in the page: every frame's time while the trace loads.
    await page.evaluate(() => {
      const frames = []
      window.__frames = frames
      const tick = (t) => {
        const box = document.querySelector('#trace-loading')
        frames.push([t, box && !box.hidden ? box.dataset.phase ?? '' : 'idle'])
        if (!window.__stopFrames) requestAnimationFrame(tick)
      }
      window.__stopFrames = false
      requestAnimationFrame(tick)
    })
    const t0 = Date.now()
    await page.setInputFiles('#trace-file', file)
    await page.waitForSelector('#rp-verify[data-verified]', { timeout: 300_000 })
    await page.waitForSelector('#trace-loading', { state: 'hidden', timeout: 60_000 }) // the chart is drawn (no such bar before issue 17)
    const ms = Date.now() - t0
    const { frames, longest, where } = await page.evaluate(() => {
      window.__stopFrames = true
      const f = window.__frames
      let longest = 0
      const gaps = []
      for (let i = 1; i < f.length; i++) gaps.push([f[i][0] - f[i - 1][0], `${f[i - 1][1]} → ${f[i][1]} at +${Math.round(f[i - 1][0] - f[0][0])} ms`])
      gaps.sort((a, b) => b[0] - a[0])
      longest = gaps[0]?.[0] ?? 0
      const where = gaps.slice(0, 3).map(([ms, at]) => `${Math.round(ms)} ms ${at}`).join('; ')
      return { frames: f.length, longest: Math.round(longest), where }
    })
    const steps = await page.getAttribute('#rp-pos', 'data-length')
    rows.push({ run, steps: Number(steps), loadMs: ms, frames, longestFrameGapMs: longest })
    console.log(`run ${run}: ${steps} steps loaded in ${(ms / 1000).toFixed(2)} s; ${frames} frames painted, longest gap ${longest} ms (${where})`)
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  console.log(`median: load ${(median(rows.map((r) => r.loadMs)) / 1000).toFixed(2)} s, longest frame gap ${median(rows.map((r) => r.longestFrameGapMs))} ms`)
} finally {
  await b.close()
}
