// The rota visualizer: the real core (the npm package's browser entry, wasm) in a page.
// Explore drives one policy by hand on virtual time; Replay feeds a trace file through
// the core again, verifies its outputs and lets you move through it.

import { parseWithPlaces, placeOf, lineColumn } from './lib/jsonpos.js'
import { Session, EPOCH, FAILURE_KINDS } from './lib/session.js'
import { Replay } from './lib/replay.js'
import { parseTraceInSlices, jsonEqual } from './lib/trace.js'
import { clockText, timeOfDay, span, h, roleColor, describeInput, describeEffect, shownLabel } from './lib/format.js'
import { renderChart, chartPositionAt, moveChartCursor } from './lib/chart.js'
import { entryPieces } from './lib/statefile.js'
import { redactDocumentText } from './lib/redact.js'

const $ = (selector) => document.querySelector(selector)
const $$ = (selector) => [...document.querySelectorAll(selector)]

let rota // the package's browser entry, once loaded

const app = {
  mode: 'explore',
  session: null,
  replay: null,
  /** Replay position while playing in time mode: the virtual time shown (≥ the step's). */
  replayClock: null,
  playing: null,
  doc: { text: '', value: null, violations: [], places: null, syntax: null },
  plannedDocument: null,
  explainRequest: null,
  selectedExecutor: null,
  clockTimer: null,
  selectKey: '',
}

// ---------------------------------------------------------------------------------
// start

async function main() {
  try {
    rota = await import('../src/browser.js')
  } catch (error) {
    setStatus(`could not load the core (npm/pkg/web): ${error.message} — run 'make wasm'`, 'error')
    return
  }
  $('#options-defaults').textContent = JSON.stringify(rota.defaultOptions())
  wire()
  await loadExample()
  startSession()
  document.body.dataset.ready = 'true'
  window.rotaVisualizer = {
    get session() {
      return app.session
    },
    get replay() {
      return app.replay
    },
    snapshot: () => current()?.snapshot ?? null,
    rota,
  }
}

/** The status line: one line (the full text in its tooltip when it does not fit). */
function setStatus(text, kind = 'info') {
  const el = $('#status')
  el.textContent = text
  el.title = text
  el.dataset.kind = kind
}

/** Runs a user action; a thrown error becomes the status line; then redraws. */
function act(fn) {
  try {
    const message = fn()
    if (typeof message === 'string') setStatus(message)
  } catch (error) {
    setStatus(`${error.code ? `${error.code}: ` : ''}${error.message}`, 'error')
  }
  render()
}

// ---------------------------------------------------------------------------------
// the document editor

async function loadExample() {
  const text = await (await fetch('example-roster.json')).text()
  setDocText(text)
}

function setDocText(text) {
  $('#doc-editor').value = text
  redactEditor('#doc-editor')
  analyzeDoc()
}

/**
 * Replaces the editor's `env` literals with the core's "[redacted]" (a document loaded,
 * pasted, or left after typing): the page never shows one, and env values decide
 * nothing, so the roster runs the same.
 */
function redactEditor(selector) {
  const editor = $(selector)
  const { text, redacted } = redactDocumentText(editor.value, rota.redact)
  if (!redacted) return
  editor.value = text
  setStatus(`${redacted} env value${redacted === 1 ? '' : 's'} redacted: the visualizer never shows a literal env value (write secrets as \${VAR} references; env values decide nothing)`)
}

/** Analyzes the editor's text now if it changed since the last analysis. */
function flushDoc() {
  if ($('#doc-editor').value !== app.doc.text) analyzeDoc()
}

function analyzeDoc() {
  const text = $('#doc-editor').value
  const doc = { text, value: null, violations: [], places: null, syntax: null }
  try {
    const { value, places } = parseWithPlaces(text)
    doc.value = value
    doc.places = places
    try {
      doc.violations = rota.validate(value).map((v) => {
        const place = placeOf(places, v.path)
        return { ...v, place, line: place ? lineColumn(text, place.keyStart).line : null }
      })
    } catch (error) {
      doc.violations = [{ path: '', message: error.message, place: null, line: null }]
    }
  } catch (error) {
    doc.syntax = error
    doc.violations = [{ path: '(syntax)', message: error.message, place: { start: error.offset, end: error.offset + 1, keyStart: error.offset }, line: error.line }]
  }
  // A plan describes the text it was made from.
  if (text !== app.doc.text) {
    app.plannedDocument = null
    $('#plan').hidden = true
  }
  app.doc = doc
  renderDoc()
}

function renderDoc() {
  const { text, violations, syntax, value } = app.doc
  const byLine = new Map()
  for (const v of violations) {
    if (v.line) byLine.set(v.line, [...(byLine.get(v.line) ?? []), v])
  }
  const lines = Math.max(1, text.split('\n').length)
  const gutter = $('#doc-gutter')
  gutter.replaceChildren(
    ...Array.from({ length: lines }, (_, i) => {
      const bad = byLine.get(i + 1)
      return h('div', { class: bad ? 'gl bad' : 'gl', title: bad?.map((v) => `${v.path}: ${v.message}`).join('\n') }, String(i + 1))
    }),
  )
  gutter.scrollTop = $('#doc-editor').scrollTop

  const list = $('#violations')
  list.replaceChildren(
    ...violations.map((v) =>
      h(
        'li',
        { class: 'violation', dataset: { path: v.path ?? '' }, title: 'show in the editor', onclick: () => showInEditor(v) },
        h('span', { class: 'vline' }, v.line ? `line ${v.line}` : '—'),
        ' ',
        h('code', { class: 'vpath' }, v.path || '(document)'),
        ' ',
        h('span', { class: 'vmsg' }, v.message),
      ),
    ),
  )
  const state = $('#doc-state')
  const ok = !syntax && violations.length === 0
  state.dataset.valid = String(ok)
  state.textContent = syntax
    ? '✗ not JSON'
    : ok
      ? `✓ valid: ${value?.executors?.length ?? 0} executors`
      : `✗ ${violations.length} violation${violations.length === 1 ? '' : 's'}`
  $('#doc-start').disabled = !ok
  $('#doc-plan').disabled = !ok || !app.session || app.mode !== 'explore'
  $('#doc-apply').disabled = !app.plannedDocument || app.mode !== 'explore'
}

function showInEditor(v) {
  const editor = $('#doc-editor')
  if (!v.place) return
  editor.focus()
  editor.setSelectionRange(v.place.keyStart, Math.max(v.place.end, v.place.keyStart + 1))
  const line = v.line ?? 1
  const lineHeight = parseFloat(getComputedStyle(editor).lineHeight) || 18
  editor.scrollTop = Math.max(0, (line - 4) * lineHeight)
}

const KEY_ORDER = ['id', 'harness', 'model', 'kind', 'roles', 'slots', 'maxConcurrentAttempts', 'coderSlots', 'roleSlots', 'priority', 'health', 'baseUrl', 'cooldown', 'provision', 'flags', 'env', 'disabled']

/**
 * A trace to download, with every `env` literal redacted by the core (the document
 * and each reload's): a trace is a file to share, and env values decide nothing, so it
 * replays the same.
 */
function redactedTrace(trace) {
  return {
    ...trace,
    document: rota.redact(trace.document),
    steps: trace.steps.map((step) =>
      step.input?.type === 'reload' ? { ...step, input: { ...step.input, document: rota.redact(step.input.document) } } : step,
    ),
  }
}

/** A document as JSON text with each executor's fields in a readable order (the core writes them sorted). */
function documentText(doc) {
  const rank = (k) => (KEY_ORDER.includes(k) ? KEY_ORDER.indexOf(k) : KEY_ORDER.length)
  const tidy = (e) => (e && typeof e === 'object' && !Array.isArray(e) ? Object.fromEntries(Object.entries(e).sort((a, b) => rank(a[0]) - rank(b[0]))) : e)
  const out = Array.isArray(doc?.executors) ? { ...doc, executors: doc.executors.map(tidy) } : doc
  return JSON.stringify(out, null, 2)
}

function readOptions() {
  const text = $('#options-editor').value.trim()
  if (!text) return null
  const value = JSON.parse(text)
  return Object.keys(value).length ? value : null
}

function startSession() {
  flushDoc()
  act(() => {
    if (!app.doc.value || app.doc.violations.length) throw new Error('the document has violations: fix them first')
    const options = readOptions()
    app.session = new Session(rota, app.doc.value, options)
    app.explainRequest = null
    app.selectedExecutor = null
    setMode('explore')
    return `session started: ${app.doc.value.executors.length} executors at ${clockText(EPOCH)} UTC (virtual)`
  })
}

function renderPlan(plan) {
  const box = $('#plan')
  const item = (label, values, fmt = (x) => x) =>
    h('div', { class: 'plan-item', dataset: { field: label } }, h('b', {}, label), ' ', values.length ? values.map(fmt).join(', ') : h('span', { class: 'muted' }, '—'))
  box.replaceChildren(
    h('div', { class: 'plan-title' }, 'Reload plan (nothing changed yet)'),
    item('added', plan.added),
    item('draining', plan.draining),
    item('leaving', plan.leaving),
    item('resized', plan.resized, (r) => `${r.id} ${r.from}→${r.to} slots (${r.running} running)`),
    item('changed', plan.changed),
    item('granted', plan.granted, (g) => `${g.request} → ${g.executor}`),
    item('exhausted', plan.exhausted),
    item('preflight', plan.preflight),
  )
  box.hidden = false
}

// ---------------------------------------------------------------------------------
// what is shown: the live session or the replay's position

function current() {
  if (app.mode === 'replay') {
    const r = app.replay
    if (!r) return null
    const snapshot = r.policy.snapshot()
    const stepNow = r.nowAt(r.position)
    return {
      live: false,
      policy: r.policy,
      snapshot,
      now: Math.max(stepNow, app.replayClock ?? stepNow),
      start: r.nowAt(0),
      log: () => r.logUpTo(r.position, 600),
      document: r.policy.document(),
    }
  }
  const s = app.session
  if (!s) return null
  return {
    live: true,
    policy: s.policy,
    snapshot: s.snapshot(),
    now: s.now,
    start: EPOCH,
    log: () => s.log.slice(-600),
    document: s.policy.document(),
  }
}

function render() {
  const view = current()
  renderDoc()
  $('#controls').disabled = !view?.live
  $('#download-trace').disabled = !app.session
  if (!view) {
    // Nothing to show (Replay before a trace is open): every view of a policy empties,
    // so no count, explanation or file of the other mode stays behind.
    $('#board').replaceChildren(h('p', { class: 'hint' }, app.mode === 'replay' ? 'Open a trace file, or replay this session.' : 'Start a session.'))
    $('#queue tbody').replaceChildren()
    $('#queue-count').textContent = 'empty'
    $('#log').replaceChildren()
    $('#log-count').textContent = ''
    $('#role-legend').replaceChildren()
    renderPendingReload(null)
    renderExplain(null)
    renderPersist(null)
    renderClock(null)
    return
  }
  renderClock(view)
  renderSelects(view.snapshot)
  renderRoleLegend(view.snapshot)
  renderBoard(view)
  renderQueue(view)
  renderPendingReload(view)
  renderLog(view)
  renderExplain(view)
  renderPersist(view)
  if (app.mode === 'replay') renderReplayPosition()
  updateCountdowns(view.now)
}

function renderClock(view) {
  const now = $('#clock-now')
  const wake = $('#clock-wake')
  if (!view) {
    now.textContent = '—'
    wake.textContent = '—'
    $('#clock-offset').textContent = ''
    return
  }
  now.textContent = clockText(view.now)
  now.dataset.now = String(view.now)
  $('#clock-offset').textContent = `T+${span(view.now - view.start)}`
  const at = view.snapshot.wakeAt
  wake.dataset.wake = at ?? ''
  wake.replaceChildren(at == null ? 'none' : h('span', {}, timeOfDay(at), ' (', cd(at), ')'))
  $('#to-wake').disabled = at == null
}

/** A countdown to `ms` (or time since it, with `since`), kept live by updateCountdowns. */
function cd(ms, since = false) {
  return h('span', { class: 'cd', dataset: since ? { from: ms } : { to: ms } })
}

function updateCountdowns(now) {
  for (const el of $$('.cd')) {
    if (el.dataset.to) {
      const left = Number(el.dataset.to) - now
      el.textContent = left > 0 ? `in ${span(left)}` : 'due'
      el.classList.toggle('due', left <= 0)
    } else if (el.dataset.from) {
      el.textContent = span(now - Number(el.dataset.from))
    }
  }
}

function renderSelects(snapshot) {
  const ids = snapshot.executors.map((e) => e.id)
  const key = `${snapshot.roles.join(',')}|${ids.join(',')}`
  if (key === app.selectKey) return
  app.selectKey = key
  const keep = (select, values, blank) => {
    const old = select.value
    select.replaceChildren(...(blank ? [h('option', { value: '' }, '—')] : []), ...values.map((v) => h('option', { value: v }, v)))
    if (values.includes(old) || (blank && old === '')) select.value = old
  }
  const roleSelect = $('#lease-role')
  const firstFill = roleSelect.options.length === 0
  keep(roleSelect, snapshot.roles, false)
  if (firstFill && snapshot.roles.includes('coder')) roleSelect.value = 'coder'
  for (const select of $$('.exec-select')) keep(select, ids, true)
  keep($('#exec-select'), ids, false)
  if (app.selectedExecutor && ids.includes(app.selectedExecutor)) $('#exec-select').value = app.selectedExecutor
  const checked = new Set($$('#avoid-list input:checked').map((i) => i.value))
  $('#avoid-list').replaceChildren(
    ...ids.map((id) => h('label', { class: 'small' }, h('input', { type: 'checkbox', value: id, checked: checked.has(id) }), ` ${id}`)),
  )
}

function renderRoleLegend(snapshot) {
  $('#role-legend').replaceChildren(
    ...snapshot.roles.map((role) =>
      h(
        'button',
        {
          class: 'role-chip',
          dataset: { role },
          style: { '--c': roleColor(snapshot.roles, role) },
          title: `explain: who could take a ${role} request now`,
          onclick: () => {
            app.explainRequest = { role }
            render()
          },
        },
        role,
      ),
    ),
  )
}

// ---------------------------------------------------------------------------------
// the board

function renderBoard(view) {
  const { snapshot, live } = view
  const rows = snapshot.executors.map((e) => executorRow(e, snapshot, view.document, live))
  $('#board').replaceChildren(...(rows.length ? rows : [h('p', { class: 'hint' }, 'No executors.')]))
}

function groupPriorities(priority) {
  const groups = new Map()
  for (const [role, p] of Object.entries(priority)) groups.set(p, [...(groups.get(p) ?? []), role])
  if (groups.size <= 1) return `prio ${[...groups.keys()][0] ?? 1}`
  return [...groups.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([p, roles]) => `${p}: ${roles.join(', ')}`)
    .join(' · ')
}

function executorRow(e, snapshot, document, live) {
  const roles = snapshot.roles
  const creating = snapshot.creating.filter((c) => c.executor === e.id)
  const spec = document?.executors?.find((x) => x.id === e.id)
  const cells = []
  for (const lease of [...e.leases].sort((a, b) => a.lease - b.lease)) {
    const role = lease.role ?? '(occupied)'
    const label = shownLabel(lease.request, lease.label)
    cells.push(
      h(
        live ? 'button' : 'div',
        {
          class: `cell lease${lease.occupied ? ' occupied' : ''}`,
          style: { '--c': roleColor(roles, lease.role) },
          dataset: { lease: lease.lease, role, request: lease.request },
          title: `lease ${lease.lease}: ${lease.request}${label ? ` (${label})` : ''} as ${role} since ${timeOfDay(lease.since)}${lease.hold ? `\nmachine ${JSON.stringify(lease.hold)}` : ''}${live ? '\nclick to release' : ''}`,
          onclick: live ? () => act(() => (app.session.release(lease.lease), `released lease ${lease.lease} (${lease.request})`)) : null,
        },
        h('span', { class: 'cell-role' }, role),
        h('span', { class: 'cell-req' }, `${lease.label ?? lease.request} #${lease.lease}`),
        lease.hold ? h('span', { class: 'cell-hold' }, '⛁ machine') : null,
      ),
    )
  }
  for (const c of creating) {
    cells.push(
      h(
        'div',
        { class: 'cell creating', style: { '--c': roleColor(roles, c.role) }, dataset: { creating: c.request, role: c.role }, title: `creating a machine for ${c.request} since ${timeOfDay(c.since)}` },
        h('span', { class: 'cell-role' }, c.role),
        h('span', { class: 'cell-req' }, c.request),
        h('span', { class: 'cell-hold' }, 'creating machine…'),
        live
          ? h(
              'span',
              { class: 'cell-actions' },
              h('button', { class: 'mini', dataset: { machine: 'ok' }, title: 'the machine is up', onclick: () => act(() => app.session.machineCreated(c.request) && `machine created for ${c.request}`) }, '✓'),
              h('button', { class: 'mini', dataset: { machine: 'fail' }, title: 'creating the machine failed', onclick: () => act(() => app.session.machineFailed(c.request) && `machine failed for ${c.request}`) }, '✗'),
            )
          : null,
      ),
    )
  }
  const free = Math.max(0, e.slots - e.busy)
  for (let i = 0; i < free; i++) cells.push(h('div', { class: 'cell free' }, 'free'))
  // Slots held beyond capacity: occupied work, or a resize that retires them as they end.
  cells.forEach((cell, i) => {
    if (i >= e.slots && !cell.classList.contains('free')) cell.classList.add('over')
  })

  const caps = Object.entries(e.roleCaps).filter(([, cap]) => cap < e.slots)
  const badges = [
    h('span', { class: 'badge prio', title: 'priority per role (lower first)' }, groupPriorities(e.priority)),
    ...caps.map(([role, cap]) =>
      h('span', { class: 'badge cap', style: { '--c': roleColor(roles, role) }, dataset: { capRole: role }, title: `at most ${cap} ${role} lease(s) at once` }, `${role} ${e.busyByRole[role] ?? 0}/${cap}`),
    ),
    e.provision ? h('span', { class: 'badge provision', title: 'each lease first creates a machine' }, 'provision') : null,
    spec?.kind ? h('span', { class: 'badge kind' }, `kind ${spec.kind}`) : null,
    spec?.health ? h('span', { class: 'badge health', title: spec.health }, 'health URL') : null,
    e.recentRateLimits > 0 ? h('span', { class: 'badge ratelimits', title: 'rate limits inside the window' }, `rate limits ${e.recentRateLimits}`) : null,
    e.draining ? h('span', { class: 'badge draining', title: 'removed by a reload: takes no new lease, leaves when its last lease ends' }, 'draining') : null,
    e.preflight
      ? h('span', { class: `badge preflight ${e.preflight.ok ? 'ok' : 'bad'}`, title: e.preflight.error ?? '' }, `preflight ${e.preflight.ok ? 'ok' : 'failed'} ${timeOfDay(e.preflight.at)}`)
      : null,
  ]

  const state = []
  if (e.exclusion) state.push(exclusionBadge(e.exclusion))
  if (e.pause && (e.pause.blocked || e.pause.failures > 0)) {
    state.push(
      h(
        'span',
        { class: `badge pause${e.pause.blocked ? ' blocked' : ''}`, dataset: { pause: e.pause.blocked ? 'blocked' : 'counting' }, title: e.pause.message },
        e.pause.blocked ? h('span', {}, 'provisioning paused · ', `${e.pause.failures} failure${e.pause.failures === 1 ? '' : 's'} · `, cd(e.pause.until)) : `machine failures: ${e.pause.failures} (pause over)`,
      ),
    )
  }
  if (e.probeInFlight) {
    state.push(
      h(
        'span',
        { class: 'badge probe', dataset: { probe: e.id } },
        `probe pending${spec?.health ? ` (${spec.health})` : ''}`,
        live ? h('button', { class: 'mini', dataset: { probeAnswer: 'up' }, onclick: () => act(() => app.session.probeResult(e.id, true) && `${e.id}: probe up`) }, 'up') : null,
        live ? h('button', { class: 'mini', dataset: { probeAnswer: 'down' }, onclick: () => act(() => app.session.probeResult(e.id, false) && `${e.id}: probe down`) }, 'down') : null,
      ),
    )
  }

  return h(
    'div',
    {
      class: `exec${e.exclusion ? ' excluded' : ''}${e.draining ? ' draining' : ''}${app.selectedExecutor === e.id ? ' selected' : ''}`,
      dataset: {
        executor: e.id,
        busy: e.busy,
        slots: e.slots,
        exclusion: e.exclusion?.kind ?? '',
        draining: String(e.draining),
        paused: String(Boolean(e.pause?.blocked)),
      },
    },
    h(
      'div',
      {
        class: 'exec-head',
        title: 'select for the executor actions',
        onclick: () => {
          app.selectedExecutor = e.id
          $('#exec-select').value = e.id
          render()
        },
      },
      h('div', { class: 'exec-id' }, e.id),
      h('div', { class: 'exec-sub muted' }, [e.harness, e.model].filter(Boolean).join(' · ')),
      h('div', { class: 'exec-use' }, `${e.busy}/${e.slots} slots`),
    ),
    h('div', { class: 'exec-main' }, h('div', { class: 'slots' }, cells), h('div', { class: 'badges' }, badges, state)),
  )
}

function exclusionBadge(x) {
  const parts = [h('b', { class: 'excl-kind' }, x.kind), ' ', h('span', { class: 'excl-reason' }, x.reason)]
  if ((x.kind === 'until' || x.kind === 'manual') && x.until != null) parts.push(' · back ', cd(x.until))
  if (x.kind === 'manual' && x.until == null) parts.push(' · until resumed')
  if (x.kind === 'health') parts.push(' · ', x.nextProbeAt != null ? h('span', {}, 'next probe ', cd(x.nextProbeAt)) : 'probing')
  if (x.kind === 'run') parts.push(' · for the run')
  if (x.thenUntil != null) parts.push(' · then until ', timeOfDay(x.thenUntil))
  return h('span', { class: `badge excl excl-${x.kind}`, dataset: { kind: x.kind, until: x.until ?? '' }, title: `${x.description}\nsince ${timeOfDay(x.since)}` }, parts)
}

// ---------------------------------------------------------------------------------
// the queue, pending reload, the log

function renderQueue(view) {
  const { snapshot, live } = view
  const roles = snapshot.roles
  $('#queue-count').textContent = snapshot.queue.length ? `${snapshot.queue.length} waiting` : 'empty'
  $('#queue tbody').replaceChildren(
    ...snapshot.queue.map((q, i) => {
      const wants = []
      if (q.pin) wants.push(`pin ${q.pin}`)
      if (q.prefer) wants.push(`prefer ${q.prefer}`)
      if (q.avoid?.length) wants.push(`avoid ${q.avoid.join(', ')}`)
      const selected = app.explainRequest?.request === q.request
      return h(
        'tr',
        {
          class: selected ? 'selected' : '',
          dataset: { request: q.request, role: q.role, ahead: q.ahead },
          title: 'click to explain',
          onclick: () => {
            app.explainRequest = { role: q.role, request: q.request }
            render()
          },
        },
        h('td', {}, String(i + 1)),
        h('td', {}, h('b', {}, q.request), shownLabel(q.request, q.label) ? h('span', { class: 'muted label' }, ` ${q.label}`) : null),
        h('td', {}, h('span', { class: 'role-dot', style: { '--c': roleColor(roles, q.role) } }), q.role),
        h('td', {}, q.rank ?? '—'),
        h('td', { class: 'waiting' }, cd(q.waitingSince, true)),
        h('td', { class: 'ahead' }, String(q.ahead)),
        h('td', { class: 'small' }, wants.join('; '), q.deadline != null ? h('span', {}, wants.length ? '; ' : '', 'deadline ', cd(q.deadline)) : null),
        h('td', {}, live ? h('button', { class: 'mini', title: 'cancel', onclick: (ev) => (ev.stopPropagation(), act(() => app.session.cancel(q.request) && `cancelled ${q.request}`)) }, 'cancel') : null),
      )
    }),
  )
}

function renderPendingReload(view) {
  const box = $('#pending-reload')
  const pending = view?.snapshot.pendingReload
  if (!pending) {
    box.hidden = true
    box.replaceChildren()
    return
  }
  box.hidden = false
  box.replaceChildren(
    h('b', {}, 'reload waiting for preflights '),
    h('span', { class: 'muted' }, `since ${timeOfDay(pending.since)}: `),
    ...pending.awaiting.map((id) =>
      h(
        'span',
        { class: 'duty', dataset: { preflight: id } },
        id,
        view.live ? h('button', { class: 'mini', onclick: () => act(() => app.session.preflightResult(id, true) && `preflight ${id} passed`) }, 'pass') : null,
        view.live ? h('button', { class: 'mini', onclick: () => act(() => app.session.preflightResult(id, false, 'the harness did not start') && `preflight ${id} failed`) }, 'fail') : null,
      ),
    ),
  )
}

function renderLog(view) {
  const showInputs = $('#log-inputs').checked
  const showEffects = $('#log-effects').checked
  const items = []
  const entries = view.log()
  for (const entry of entries) {
    if (entry.kind === 'input') {
      if (showInputs) items.push(h('li', { class: 'log-input', dataset: { step: entry.step } }, h('time', {}, timeOfDay(entry.now)), h('span', { class: 'arrow' }, '→ '), describeInput(entry.input)))
    } else if (entry.kind === 'error') {
      items.push(h('li', { class: 'log-error', dataset: { code: entry.error.code } }, h('time', {}, timeOfDay(entry.now)), h('span', { class: 'name' }, entry.error.code), ' ', entry.error.message))
    } else if (entry.output.type === 'event') {
      const o = entry.output
      items.push(
        h('li', { class: `log-event level-${o.level}`, dataset: { name: o.name }, title: JSON.stringify(o.fields) }, h('time', {}, timeOfDay(entry.now)), h('span', { class: 'name' }, o.name), ' ', o.message),
      )
    } else if (showEffects) {
      const text = describeEffect(entry.output)
      if (text) items.push(h('li', { class: 'log-effect', dataset: { effect: entry.output.type } }, h('time', {}, timeOfDay(entry.now)), h('span', { class: 'arrow' }, '⇢ '), text))
    }
  }
  const log = $('#log')
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40
  log.replaceChildren(...items.slice(-400))
  $('#log-count').textContent = `${items.length} shown`
  if (atBottom || app.mode === 'replay') log.scrollTop = log.scrollHeight
}

/** The state file a host would hold: every persist so far, folded by the core (its text, each entry marked). */
function renderPersist(view) {
  const file = view ? (view.live ? app.session.stateFile : app.replay.stateFileAt(app.replay.position)) : null
  const pre = $('#persist')
  const note = $('#persist-note')
  if (!file || file.text === null || (file.persists === 0 && file.entries.length === 0)) {
    pre.dataset.entries = '0'
    pre.textContent = 'nothing persisted yet'
    note.textContent = ''
    return
  }
  const { entries, last } = file
  const pieces = entryPieces(file.text, entries) ?? [{ text: file.text }]
  pre.dataset.entries = String(entries.length)
  pre.replaceChildren(
    ...pieces.map(({ text, entry }) =>
      entry
        ? h('span', { class: `file-entry${last && entry.step === last.step ? ' fresh' : ''}`, dataset: { id: entry.entry.id, step: entry.step ?? '' }, title: entry.step === null ? '' : `written at step ${entry.step + 1}` }, text)
        : text,
    ),
  )
  const what = last
    ? [last.written.length && `wrote ${last.written.join(', ')}`, last.removed.length && `removed ${last.removed.join(', ')}`].filter(Boolean).join('; ')
    : ''
  note.replaceChildren(
    `${file.persists} persist${file.persists === 1 ? '' : 's'} folded`,
    last ? ` · the last (step ${last.step + 1}, ${timeOfDay(last.now)}) ${what}` : '',
    entries.length > (last?.written.length ?? 0) ? ' · the other entries kept from earlier persists' : '',
  )
}

// ---------------------------------------------------------------------------------
// explain

function renderExplain(view) {
  const box = $('#explain')
  const req = app.explainRequest
  if (!req || !view) {
    delete box.dataset.request
    delete box.dataset.role
    delete box.dataset.pick
    box.replaceChildren(h('p', { class: 'hint' }, 'Click a waiting request or a role.'))
    return
  }
  let result
  let note = null
  try {
    result = view.policy.explain(req)
  } catch (error) {
    if (!req.request) {
      box.replaceChildren(h('p', { class: 'error-text' }, `${error.code ?? ''} ${error.message}`))
      return
    }
    // The request no longer waits: explain its role instead.
    note = `${req.request} no longer waits; showing a new ${req.role} request`
    result = view.policy.explain({ role: req.role })
  }
  const what = req.request ? `waiting request ${req.request}` : `a new ${req.role} request`
  const extra = [req.pin && `pin ${req.pin}`, req.prefer && `prefer ${req.prefer}`, req.avoid?.length && `avoid ${req.avoid.join(', ')}`].filter(Boolean)
  box.dataset.request = req.request ?? ''
  box.dataset.role = result.role
  box.dataset.pick = result.pick ?? ''
  box.replaceChildren(
    ...[
    h('div', { class: 'explain-head' }, h('b', {}, what), ` (${result.role})`, extra.length ? ` · ${extra.join('; ')}` : ''),
    note ? h('div', { class: 'muted small' }, note) : null,
    h(
      'div',
      { class: 'explain-pick' },
      result.pick ? h('span', {}, 'would get ', h('b', {}, result.pick), ' now') : h('span', {}, 'no executor can take it now'),
      ' · ',
      result.canEverServe ? 'can be served eventually' : h('b', { class: 'error-text' }, 'no executor can ever serve it'),
    ),
    h(
      'table',
      { class: 'explain-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'executor'), h('th', { title: 'could take it now' }, 'ok'), h('th', { class: 'prio', title: 'priority for this role (lower first)' }, 'prio'), h('th', {}, 'why not'))),
      h(
        'tbody',
        {},
        result.executors.map((x) =>
          h(
            'tr',
            { class: x.ok ? 'ok' : 'no', dataset: { executor: x.id, ok: String(x.ok) } },
            h('td', {}, x.id === result.pick ? h('b', {}, x.id) : x.id),
            h('td', {}, x.ok ? '✓' : '✗'),
            h('td', { class: 'prio' }, x.priority ?? '—'),
            h('td', { class: 'reasons' }, x.ok ? (x.id === result.pick ? 'free — the pick' : 'free') : x.reasons.join('; ')),
          ),
        ),
      ),
    ),
    ].filter(Boolean),
  )
}

// ---------------------------------------------------------------------------------
// replay

/** A file's text, decoded as it streams in (no single long decode), with progress. */
async function readText(file, onProgress) {
  const parts = []
  let bytes = 0
  const reader = file.stream().getReader()
  const decoder = new TextDecoder()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    bytes += value.byteLength
    parts.push(decoder.decode(value, { stream: true }))
    onProgress(bytes / Math.max(1, file.size))
  }
  parts.push(decoder.decode())
  return parts.join('')
}

/**
 * Opens a trace: reads it (`source` is its text or a File),
 * parses and replays it in slices with a progress bar, the page answering input all
 * along; Cancel (or opening another) abandons it.
 */
async function loadTrace(source, name) {
  stopPlaying()
  const token = { cancelled: false }
  if (app.loading) app.loading.cancelled = true
  app.loading = token
  const live = () => app.loading === token && !token.cancelled
  $('#trace-error').textContent = ''
  setMode('replay')
  app.replay = null
  $('#replay-body').hidden = true
  $('#chart').replaceChildren()
  $('#chart')._scale = null
  $('#trace-name').textContent = name
  render()
  const started = performance.now()
  const progress = loadingProgress(name)
  let trace
  let replay
  try {
    progress('reading', 0)
    const text = source instanceof Blob ? await readText(source, (share) => live() && progress('reading', share, `${(source.size / 1e6).toFixed(1)} MB`)) : source
    if (!live()) return
    progress('parsing', 0, `${(text.length / 1e6).toFixed(1)} MB`)
    trace = await parseTraceInSlices(text, { onProgress: (share) => live() && progress('parsing', share, `${(text.length / 1e6).toFixed(1)} MB`) })
    if (!live()) return
    replay = new Replay(rota, trace, { deferred: true })
  } catch (error) {
    if (!live()) return
    progress(null)
    app.loading = null
    $('#trace-error').textContent = `${error.code ? `${error.code}: ` : ''}${error.message}`
    setStatus(`cannot replay ${name}: ${error.message}`, 'error')
    return
  }
  const total = trace.steps.length
  const finished = await replay.complete((done) => live() && progress('replaying', done / Math.max(1, total), `${done.toLocaleString('en')} / ${total.toLocaleString('en')} steps`), {
    cancelled: () => !live(),
  })
  if (!finished || !live()) return
  progress('drawing', 0, 'the board')
  await nextFrame() // the bar says so before the board takes the thread
  if (!live()) return
  app.loading = null
  act(() => {
    app.replay = replay
    replay.name = name
    app.replayClock = null
    // The editor shows the document the trace starts with (Start session runs it afresh).
    setDocText(documentText(trace.document))
    app.explainRequest = null
    replay.seek(0)
    setMode('replay')
    $('#trace-name').textContent = `${name}: ${trace.steps.length} steps, ${replay.executorIds.length} executors`
    $('#replay-body').hidden = false
    const scrub = $('#rp-scrub')
    scrub.max = String(replay.length)
    scrub.value = '0'
    renderVerify()
  })
  // The chart in a task of its own: the board above is painted first.
  progress('drawing', 0.5, 'the chart')
  await nextFrame()
  if (app.replay !== replay) return
  drawChart()
  renderReplayPosition()
  replay.loadMs = Math.round(performance.now() - started)
  $('#trace-loading').dataset.loadMs = String(replay.loadMs)
  setStatus(`trace loaded: ${name} (${total.toLocaleString('en')} steps in ${(replay.loadMs / 1000).toFixed(1)} s)`)
  progress(null)
}

/** After the next paint. */
function nextFrame() {
  return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)))
}

/** The loading bar: `progress(phase, share, detail)`; `progress(null)` hides it. */
function loadingProgress(name) {
  // Each phase's part of the bar (replaying is most of the work).
  const parts = { reading: [0, 0.05], parsing: [0.05, 0.2], replaying: [0.2, 0.97], drawing: [0.97, 1] }
  return (phase, share = 0, detail = '') => {
    const box = $('#trace-loading')
    if (phase === null) {
      box.hidden = true
      delete box.dataset.phase
      return
    }
    const [from, to] = parts[phase]
    const value = from + (to - from) * Math.max(0, Math.min(1, share))
    box.hidden = false
    box.dataset.phase = phase
    $('#trace-progress').value = value
    $('#trace-progress-text').textContent = `${name}: ${phase}${detail ? ` ${detail}` : ''} · ${Math.floor(value * 100)}%`
  }
}

function cancelLoading() {
  const token = app.loading
  if (!token) return
  token.cancelled = true
  app.loading = null
  $('#trace-loading').hidden = true
  $('#trace-name').textContent = ''
  setStatus('stopped loading the trace')
  render()
}

function renderVerify() {
  const r = app.replay
  const box = $('#rp-verify')
  const verified = r.length - r.unverified
  let kind
  const parts = []
  if (r.mismatches.length) {
    kind = 'mismatch'
    const first = r.mismatches[0]
    parts.push(
      h('b', {}, `✗ ${r.mismatches.length} of ${verified} recorded steps differ from the core's outputs; first at step ${first.step + 1} (${describeInput(r.trace.steps[first.step].input)})`),
      h(
        'details',
        {},
        h('summary', {}, 'show the difference'),
        h('pre', { class: 'mono small' }, `trace:\n${JSON.stringify(first.expected, null, 1)}\n\ncore now:\n${JSON.stringify(first.actual, null, 1)}`),
      ),
    )
  } else if (verified === 0) {
    kind = 'unverified'
    parts.push(`replayed ${r.length} steps (the trace records no outputs to compare)`)
  } else {
    kind = 'ok'
    parts.push(`✓ replayed ${r.length} steps: every recorded output is identical to the core's${r.unverified ? ` (${r.unverified} steps had none recorded)` : ''}`)
  }
  if (r.trace.meta.skippedSteps) parts.push(h('div', { class: 'muted' }, `${r.trace.meta.skippedSteps} step(s) that feed no input (queries, snapshot checks, unreadable input text) skipped`))
  if (r.trace.meta.checks) parts.push(h('div', { class: 'muted small' }, `${r.trace.meta.name ?? 'vector'}: ${r.trace.meta.checks}`))
  const expectedFinal = r.trace.meta.finalSnapshot ?? r.trace.meta.snapshot ?? r.trace.meta.final
  if (expectedFinal) {
    const same = jsonEqual(expectedFinal, r.finalSnapshot)
    if (!same) kind = 'mismatch'
    parts.push(h('div', {}, same ? '✓ the final snapshot equals the trace’s' : '✗ the final snapshot differs from the trace’s'))
  }
  box.dataset.verified = kind
  box.replaceChildren(...parts)
}

function drawChart() {
  const r = app.replay
  if (!r) return
  renderChart($('#chart'), r, { axis: $('#rp-axis').value, roles: r.policy.snapshot().roles })
  $('#chart-legend').replaceChildren(
    h('span', { class: 'lg util' }, 'slot use'),
    h('span', { class: 'lg band-until' }, 'until'),
    h('span', { class: 'lg band-health' }, 'health'),
    h('span', { class: 'lg band-run' }, 'run'),
    h('span', { class: 'lg band-manual' }, 'manual'),
    h('span', { class: 'lg band-paused' }, 'provisioning paused'),
    h('span', { class: 'lg band-draining' }, 'draining'),
  )
}

function renderReplayPosition() {
  const r = app.replay
  if (!r) return
  const pos = r.position
  const out = $('#rp-pos')
  out.dataset.position = String(pos)
  out.dataset.length = String(r.length)
  out.textContent = `step ${pos} / ${r.length}`
  $('#rp-scrub').value = String(pos)
  $('#rp-input').textContent = pos > 0 ? `last input: ${describeInput(r.trace.steps[pos - 1].input)}` : 'before the first input'
  moveChartCursor($('#chart'), r, pos, app.replayClock)
  $('#rp-play').textContent = app.playing ? '⏸ pause' : '▶ play'
  $('#rp-play').dataset.playing = String(Boolean(app.playing))
}

function seek(p, clock = null) {
  const r = app.replay
  if (!r) return
  r.seek(p)
  app.replayClock = clock
  render()
}

function stopPlaying() {
  if (app.playing) clearTimeout(app.playing.timer)
  app.playing = null
  app.replayClock = null
  if (app.replay) renderReplayPosition()
}

function play() {
  const r = app.replay
  if (!r) return
  if (app.playing) return stopPlaying()
  if (r.position >= r.length) r.seek(0)
  const [mode, rate] = $('#rp-speed').value.split(':')
  const state = { mode, rate: Number(rate), last: performance.now(), carry: 0, clock: r.nowAt(r.position), timer: null }
  app.playing = state
  const frame = () => {
    if (app.playing !== state) return
    const t = performance.now()
    const dt = t - state.last
    state.last = t
    let target = r.position
    if (mode === 's') {
      state.carry += (dt * state.rate) / 1000
      const whole = Math.floor(state.carry)
      state.carry -= whole
      target = Math.min(r.length, r.position + whole)
      app.replayClock = null
    } else {
      state.clock += dt * state.rate
      while (target < r.length && r.nowAt(target + 1) <= state.clock) target++
      // Nothing happens for a long while: jump to the next step rather than wait.
      if (target === r.position && target < r.length && r.nowAt(target + 1) - state.clock > 60 * 60_000) state.clock = r.nowAt(target + 1)
      app.replayClock = state.clock
    }
    if (target !== r.position) r.seek(target)
    if (target >= r.length) {
      app.playing = null
      app.replayClock = null
      render()
      return
    }
    render()
    state.timer = setTimeout(frame, 30)
  }
  renderReplayPosition()
  state.timer = setTimeout(frame, 30)
}

function takeOver() {
  const r = app.replay
  if (!r) return
  stopPlaying()
  act(() => {
    const pos = r.position
    const policy = r.policy.clone()
    app.session = new Session(rota, r.trace.document, r.trace.options, {
      policy,
      steps: r.stepsUpTo(pos),
      now: r.nowAt(pos),
      startDocument: r.trace.document,
    })
    setDocText(documentText(policy.document()))
    setMode('explore')
    return `exploring from step ${pos} of ${r.name}`
  })
}

// ---------------------------------------------------------------------------------
// modes, time, wiring

/** Whether an editor's input event put text in at once (a paste or a drop). */
const pasted = (ev) => ev.inputType === 'insertFromPaste' || ev.inputType === 'insertFromDrop'

function setMode(mode) {
  if (mode !== app.mode) {
    stopPlaying()
    app.explainRequest = null
    app.selectKey = ''
  }
  app.mode = mode
  $('#mode-explore').classList.toggle('active', mode === 'explore')
  $('#mode-replay').classList.toggle('active', mode === 'replay')
  $('#mode-explore').setAttribute('aria-selected', String(mode === 'explore'))
  $('#mode-replay').setAttribute('aria-selected', String(mode === 'replay'))
  $('#replay-panel').hidden = mode !== 'replay'
  document.body.dataset.mode = mode
  if (mode !== 'explore') setClockRunning(false)
}

function setClockRunning(on) {
  $('#clock-run').checked = on
  if (app.clockTimer) clearInterval(app.clockTimer)
  app.clockTimer = null
  if (!on) return
  let last = performance.now()
  app.clockTimer = setInterval(() => {
    const s = app.session
    if (!s || app.mode !== 'explore') return
    const t = performance.now()
    s.now += Math.round((t - last) * Number($('#clock-rate').value))
    last = t
    const wake = s.wakeAt
    if (wake != null && wake <= s.now) act(() => s.feed({ type: 'tick' }))
    else {
      renderClock(current())
      updateCountdowns(s.now)
    }
  }, 250)
}

function leaseFormRequest() {
  const form = $('#lease-form')
  const data = new FormData(form)
  return {
    role: data.get('role'),
    rank: data.get('rank'),
    label: data.get('label') || undefined,
    prefer: data.get('prefer') || undefined,
    pin: data.get('pin') || undefined,
    deadlineMs: data.get('deadline') || undefined,
    tryLease: data.get('tryLease') === 'on',
    avoid: $$('#avoid-list input:checked').map((i) => i.value),
  }
}

function outcome(step) {
  const out = step.outputs ?? []
  const granted = out.find((o) => o.type === 'granted')
  if (granted) return `${granted.request}: granted ${granted.executor} (lease ${granted.lease})`
  const decision = out.find((o) => ['waiting', 'exhausted', 'unavailable', 'timedOut', 'createMachine'].includes(o.type))
  if (decision) return `${decision.request}: ${decision.type === 'createMachine' ? `creating a machine on ${decision.executor}` : decision.type}`
  const event = out.find((o) => o.type === 'event')
  return event ? event.message : `${describeInput(step.input)}: no change`
}

function wire() {
  $('#mode-explore').addEventListener('click', () => {
    if (app.loading) cancelLoading() // a trace half loaded would pull the page back to Replay
    if (app.mode !== 'explore') setStatus(app.session ? `explore: the session at ${clockText(app.session.now)} UTC (virtual)` : 'explore: start a session')
    setMode('explore')
    render()
  })
  $('#mode-replay').addEventListener('click', () => {
    if (app.mode !== 'replay') setStatus(app.replay ? `replay: ${app.replay.name}` : 'replay: open a trace file, paste one, or replay this session')
    setMode('replay')
    render()
  })

  // the document
  let timer = null
  $('#doc-editor').addEventListener('input', (ev) => {
    clearTimeout(timer)
    if (pasted(ev)) {
      redactEditor('#doc-editor')
      flushDoc()
      return
    }
    timer = setTimeout(flushDoc, 150)
  })
  // Typed by hand: redacted once the editor is left (not under the cursor).
  $('#doc-editor').addEventListener('change', () => {
    redactEditor('#doc-editor')
    flushDoc()
  })
  $('#overlay-editor').addEventListener('input', (ev) => pasted(ev) && redactEditor('#overlay-editor'))
  $('#overlay-editor').addEventListener('change', () => redactEditor('#overlay-editor'))
  $('#doc-editor').addEventListener('scroll', () => {
    $('#doc-gutter').scrollTop = $('#doc-editor').scrollTop
  })
  $('#load-example').addEventListener('click', async () => {
    await loadExample()
    setStatus('the example roster is in the editor: Start session to run it, or Plan reload')
  })
  $('#doc-file').addEventListener('change', async (ev) => {
    const file = ev.target.files[0]
    if (file) setDocText(await file.text())
    ev.target.value = ''
  })
  $('#doc-format').addEventListener('click', () => {
    if (app.doc.value) setDocText(JSON.stringify(app.doc.value, null, 2))
  })
  $('#doc-start').addEventListener('click', startSession)
  $('#doc-plan').addEventListener('click', () =>
    act(() => {
      flushDoc()
      if (!app.doc.value || app.doc.violations.length) throw new Error('the document has violations: fix them first')
      const plan = app.session.plan(app.doc.value)
      renderPlan(plan)
      app.plannedDocument = app.doc.value
      return 'plan ready: nothing changed yet — Apply reload to do it'
    }),
  )
  $('#doc-apply').addEventListener('click', () =>
    act(() => {
      flushDoc()
      if (!app.plannedDocument) throw new Error('the document changed since the plan: plan again')
      const step = app.session.reload(app.plannedDocument)
      app.plannedDocument = null
      $('#plan').hidden = true
      const events = step.outputs.filter((o) => o.type === 'event').map((o) => o.message)
      return events.join(' · ') || 'reloaded'
    }),
  )

  // the overlay
  $('#overlay-example').addEventListener('click', async () => {
    $('#overlay-editor').value = await (await fetch('example-overlay.json')).text()
  })
  $('#overlay-file').addEventListener('change', async (ev) => {
    const file = ev.target.files[0]
    if (file) $('#overlay-editor').value = await file.text()
    redactEditor('#overlay-editor')
    ev.target.value = ''
  })
  $('#overlay-merge').addEventListener('click', () => {
    $('#overlay-error').textContent = ''
    try {
      const user = JSON.parse($('#doc-editor').value)
      const repo = JSON.parse($('#overlay-editor').value)
      setDocText(documentText(rota.merge(user, repo)))
      setStatus('merged the overlay into the document (not applied: Plan reload, or Start session)')
    } catch (error) {
      const detail = error.violations?.map((v) => `${v.path}: ${v.message}`).join('; ')
      $('#overlay-error').textContent = `${error.code ? `${error.code}: ` : ''}${error.message}${detail ? ` — ${detail}` : ''}`
    }
  })

  // time
  for (const button of $$('[data-advance]')) {
    button.addEventListener('click', () => act(() => (app.session.advance(Number(button.dataset.advance)), `time +${span(Number(button.dataset.advance))}`)))
  }
  $('#to-wake').addEventListener('click', () => act(() => (app.session.toWake() ? `time → ${timeOfDay(app.session.now)} (wake-up)` : 'no wake-up pending')))
  $('#clock-run').addEventListener('change', (ev) => setClockRunning(ev.target.checked))

  // leases
  $('#lease-form').addEventListener('submit', (ev) => {
    ev.preventDefault()
    act(() => outcome(app.session.lease(leaseFormRequest())))
  })
  $('#lease-explain').addEventListener('click', () => {
    const req = leaseFormRequest()
    app.explainRequest = { role: req.role, avoid: req.avoid, prefer: req.prefer, pin: req.pin }
    render()
  })

  // executor actions
  $('#exec-select').addEventListener('change', (ev) => {
    app.selectedExecutor = ev.target.value
    render()
  })
  const selected = () => $('#exec-select').value
  for (const button of $$('[data-failure]')) {
    button.addEventListener('click', () =>
      act(() => {
        const kind = button.dataset.failure
        const step = app.session.report(selected(), kind, { message: FAILURE_KINDS[kind], retryAfterMs: $('#retry-after').value || undefined })
        return outcome(step)
      }),
    )
  }
  $('#exclude').addEventListener('click', () =>
    act(() => outcome(app.session.exclude(selected(), { reason: $('#exclude-reason').value || 'paused by the operator', untilMs: $('#exclude-for').value || undefined }))),
  )
  $('#resume').addEventListener('click', () => act(() => outcome(app.session.resume(selected()))))

  // the log
  $('#log-inputs').addEventListener('change', render)
  $('#log-effects').addEventListener('change', render)

  // traces
  $('#download-trace').addEventListener('click', () => {
    const blob = new Blob([JSON.stringify(redactedTrace(app.session.trace()), null, 1)], { type: 'application/json' })
    const a = h('a', { href: URL.createObjectURL(blob), download: 'rota-session-trace.json' })
    document.body.append(a)
    a.click()
    a.remove()
  })
  $('#trace-file').addEventListener('change', async (ev) => {
    const file = ev.target.files[0]
    if (file) loadTrace(file, file.name)
    ev.target.value = ''
  })
  $('#trace-from-session').addEventListener('click', () => {
    if (!app.session) return setStatus('no session to replay', 'error')
    loadTrace(JSON.stringify(app.session.trace()), 'this session')
  })
  $('#trace-paste-load').addEventListener('click', () => loadTrace($('#trace-paste').value, 'pasted trace'))
  $('#trace-cancel').addEventListener('click', cancelLoading)
  $('#rp-play').addEventListener('click', play)
  $('#rp-start').addEventListener('click', () => (stopPlaying(), seek(0)))
  $('#rp-end').addEventListener('click', () => (stopPlaying(), seek(app.replay?.length ?? 0)))
  $('#rp-back').addEventListener('click', () => (stopPlaying(), seek((app.replay?.position ?? 0) - 1)))
  $('#rp-fwd').addEventListener('click', () => (stopPlaying(), seek((app.replay?.position ?? 0) + 1)))
  $('#rp-scrub').addEventListener('input', (ev) => {
    const p = Number(ev.target.value)
    stopPlaying()
    seek(p)
  })
  $('#rp-axis').addEventListener('change', () => (drawChart(), renderReplayPosition()))
  $('#rp-speed').addEventListener('change', () => {
    if (app.playing) {
      stopPlaying()
      play()
    }
  })
  $('#rp-takeover').addEventListener('click', takeOver)
  $('#chart').addEventListener('click', (ev) => {
    const r = app.replay
    if (!r) return
    const p = chartPositionAt($('#chart'), r, ev)
    stopPlaying()
    seek(p)
  })
  let resize = null
  window.addEventListener('resize', () => {
    clearTimeout(resize)
    resize = setTimeout(() => app.replay && (drawChart(), renderReplayPosition()), 150)
  })
  window.addEventListener('keydown', (ev) => {
    if (app.mode !== 'replay' || ev.target.closest('textarea, input, select')) return
    if (ev.key === 'ArrowRight') $('#rp-fwd').click()
    else if (ev.key === 'ArrowLeft') $('#rp-back').click()
    else if (ev.key === ' ') {
      ev.preventDefault()
      play()
    }
  })
}

main()
