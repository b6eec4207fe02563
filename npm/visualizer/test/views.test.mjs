// The visualizer's views as a user reads them (issue 17, items 12-14): the state file
// as the persists fold, a clean Replay before a trace is open, a one-line status, the
// explain table's columns, chart ticks that never overlap, labels that repeat nothing,
// and what a persist says. Each check waits for a selector or a condition.
//
//   npm run test:browser      (from npm/; needs `make wasm` and /usr/bin/chromium)

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import * as rota from '../../src/node.js'
import { open, ready, SHOTS } from './harness.mjs'
import { writeSimulatedTrace } from './simulate.mjs'

let b

before(async () => {
  b = await open()
})

after(async () => {
  await b?.close()
})

const inputs = (page) => page.evaluate(() => window.rotaVisualizer.session.steps.length)
async function click(page, selector, times = 1) {
  for (let i = 0; i < times; i++) {
    const n = await inputs(page)
    await page.click(selector)
    await page.waitForFunction((k) => window.rotaVisualizer.session.steps.length > k, n)
  }
}
async function report(page, executor, kind) {
  await page.selectOption('#exec-select', executor)
  await click(page, `[data-failure="${kind}"]`)
}

/**
 * The state file the page shows (`file`: the seed envelope's `value`), the ids of its
 * entries the last persist wrote, and whether its text is the core's rendering of those
 * entries (what a host writes, byte for byte).
 */
async function stateFile(page) {
  const shown = await page.evaluate(() => ({
    text: document.querySelector('#persist').textContent,
    fresh: [...document.querySelectorAll('#persist .file-entry.fresh')].map((e) => e.dataset.id),
    note: document.querySelector('#persist-note')?.textContent ?? '',
  }))
  const file = JSON.parse(shown.text).value
  assert.equal(shown.text, rota.stateFile.render(file.exclusions), "the panel is the core's file text")
  return { ...shown, file }
}

/** What the core says should be in the file now: every lasting exclusion. */
const lastingExclusions = (page) =>
  page.evaluate(() =>
    window.rotaVisualizer
      .snapshot()
      .executors.filter((e) => e.exclusion && e.exclusion.kind !== 'run' && !e.draining)
      .map((e) => ({ id: e.id, kind: e.exclusion.kind }))
      .sort((x, y) => x.id.localeCompare(y.id)),
  )
const idsAndKinds = (file) => file.exclusions.map((e) => ({ id: e.id, kind: e.kind })).sort((x, y) => x.id.localeCompare(y.id))

/** Pairs of elements (by their text's box) closer than `gap` px, or overlapping. */
const crowded = (page, selector, gap) =>
  page.$$eval(
    selector,
    (els, gap) => {
      const boxes = els.map((el) => {
        const range = document.createRange()
        range.selectNodeContents(el)
        const r = range.getBoundingClientRect()
        return { text: el.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom }
      })
      const bad = []
      for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
          const [a, c] = [boxes[i], boxes[j]]
          const sameRow = a.top < c.bottom && c.top < a.bottom
          const apart = Math.max(c.left - a.right, a.left - c.right)
          if (sameRow && apart < gap) bad.push(`"${a.text}" and "${c.text}" ${apart.toFixed(1)} px apart`)
        }
      }
      return bad
    },
    gap,
  )

describe('the visualizer views', () => {
  test('the state file is every persist folded: entries a later persist did not touch stay', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await page.click('#persist-box summary')
    await page.waitForFunction(() => document.querySelector('#persist').textContent === 'nothing persisted yet')
    await report(page, 'codex', 'rateLimit')
    await report(page, 'codex', 'rateLimit')
    await report(page, 'codex', 'rateLimit') // codex excluded until: persist [codex]
    await report(page, 'claude-opus', 'usageLimit') // persist [claude-opus] only
    await page.selectOption('#exec-select', 'ci-worker')
    await click(page, '#exclude') // persist [ci-worker]
    let shown = await stateFile(page)
    assert.deepEqual(shown.file.exclusions.map((e) => e.id), ['codex', 'claude-opus', 'ci-worker'])
    assert.deepEqual(shown.fresh, ['ci-worker'], 'the last persist wrote ci-worker only')
    assert.deepEqual(idsAndKinds(shown.file), await lastingExclusions(page))
    assert.match(shown.note, /3 persists folded/)
    assert.match(shown.note, /the other entries kept from earlier persists/)

    // a removal: resume ci-worker; the persist carries only its id, with no entry
    await click(page, '#resume')
    shown = await stateFile(page)
    assert.deepEqual(shown.file.exclusions.map((e) => e.id), ['codex', 'claude-opus'])
    assert.deepEqual(shown.fresh, [])
    assert.match(shown.note, /removed ci-worker/)
    assert.deepEqual(idsAndKinds(shown.file), await lastingExclusions(page))
    await page.locator('#persist-box').scrollIntoViewIfNeeded()
    await b.shot('12-state-file-folded')

    // Replay: the file at each position is the persists up to it
    await page.click('#mode-replay')
    await page.click('#trace-from-session')
    await page.waitForSelector('#rp-verify[data-verified="ok"]')
    await page.click('#rp-end')
    shown = await stateFile(page)
    assert.deepEqual(shown.file.exclusions.map((e) => e.id), ['codex', 'claude-opus'])
    assert.deepEqual(idsAndKinds(shown.file), await lastingExclusions(page))
    // back before the usage limit: codex alone
    const steps = await page.evaluate(() => window.rotaVisualizer.replay.trace.steps.map((s) => s.input.type === 'report' && s.input.failure.kind))
    const usage = steps.indexOf('usageLimit')
    await page.fill('#rp-scrub', String(usage))
    await page.waitForSelector(`#rp-pos[data-position="${usage}"]`)
    shown = await stateFile(page)
    assert.deepEqual(shown.file.exclusions.map((e) => e.id), ['codex'])
    assert.deepEqual(idsAndKinds(shown.file), await lastingExclusions(page))
    await page.fill('#rp-scrub', '0')
    await page.waitForFunction(() => document.querySelector('#persist').textContent === 'nothing persisted yet')
    assert.deepEqual(errors, [])
  })

  test('switching to Replay resets counts, explain, status and the state file', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await page.selectOption('#lease-role', 'coder')
    await click(page, '#lease-submit', 6) // four slots, two wait
    await page.waitForSelector('#queue tbody tr[data-request="r6"]')
    await report(page, 'codex', 'usageLimit')
    await page.click('#queue tbody tr[data-request="r5"]')
    await page.waitForSelector('#explain[data-request="r5"]')
    assert.equal(await page.textContent('#queue-count'), '2 waiting')

    await page.click('#mode-replay')
    await page.waitForSelector('body[data-mode="replay"]')
    assert.equal(await page.$$eval('#queue tbody tr', (rows) => rows.length), 0)
    assert.equal(await page.textContent('#queue-count'), 'empty')
    assert.equal(await page.textContent('#log-count'), '')
    assert.equal(await page.$$eval('#log li', (items) => items.length), 0)
    assert.equal(await page.getAttribute('#explain', 'data-request'), null)
    assert.match(await page.textContent('#explain'), /Click a waiting request or a role/)
    assert.equal(await page.textContent('#persist'), 'nothing persisted yet')
    assert.match(await page.textContent('#status'), /^replay: open a trace file/)
    assert.equal(await page.textContent('#clock-now'), '—')
    await b.shot('13-replay-reset')

    // and back: the session is as it was
    await page.click('#mode-explore')
    await page.waitForSelector('#queue tbody tr[data-request="r6"]')
    assert.equal(await page.textContent('#queue-count'), '2 waiting')
    assert.match(await page.textContent('#status'), /^explore: the session/)
    assert.deepEqual(errors, [])
  })

  test('a long status (a reload) stays one line: the page does not move', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    const layout = () =>
      page.evaluate(() => {
        const status = document.querySelector('#status')
        return {
          header: document.querySelector('header.top').getBoundingClientRect().height,
          mainTop: document.querySelector('main').getBoundingClientRect().top,
          statusHeight: status.getBoundingClientRect().height,
          lineHeight: parseFloat(getComputedStyle(status).lineHeight),
          overflows: status.scrollWidth > status.clientWidth,
          text: status.textContent,
          title: status.title,
        }
      })
    const before = await layout()
    await page.click('#overlay-box summary')
    await page.click('#overlay-example')
    await page.waitForFunction(() => document.querySelector('#overlay-editor').value.includes('sonnet-review'))
    await page.click('#overlay-merge')
    await page.waitForSelector('#doc-state[data-valid="true"]')
    await page.click('#doc-plan')
    await page.waitForSelector('#plan:not([hidden])')
    await click(page, '#doc-apply')
    await page.waitForSelector('#log li[data-name="reloaded"]')
    const afterReload = await layout()
    assert.ok(afterReload.statusHeight <= afterReload.lineHeight * 1.5, `the status is one line (${afterReload.statusHeight} px for ${afterReload.text.length} chars)`)
    assert.equal(afterReload.header, before.header, 'the header keeps its height')
    assert.equal(afterReload.mainTop, before.mainTop, 'the page below does not move')
    assert.ok(afterReload.overflows, `the reload's status is longer than the line (${afterReload.text.length} chars): the check means something`)
    assert.equal(afterReload.title, afterReload.text, 'the whole message is in the tooltip')
    await b.shot('14a-status-one-line')
    assert.deepEqual(errors, [])
  })

  test("the explain table's columns keep apart", async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await report(page, 'codex', 'rateLimit')
    await page.click('.role-chip[data-role="coder"]')
    await page.waitForSelector('#explain[data-role="coder"] tr[data-executor="codex"]')
    assert.deepEqual(await crowded(page, '#explain thead th', 8), [])
    assert.deepEqual(await page.$$eval('#explain thead th', (ths) => ths.map((th) => th.textContent)), ['executor', 'ok', 'prio', 'why not'])
    for (const id of ['claude-opus', 'codex', 'pi-gemini']) assert.deepEqual(await crowded(page, `#explain tbody tr[data-executor="${id}"] td`, 8), [], id)
    await page.locator('#explain').scrollIntoViewIfNeeded()
    await b.shot('14b-explain-columns')
    assert.deepEqual(errors, [])
  })

  test('chart axis labels never overlap on a long trace, on either axis, in a narrow window', async () => {
    const { page, url, errors } = b
    const file = join(SHOTS, 'simulated-30h.json')
    writeSimulatedTrace(rota.Policy, { hours: 30, seed: 3, out: file })
    await page.setViewportSize({ width: 1000, height: 1000 })
    try {
      await ready(page, url)
      await page.click('#mode-replay')
      await page.setInputFiles('#trace-file', file)
      await page.waitForSelector('#rp-verify[data-verified="ok"]', { timeout: 120_000 })
      await page.waitForSelector('#trace-loading', { state: 'hidden' })
      for (const axis of ['time', 'step']) {
        await page.selectOption('#rp-axis', axis)
        await page.waitForFunction(() => document.querySelectorAll('#chart .axis text').length > 0)
        const labels = await page.$$eval('#chart .axis text', (ts) => ts.map((t) => t.textContent))
        assert.ok(labels.length >= 3, `${axis}: at least three ticks (${labels.join(', ')})`)
        assert.deepEqual(await crowded(page, '#chart .axis text', 6), [], `${axis}: ${labels.join(', ')}`)
        // Waited for, not sampled once: the chart lays the new axis out after the
        // switch, and a loaded machine may measure it mid-layout.
        const inside = await page
          .waitForFunction(
            () => {
              const box = document.querySelector('#chart').getBoundingClientRect()
              return [...document.querySelectorAll('#chart .axis text')].every((t) => {
                const r = t.getBoundingClientRect()
                return r.left >= box.left - 0.5 && r.right <= box.right + 0.5
              })
            },
            null,
            { timeout: 10_000 },
          )
          .then(() => true, () => false)
        assert.ok(inside, `${axis}: every label inside the chart (waited 10 s)`)
        if (axis === 'time') assert.match(labels.join(' '), /\+1d/, 'a run over a day counts from its start')
        await page.locator('#chart').scrollIntoViewIfNeeded()
        await b.shot(`14c-chart-ticks-${axis}`)
      }
    } finally {
      await page.setViewportSize({ width: 1500, height: 1100 })
    }
    assert.deepEqual(errors, [])
  })

  test('a label equal to its request id is not shown twice', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await page.selectOption('#lease-role', 'coder')
    await click(page, '#lease-submit', 4) // every coder slot taken
    // labelled as its id (a host that labels requests by id): r5, then one that says more
    await page.fill('#lease-form input[name="label"]', 'r5')
    await click(page, '#lease-submit')
    await page.fill('#lease-form input[name="label"]', 'nightly review')
    await click(page, '#lease-submit')
    await page.waitForSelector('#queue tbody tr[data-request="r6"]')
    const row = (id) => page.textContent(`#queue tbody tr[data-request="${id}"] td:nth-child(2)`)
    assert.equal(await row('r5'), 'r5')
    assert.equal(await row('r6'), 'r6 nightly review', 'a label that says more still shows')
    const log = await page.$$eval('#log li.log-input', (items) => items.map((li) => li.textContent))
    assert.ok(log.some((t) => t.endsWith('lease r5 coder')), log.join('\n'))
    assert.ok(log.some((t) => t.endsWith('lease r6 coder (“nightly review”)')), log.join('\n'))
    // released to r5: its cell and tooltip name it once
    const lease = await page.$eval('.exec[data-executor="codex"] .cell.lease', (c) => c.dataset.lease)
    await click(page, `.cell.lease[data-lease="${lease}"]`)
    await page.waitForSelector('.cell.lease[data-request="r5"]')
    const title = await page.getAttribute('.cell.lease[data-request="r5"]', 'title')
    assert.match(title.split('\n')[0], /^lease \d+: r5 as coder/)
    assert.ok(!/\b(r5)\b.*\b\1\b/.test(await page.textContent('#queue')), 'r5 nowhere twice')
    await b.shot('14d-labels')
    assert.deepEqual(errors, [])
  })

  test('a persist says what it wrote and what it removed', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await page.selectOption('#exec-select', 'ci-worker')
    await click(page, '#exclude')
    await click(page, '#resume')
    const persists = await page.$$eval('#log li[data-effect="persist"]', (items) => items.map((li) => li.textContent))
    assert.equal(persists.length, 2, persists.join('\n'))
    assert.match(persists[0], /host: persist: ci-worker excluded \(manual, until resumed\)$/)
    assert.match(persists[1], /host: persist: ci-worker back in the round$/)
    assert.ok(persists.every((t) => !/0 exclusion/.test(t)))
    await report(page, 'claude-opus', 'usageLimit')
    const last = await page.$$eval('#log li[data-effect="persist"]', (items) => items.at(-1).textContent)
    assert.match(last, /host: persist: claude-opus excluded until 00:30:00$/)
    await b.shot('14e-persist-wording')
    assert.deepEqual(errors, [])
  })
  test('env literals never show in the editor, pasted, loaded or typed, nor in a downloaded trace (issue 13, item 5)', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    const secret = 'sk-ant-api03-AbCdEf0123456789secret'
    const doc = JSON.parse(await page.inputValue('#doc-editor'))
    doc.executors[1].env = { OPENAI_API_KEY: secret, OPENAI_BASE: '${OPENAI_BASE}', LOG_LEVEL: 'debug' }
    const text = JSON.stringify(doc, null, 2)
    const redacted = rota.redact(doc).executors[1].env
    const editorEnv = async () => JSON.parse(await page.inputValue('#doc-editor')).executors[1].env

    // loaded from a file: redacted before it shows, the layout kept
    await page.setInputFiles('#doc-file', { name: 'roster.json', mimeType: 'application/json', buffer: Buffer.from(text) })
    await page.waitForFunction(() => document.querySelector('#doc-editor').value.includes('[redacted]'))
    assert.ok(!(await page.inputValue('#doc-editor')).includes(secret))
    assert.deepEqual(await editorEnv(), redacted)
    assert.equal((await page.inputValue('#doc-editor')).split('\n').length, text.split('\n').length, 'the layout is kept')
    assert.match(await page.textContent('#status'), /2 env values redacted/)
    await page.click('#doc-start')
    await page.waitForSelector('#doc-state[data-valid="true"]')

    // typed: redacted once the editor is left
    await page.fill('#doc-editor', text)
    await page.click('#doc-state')
    await page.waitForFunction(() => document.querySelector('#doc-editor').value.includes('[redacted]'))
    assert.deepEqual(await editorEnv(), redacted)

    // pasted: redacted at once
    await page.evaluate((t) => {
      const editor = document.querySelector('#doc-editor')
      editor.value = t
      editor.dispatchEvent(new InputEvent('input', { inputType: 'insertFromPaste', bubbles: true }))
    }, text)
    assert.deepEqual(await editorEnv(), redacted)
    await b.shot('13-env-redacted')

    // a session run from the literal document (as a host would get it): its download and
    // its replay's document carry no literal
    await page.evaluate((d) => window.rotaVisualizer.session.reload(d), doc)
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-trace')])
    const file = join(SHOTS, 'session-trace-redacted.json')
    await download.saveAs(file)
    const saved = readFileSync(file, 'utf8')
    assert.ok(!saved.includes(secret) && !saved.includes('"debug"'), 'no literal in the trace file')
    await page.click('#mode-replay')
    await page.click('#trace-from-session')
    await page.waitForSelector('#rp-verify[data-verified="ok"]')
    await page.click('#rp-end')
    await page.click('#rp-takeover')
    await page.waitForFunction(() => document.body.dataset.mode === 'explore')
    assert.ok(!(await page.inputValue('#doc-editor')).includes(secret), "the replay's document, in the editor")
    assert.deepEqual(errors, [])
  })
})
