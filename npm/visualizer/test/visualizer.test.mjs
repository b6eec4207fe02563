// The visualizer in a real browser (Debian's Chromium via playwright-core). Every check
// waits for a selector or a condition; nothing sleeps.
//
//   npm run test:browser      (from npm/; needs `make wasm` and /usr/bin/chromium)

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import * as rota from '../../src/node.js'
import { Replay } from '../lib/replay.js'
import { parseTrace } from '../lib/trace.js'
import { open, ready, REPO_ROOT, SHOTS } from './harness.mjs'
import { buildTrace } from './scenario.mjs'

// The wasmtime host's CLI, when it is built (`cargo build -p rota-host`): its traces
// replay here, and the visualizer's replay there. ROTA_BIN names another binary.
const ROTA_BIN = process.env.ROTA_BIN || ['release', 'debug'].map((p) => join(REPO_ROOT, 'target', p, 'rota')).find((f) => existsSync(f))

let b

before(async () => {
  b = await open()
})

after(async () => {
  await b?.close()
})

/** Attributes of every executor row on the board. */
const boardRows = (page) =>
  page.$$eval('.exec[data-executor]', (rows) =>
    rows.map((row) => ({
      id: row.dataset.executor,
      busy: Number(row.dataset.busy),
      slots: Number(row.dataset.slots),
      exclusion: row.dataset.exclusion,
      draining: row.dataset.draining === 'true',
      leases: [...row.querySelectorAll('.cell.lease')].map((c) => Number(c.dataset.lease)),
      creating: [...row.querySelectorAll('.cell.creating')].map((c) => c.dataset.creating),
    })),
  )

const queueRows = (page) =>
  page.$$eval('#queue tbody tr', (rows) => rows.map((r) => ({ request: r.dataset.request, role: r.dataset.role, ahead: Number(r.dataset.ahead) })))

/** Waits until the page has seen `n` more inputs than `before` (the session's trace). */
const inputs = (page) => page.evaluate(() => window.rotaVisualizer.session.steps.length)
async function click(page, selector, times = 1) {
  for (let i = 0; i < times; i++) {
    const n = await inputs(page)
    await page.click(selector)
    await page.waitForFunction((k) => window.rotaVisualizer.session.steps.length > k, n)
  }
}

describe('the visualizer', () => {
  test('serves the page, the package entry and the wasm with the right types', async () => {
    const wasm = await fetch(new URL('/pkg/web/rota_wasm_bg.wasm', b.url))
    assert.equal(wasm.status, 200)
    assert.equal(wasm.headers.get('content-type'), 'application/wasm')
    const entry = await fetch(new URL('/src/browser.js', b.url))
    assert.match(entry.headers.get('content-type'), /^text\/javascript/)
    const home = await fetch(new URL('/', b.url), { redirect: 'manual' })
    assert.equal(home.status, 302)
    assert.equal((await fetch(new URL('/../package.json', b.url))).status, 404)
    assert.equal((await fetch(new URL('/node_modules/playwright-core/package.json', b.url))).status, 404)
  })

  test('loads the example and forms a queue; explain says why; a released slot goes to the head', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await page.click('#load-example')
    await page.click('#doc-start')
    await page.waitForSelector('#doc-state[data-valid="true"]')
    const rows = await boardRows(page)
    assert.deepEqual(
      rows.map((r) => [r.id, r.slots]),
      [['claude-opus', 3], ['codex', 2], ['local-qwen', 2], ['pi-gemini', 1], ['ci-worker', 2]],
    )
    // Role caps show: claude-opus codes on at most 2 of its 3 slots.
    await page.waitForSelector('.exec[data-executor="claude-opus"] .badge.cap[data-cap-role="coder"]')

    await page.selectOption('#lease-role', 'coder')
    let grants = 0
    for (let i = 0; i < 10 && (await page.$$('#queue tbody tr')).length === 0; i++) {
      await click(page, '#lease-submit')
      grants = (await page.$$('.cell.lease[data-role="coder"]')).length
    }
    assert.equal(grants, 4, 'four coder slots (caps: claude-opus 2, codex 1, local-qwen 1)')
    await click(page, '#lease-submit')
    await page.waitForSelector('#queue tbody tr[data-request="r6"]')
    assert.deepEqual(await queueRows(page), [
      { request: 'r5', role: 'coder', ahead: 0 },
      { request: 'r6', role: 'coder', ahead: 1 },
    ])
    await page.waitForSelector('#log li[data-name="waiting"]')

    // explain the head of the queue
    await page.click('#queue tbody tr[data-request="r5"]')
    await page.waitForSelector('#explain[data-request="r5"] tr[data-executor="codex"]')
    const reasons = await page.$$eval('#explain tbody tr', (trs) => Object.fromEntries(trs.map((tr) => [tr.dataset.executor, tr.querySelector('.reasons').textContent])))
    assert.match(reasons.codex, /role cap reached \(coder 1 of 1\)/)
    assert.match(reasons['pi-gemini'], /lacks the role/)
    // explain a role (a hypothetical request)
    await page.click('.role-chip[data-role="planner"]')
    await page.waitForSelector('#explain[data-role="planner"][data-pick="claude-opus"]')
    await b.shot('01-queue-and-explain')

    // release a coder lease by clicking its cell: the head of the queue gets it
    const lease = await page.$eval('.exec[data-executor="codex"] .cell.lease', (c) => c.dataset.lease)
    await click(page, `.cell.lease[data-lease="${lease}"]`)
    await page.waitForSelector('.exec[data-executor="codex"] .cell.lease[data-request="r5"]')
    assert.deepEqual(await queueRows(page), [{ request: 'r6', role: 'coder', ahead: 0 }])
    assert.deepEqual(errors, [])
  })

  test('three rate limits exclude an executor with a live countdown; time brings it back', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await page.selectOption('#exec-select', 'codex')
    await click(page, '[data-failure="rateLimit"]', 2)
    await page.waitForSelector('.exec[data-executor="codex"] .badge.ratelimits')
    assert.equal(await page.$('.exec[data-executor="codex"] .badge.excl'), null, 'two rate limits do not exclude')
    await click(page, '[data-failure="rateLimit"]')
    const badge = '.exec[data-executor="codex"] .badge.excl[data-kind="until"]'
    await page.waitForSelector(badge)
    assert.match(await page.textContent(badge), /until\s+3 rate limits within 10m · back in 10m 00s/)
    await page.waitForSelector('#log li[data-name="excluded"]')
    await page.waitForSelector('#log li[data-effect="persist"]')
    await b.shot('02-rate-limit-exclusion')

    await click(page, '[data-advance="60000"]')
    await page.waitForFunction((sel) => /back in 9m 00s/.test(document.querySelector(sel)?.textContent ?? ''), badge)
    // The next wake-up is the exclusion's end: jump there.
    await click(page, '#to-wake')
    await page.waitForSelector('.exec[data-executor="codex"][data-exclusion=""]')
    await page.waitForSelector('#log li[data-name="back"]')
    assert.match(await page.textContent('#clock-now'), /2026-01-01 00:10:00/)
    await b.shot('03-back-in-the-round')

    // the running clock: virtual time moves by itself (×60), countdowns follow
    await click(page, '[data-failure="usageLimit"]')
    const before = Number(await page.getAttribute('#clock-now', 'data-now'))
    await page.selectOption('#clock-rate', '60')
    await page.check('#clock-run')
    await page.waitForFunction((t) => Number(document.querySelector('#clock-now').dataset.now) >= t + 60_000, before)
    await page.waitForFunction(() => /back in 2\dm \d\ds/.test(document.querySelector('.exec[data-executor="codex"] .badge.excl')?.textContent ?? ''))
    await page.uncheck('#clock-run')
    assert.deepEqual(errors, [])
  })

  test('every failure kind, operator pause, probes, machines and a planned reload', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    const report = async (executor, kind) => {
      await page.selectOption('#exec-select', executor)
      await click(page, `[data-failure="${kind}"]`)
    }
    await report('claude-opus', 'usageLimit')
    await page.waitForSelector('.exec[data-executor="claude-opus"] .badge.excl[data-kind="until"]')
    assert.match(await page.textContent('.exec[data-executor="claude-opus"] .badge.excl'), /usage limit.*back in 30m 00s/)
    await report('pi-gemini', 'authentication')
    await page.waitForSelector('.exec[data-executor="pi-gemini"] .badge.excl[data-kind="run"]')
    await report('codex', 'modelUnavailable')
    await page.waitForSelector('.exec[data-executor="codex"] .badge.excl[data-kind="run"]')
    await report('ci-worker', 'other')
    await page.waitForSelector('#log li[data-name="failureIgnored"]')
    assert.equal(await page.getAttribute('.exec[data-executor="ci-worker"]', 'data-exclusion'), '')
    // an outage on an executor with a health URL: probed until it answers
    await report('local-qwen', 'outage')
    await page.waitForSelector('.exec[data-executor="local-qwen"] .badge.excl[data-kind="health"]')
    await page.waitForSelector('.exec[data-executor="local-qwen"] .badge.probe')
    await click(page, '.exec[data-executor="local-qwen"] [data-probe-answer="down"]')
    await page.waitForSelector('#log li[data-name="probeDown"]')

    // an operator's pause and resume (ci-worker)
    await page.selectOption('#exec-select', 'ci-worker')
    await click(page, '#exclude')
    await page.waitForSelector('.exec[data-executor="ci-worker"] .badge.excl[data-kind="manual"]')
    await click(page, '#resume')
    await page.waitForSelector('.exec[data-executor="ci-worker"][data-exclusion=""]')

    // provisioning: a verifier lease on ci-worker creates a machine; it fails: pause
    await page.selectOption('#lease-role', 'verifier')
    await click(page, '#lease-submit')
    await page.waitForSelector('.exec[data-executor="ci-worker"] .cell.creating[data-creating="r1"]')
    await click(page, '.cell.creating [data-machine="fail"]')
    await page.waitForSelector('.exec[data-executor="ci-worker"] .badge.pause[data-pause="blocked"]')
    assert.match(await page.textContent('.exec[data-executor="ci-worker"] .badge.pause'), /provisioning paused · 1 failure · in 30s/)
    await b.shot('04-failures-and-provisioning')

    // health comes back
    await click(page, '[data-advance="15000"]')
    await page.waitForSelector('.exec[data-executor="local-qwen"] [data-probe-answer="up"]')
    await click(page, '.exec[data-executor="local-qwen"] [data-probe-answer="up"]')
    await page.waitForSelector('.exec[data-executor="local-qwen"][data-exclusion=""]')

    // merge the repository overlay, plan the reload, then apply it
    await page.click('#overlay-box summary')
    await page.click('#overlay-example')
    await page.waitForFunction(() => document.querySelector('#overlay-editor').value.includes('sonnet-review'))
    await page.click('#overlay-merge')
    await page.waitForFunction(() => document.querySelector('#doc-editor').value.includes('sonnet-review'))
    await page.waitForSelector('#doc-state[data-valid="true"]')
    await page.click('#doc-plan')
    await page.waitForSelector('#plan:not([hidden]) [data-field="added"]')
    assert.match(await page.textContent('#plan [data-field="added"]'), /sonnet-review/)
    assert.match(await page.textContent('#plan'), /pi-gemini/)
    assert.match(await page.textContent('#plan [data-field="resized"]'), /codex 2→3/)
    assert.equal(await page.$('.exec[data-executor="sonnet-review"]'), null, 'a plan changes nothing')
    await b.shot('05-reload-plan')
    await click(page, '#doc-apply')
    await page.waitForSelector('.exec[data-executor="sonnet-review"]')
    await page.waitForSelector('#log li[data-name="reloaded"]')
    assert.equal(await page.$('.exec[data-executor="pi-gemini"]'), null, 'pi-gemini had no lease: it left')
    assert.deepEqual(errors, [])
  })

  test('a reload drains a busy executor', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await page.selectOption('#lease-role', 'judge')
    await click(page, '#lease-submit', 3) // claude-opus (priority 1 for judge), 3 slots
    await click(page, '#lease-submit') // claude-opus is full: pi-gemini
    await page.waitForSelector('.exec[data-executor="pi-gemini"] .cell.lease')
    const doc = JSON.parse(await page.inputValue('#doc-editor'))
    doc.executors = doc.executors.filter((e) => e.id !== 'pi-gemini')
    await page.fill('#doc-editor', JSON.stringify(doc, null, 2))
    await page.waitForFunction(() => !document.querySelector('#doc-editor').value.includes('pi-gemini') && document.querySelector('#doc-state').dataset.valid === 'true')
    await page.click('#doc-plan')
    await page.waitForSelector('#plan:not([hidden])')
    assert.match(await page.textContent('#plan [data-field="draining"]'), /pi-gemini/)
    await click(page, '#doc-apply')
    await page.waitForSelector('.exec[data-executor="pi-gemini"][data-draining="true"] .badge.draining')
    await b.shot('06-draining')
    await click(page, '.exec[data-executor="pi-gemini"] .cell.lease')
    await page.waitForSelector('#log li[data-name="left"]')
    assert.equal(await page.$('.exec[data-executor="pi-gemini"]'), null)
    assert.deepEqual(errors, [])
  })

  test('replays a trace to its end: outputs verified, board equal to the final snapshot', async () => {
    const { page, url, errors } = b
    const { trace, finalSnapshot } = buildTrace(rota)
    const file = join(SHOTS, 'scenario-trace.json')
    writeFileSync(file, JSON.stringify(trace, null, 1))
    await ready(page, url)
    await page.click('#mode-replay')
    await page.setInputFiles('#trace-file', file)
    await page.waitForSelector('#rp-verify[data-verified="ok"]')
    await page.waitForSelector(`#rp-pos[data-length="${trace.steps.length}"][data-position="0"]`)
    await page.waitForSelector('#chart .lane[data-lane="codex"] .band-until')
    await page.waitForSelector('#chart .lane[data-lane="pi-gemini"] .band-draining')

    await page.selectOption('#rp-speed', 's:50')
    await page.click('#rp-play')
    await page.waitForSelector('#rp-play[data-playing="true"]')
    await page.waitForSelector(`#rp-pos[data-position="${trace.steps.length}"]`)
    await page.waitForSelector('#rp-play[data-playing="false"]')

    // the board shows the final snapshot
    const rows = await boardRows(page)
    assert.deepEqual(
      rows,
      finalSnapshot.executors.map((e) => ({
        id: e.id,
        busy: e.busy,
        slots: e.slots,
        exclusion: e.exclusion?.kind ?? '',
        draining: e.draining,
        leases: e.leases.map((l) => l.lease).sort((x, y) => x - y),
        creating: finalSnapshot.creating.filter((c) => c.executor === e.id).map((c) => c.request),
      })),
    )
    assert.deepEqual(
      await queueRows(page),
      finalSnapshot.queue.map((q) => ({ request: q.request, role: q.role, ahead: q.ahead })),
    )
    assert.equal(await page.getAttribute('#clock-now', 'data-now'), String(finalSnapshot.now))
    await page.waitForSelector('.exec[data-executor="local-qwen"] .badge.excl[data-kind="health"]')
    await page.waitForSelector('.exec[data-executor="pi-gemini"] .badge.draining')
    // and the page's core agrees with Node's, field for field
    assert.deepEqual(await page.evaluate(() => window.rotaVisualizer.snapshot()), finalSnapshot)
    await b.shot('07-replay-end')

    // scrub back: the codex exclusion is on the board at that step
    const excludedAt = trace.steps.findIndex((s) => s.outputs?.some((o) => o.type === 'event' && o.name === 'excluded' && o.fields.executor === 'codex')) + 1
    await page.fill('#rp-scrub', String(excludedAt))
    await page.waitForSelector(`#rp-pos[data-position="${excludedAt}"]`)
    await page.waitForSelector('.exec[data-executor="codex"] .badge.excl[data-kind="until"]')
    await page.click('#rp-back')
    await page.waitForSelector(`#rp-pos[data-position="${excludedAt - 1}"]`)
    await page.waitForSelector('.exec[data-executor="codex"][data-exclusion=""]')
    await page.click('#rp-fwd')
    await page.waitForSelector(`#rp-pos[data-position="${excludedAt}"] `)
    await page.click('#queue tbody tr >> nth=0').catch(() => {}) // explain works in replay too, when a queue shows
    await b.shot('08-replay-scrubbed')

    // take over from here and keep driving by hand
    await page.click('#rp-takeover')
    await page.waitForSelector('body[data-mode="explore"]')
    await page.waitForFunction((n) => window.rotaVisualizer.session.steps.length === n, excludedAt)
    await click(page, '[data-advance="600000"]')
    await page.waitForSelector('.exec[data-executor="codex"][data-exclusion=""]')
    assert.deepEqual(errors, [])
  })

  test('a trace whose outputs differ from the core is flagged at its step', async () => {
    const { page, url } = b
    const { trace } = buildTrace(rota)
    const tampered = structuredClone(trace)
    const n = tampered.steps.findIndex((s) => s.outputs?.some((o) => o.type === 'granted'))
    tampered.steps[n].outputs.find((o) => o.type === 'granted').executor = 'somewhere-else'
    await ready(page, url)
    await page.click('#mode-replay')
    await page.click('#replay-panel details.inline summary')
    await page.fill('#trace-paste', JSON.stringify(tampered))
    await page.click('#trace-paste-load')
    await page.waitForSelector('#rp-verify[data-verified="mismatch"]')
    assert.match(await page.textContent('#rp-verify'), new RegExp(`first at step ${n + 1} `))
  })

  test('replays its own session recording', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await page.selectOption('#lease-role', 'coder')
    await click(page, '#lease-submit', 5)
    await click(page, '[data-advance="15000"]')
    await page.click('#mode-replay')
    await page.click('#trace-from-session')
    await page.waitForSelector('#rp-verify[data-verified="ok"]')
    await page.click('#rp-end')
    await page.waitForSelector('#rp-pos[data-position="6"][data-length="6"]')
    await page.waitForSelector('#queue tbody tr[data-request="r5"]')
    assert.deepEqual(errors, [])
  })

  test('downloads its session trace; it replays in Node (and in `rota replay` when built)', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    await page.selectOption('#lease-role', 'verifier')
    await click(page, '#lease-submit', 2) // ci-worker creates machines
    await click(page, '.cell.creating[data-creating="r1"] [data-machine="ok"]')
    await page.selectOption('#exec-select', 'local-qwen')
    await click(page, '[data-failure="outage"]')
    await click(page, '[data-advance="15000"]')
    await page.evaluate(() => window.rotaVisualizer.session.release(99999)).catch(() => {}) // a rejected input is recorded too
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-trace')])
    const file = join(SHOTS, 'session-trace.json')
    await download.saveAs(file)
    const trace = parseTrace(readFileSync(file, 'utf8'))
    assert.equal(trace.meta.format, 'rota-trace')
    assert.ok(trace.steps.some((s) => s.error?.code === 'UNKNOWN_LEASE'))
    const replay = new Replay(rota, trace)
    assert.deepEqual(replay.mismatches, [])
    assert.deepEqual(replay.finalSnapshot, await page.evaluate(() => window.rotaVisualizer.snapshot()))
    if (ROTA_BIN) {
      const out = execFileSync(ROTA_BIN, ['replay', file], { encoding: 'utf8', timeout: 240_000 })
      assert.match(out, /every output matches/)
    }
    assert.deepEqual(errors, [])
  })

  test('replays a trace from `rota simulate` (wasmtime host) to its end', { skip: ROTA_BIN ? false : 'no rota binary (cargo build -p rota-host)', timeout: 300_000 }, async () => {
    const { page, url, errors } = b
    const file = join(SHOTS, 'simulate-trace.json')
    execFileSync(ROTA_BIN, ['simulate', '--hours', '2', '--seed', '7', '--quiet', '--trace', file], { timeout: 280_000, stdio: 'pipe' })
    const trace = parseTrace(readFileSync(file, 'utf8'))
    const expected = new Replay(rota, trace) // Node's replay of the same trace
    assert.deepEqual(expected.mismatches, [], 'the Node core answers as the wasmtime host did')
    await ready(page, url)
    await page.click('#mode-replay')
    await page.setInputFiles('#trace-file', file)
    await page.waitForSelector('#rp-verify[data-verified="ok"]')
    await page.selectOption('#rp-speed', 's:500')
    await page.click('#rp-play')
    await page.waitForSelector(`#rp-pos[data-position="${trace.steps.length}"]`, { timeout: 60_000 })
    const snapshot = expected.finalSnapshot
    assert.deepEqual(await page.evaluate(() => window.rotaVisualizer.snapshot()), snapshot)
    const rows = await boardRows(page)
    assert.deepEqual(rows.map((r) => [r.id, r.busy, r.exclusion]), snapshot.executors.map((e) => [e.id, e.busy, e.exclusion?.kind ?? '']))
    assert.deepEqual((await queueRows(page)).map((q) => q.request), snapshot.queue.map((q) => q.request))
    // park the cursor mid-run for the picture
    await page.fill('#rp-scrub', String(Math.floor(trace.steps.length * 0.6)))
    await page.waitForSelector(`#rp-pos[data-position="${Math.floor(trace.steps.length * 0.6)}"]`)
    await b.shot('10-simulate-trace')
    assert.deepEqual(errors, [])
  })

  test('a bad document shows its violations at their lines', async () => {
    const { page, url, errors } = b
    await ready(page, url)
    const bad = {
      executors: [
        { id: 'a', harness: 'claude', roles: ['coder'], slots: 0 },
        { id: 'a', roles: ['coder', 'painter'], health: 'not a url' },
        { id: 'c', harness: 'pi', roles: ['planner'], cooldown: { rateLimit: 'soon' }, priority: 'high' },
      ],
    }
    const text = JSON.stringify(bad, null, 2)
    await page.fill('#doc-editor', text)
    await page.waitForSelector('#doc-state[data-valid="false"]')
    const violations = await page.$$eval('#violations li', (lis) =>
      lis.map((li) => ({ path: li.dataset.path, line: li.querySelector('.vline').textContent, message: li.querySelector('.vmsg').textContent })),
    )
    const expected = rota.validate(bad)
    assert.deepEqual(violations.map((v) => [v.path, v.message]), expected.map((v) => [v.path, v.message]))
    for (const path of ['executors[0].slots', 'executors[1].id', 'executors[1].harness', 'executors[1].roles', 'executors[1].health', 'executors[2].cooldown.rateLimit', 'executors[2].priority']) {
      assert.ok(violations.some((v) => v.path === path), `a violation at ${path}`)
    }
    // each sits at the line of its field
    const lines = text.split('\n')
    const health = violations.find((v) => v.path === 'executors[1].health')
    assert.match(lines[Number(health.line.replace('line ', '')) - 1], /"health": "not a url"/)
    const cooldown = violations.find((v) => v.path === 'executors[2].cooldown.rateLimit')
    assert.match(lines[Number(cooldown.line.replace('line ', '')) - 1], /"rateLimit": "soon"/)
    assert.ok((await page.$$('#doc-gutter .gl.bad')).length >= 5)
    assert.equal(await page.isDisabled('#doc-start'), true)
    assert.equal(await page.isDisabled('#doc-plan'), true)
    await page.click('#violations li[data-path="executors[1].health"]')
    await b.shot('09-violations')

    // not JSON at all: the syntax error, with its line
    await page.fill('#doc-editor', '{\n  "executors": [\n    { "id": "a", }\n  ]\n}')
    await page.waitForSelector('#violations li[data-path="(syntax)"]')
    assert.match(await page.textContent('#violations'), /line 3/)
    assert.deepEqual(errors, [])
  })
})
