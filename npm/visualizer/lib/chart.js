// The replay chart (SVG): one lane per executor with its slot use over time as a step
// area, exclusions (by kind), provisioning pauses and draining as bands behind it, the
// queue length on top, and a cursor at the replay's position.

import { timeOfDay } from './format.js'

const NS = 'http://www.w3.org/2000/svg'
const LABEL = 120
const QUEUE_LANE = 26
const LANE = 34
const STRIP = 7 // the band strip on top of each lane
const AXIS = 18
const PAD_RIGHT = 12

function el(tag, attrs = {}, text) {
  const node = document.createElementNS(NS, tag)
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v))
  if (text !== undefined) node.textContent = text
  return node
}

/** x of position p (the moment its state begins) in the given axis. */
function scaleFor(replay, axis, width) {
  const n = replay.length
  const t0 = replay.nowAt(0)
  const t1 = replay.nowAt(n)
  const plot = Math.max(50, width - LABEL - PAD_RIGHT)
  if (axis === 'time' && t1 > t0) {
    // The last state gets a little room after the last input.
    const end = t1 + Math.max(1000, (t1 - t0) * 0.03)
    const xt = (t) => LABEL + ((t - t0) / (end - t0)) * plot
    return { axis, plot, t0, end, xt, x: (p) => xt(replay.nowAt(p)), xEnd: LABEL + plot }
  }
  const x = (p) => LABEL + (p / (n + 1)) * plot
  return { axis: 'step', plot, x, xt: null, xEnd: LABEL + plot }
}

const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR
/** Tick intervals on the time axis, shortest first. */
const TIME_STEPS = [1, 2, 5, 10, 15, 30].map((k) => k * SECOND)
  .concat([1, 2, 5, 10, 15, 30].map((k) => k * MINUTE))
  .concat([1, 2, 3, 6, 12].map((k) => k * HOUR))
  .concat([1, 2, 5, 10, 20, 50, 100].map((k) => k * DAY))
/** Space between two axis labels, beyond their own widths (px). */
const LABEL_GAP = 14

/** The chart's text font (style.css: `#chart text`). */
const CHART_FONT = "10.5px ui-monospace, 'DejaVu Sans Mono', 'Liberation Mono', monospace"

/**
 * The width of one character of the chart's (monospace) font, measured once on a
 * canvas: measuring an SVG text would force a layout of the whole page.
 */
function charWidth(svg) {
  if (svg._charWidth) return svg._charWidth
  const context = document.createElement('canvas').getContext('2d')
  let measured = 0
  if (context) {
    context.font = CHART_FONT
    measured = context.measureText('0123456789').width / 10
  }
  svg._charWidth = measured > 0 ? measured : 6.5
  return svg._charWidth
}

/** `+3d 4h`, `+1h 30m`, `+45s`: a time since the trace's start, two units at most. */
export function offsetLabel(ms) {
  const units = [
    ['d', DAY],
    ['h', HOUR],
    ['m', MINUTE],
    ['s', SECOND],
  ]
  const parts = []
  let rest = Math.round(ms)
  for (const [name, size] of units) {
    const k = Math.floor(rest / size)
    rest -= k * size
    if (k > 0 || parts.length) parts.push(k > 0 ? `${k}${name}` : null)
    if (parts.length === 2) break
  }
  const shown = parts.filter(Boolean)
  return shown.length ? `+${shown.join(' ')}` : '+0'
}

/**
 * The axis ticks `[{ x, label }]` for scale `s` over n steps: the shortest round
 * interval whose labels, `cw` px a character, keep LABEL_GAP between them; a label
 * that would leave the chart is left out.
 */
export function axisTicks(s, n, width, cw = 6.5) {
  const candidates = []
  if (s.axis === 'time') {
    const spanMs = s.end - s.t0
    // Time of day (as the log shows it) unless the run spans most of a day or more.
    const ofDay = spanMs < 20 * HOUR
    for (const interval of TIME_STEPS) {
      const first = ofDay ? Math.ceil(s.t0 / interval) * interval : s.t0
      const ticks = []
      for (let t = first; t <= s.end && ticks.length <= 2000; t += interval) {
        const label = ofDay ? (interval < MINUTE ? timeOfDay(t).slice(0, 8) : timeOfDay(t).slice(0, 5)) : offsetLabel(t - s.t0)
        ticks.push({ x: s.xt(t), label })
      }
      candidates.push({ px: (interval / spanMs) * s.plot, ticks })
    }
  } else {
    for (let magnitude = 1; magnitude <= 1e9; magnitude *= 10) {
      for (const k of [1, 2, 5]) {
        const interval = k * magnitude
        const ticks = []
        for (let p = 0; p <= n + 1 && ticks.length <= 2000; p += interval) ticks.push({ x: s.x(p), label: p === 0 ? 'step 0' : String(p) })
        candidates.push({ px: (interval / (n + 1)) * s.plot, ticks })
      }
    }
  }
  const widest = (ticks) => Math.max(0, ...ticks.map((t) => t.label.length)) * cw
  const chosen = candidates.find((c) => c.px >= widest(c.ticks) + LABEL_GAP) ?? candidates[candidates.length - 1]
  return chosen.ticks.filter((t) => {
    const half = (t.label.length * cw) / 2
    return t.x - half >= 0 && t.x + half <= width
  })
}

/** Runs of equal values over positions 0..n: `[{ from, to, value }]` (to exclusive). */
function runs(values) {
  const out = []
  let start = 0
  for (let p = 1; p <= values.length; p++) {
    if (p === values.length || values[p] !== values[start]) {
      out.push({ from: start, to: p, value: values[start] })
      start = p
    }
  }
  return out
}

/**
 * A value per pixel column of the plot (`width` columns from x `left`), from values
 * that each hold over [xs[i], xRight(i)): their mean over the column weighted by how
 * much of it each covers, or their largest. A long trace draws at most a segment per
 * column, whatever its length; null where no value holds.
 */
export function perColumn(values, xs, xRight, left, width, how = 'mean') {
  const columns = Math.max(1, Math.ceil(width))
  const sum = new Float64Array(columns)
  const cover = new Float64Array(columns)
  const max = new Array(columns).fill(null)
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (v === null || v === undefined) continue
    const a = xs[i] - left
    const b = xRight(i) - left
    for (let c = Math.max(0, Math.floor(a)); c < Math.min(columns, Math.ceil(b)); c++) {
      const part = Math.min(b, c + 1) - Math.max(a, c)
      if (part <= 0) continue
      sum[c] += v * part
      cover[c] += part
      if (max[c] === null || v > max[c]) max[c] = v
    }
  }
  return Array.from({ length: columns }, (_, c) => (cover[c] === 0 ? null : how === 'max' ? max[c] : sum[c] / cover[c]))
}

/** The SVG path of a step area over per-column values (zero and null draw nothing). */
function stepArea(columns, left, base, yOf) {
  let d = ''
  for (const r of runs(columns)) {
    if (!r.value) continue
    d += `M${left + r.from},${base}V${yOf(r.value).toFixed(1)}H${left + r.to}V${base}Z`
  }
  return d
}

export function renderChart(svg, replay, { axis = 'time' } = {}) {
  const width = svg.clientWidth || svg.parentElement?.clientWidth || 800
  const ids = replay.executorIds
  const height = AXIS + QUEUE_LANE + ids.length * LANE + 4
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`)
  svg.setAttribute('width', String(width))
  svg.setAttribute('height', String(height))
  svg.replaceChildren()
  const s = scaleFor(replay, axis, width)
  svg._scale = s
  const n = replay.length
  // The board's samples (every position of a short trace): sample i holds from its
  // position to the next sample's.
  const samples = replay.timeline
  const xs = samples.map((sample) => s.x(sample.position))
  const xRight = (i) => (i + 1 < samples.length ? xs[i + 1] : s.xEnd)

  // axis ticks: round times (or step counts), as many as fit without touching
  const axisG = el('g', { class: 'axis' })
  for (const tick of axisTicks(s, n, width, charWidth(svg))) {
    axisG.append(el('line', { x1: tick.x, x2: tick.x, y1: AXIS - 4, y2: height, class: 'grid' }))
    axisG.append(el('text', { x: tick.x, y: AXIS - 6, 'text-anchor': 'middle' }, tick.label))
  }
  svg.append(axisG)

  // queue lane
  const qTop = AXIS
  const qMax = samples.reduce((m, t) => Math.max(m, t.queue), 1)
  const qG = el('g', { class: 'lane queue-lane', 'data-lane': 'queue' })
  qG.append(el('text', { x: 4, y: qTop + QUEUE_LANE / 2 + 4, class: 'lane-label' }, `queue (max ${qMax})`))
  const qBase = qTop + QUEUE_LANE - 3
  const qPath = stepArea(perColumn(samples.map((t) => t.queue), xs, xRight, LABEL, s.plot, 'max'), LABEL, qBase, (v) => qBase - (v / qMax) * (QUEUE_LANE - 6))
  qG.append(el('path', { d: qPath || 'M0,0', class: 'queue-area' }))
  svg.append(qG)

  // executor lanes
  ids.forEach((id, i) => {
    const top = AXIS + QUEUE_LANE + i * LANE
    const g = el('g', { class: 'lane', 'data-lane': id })
    g.append(el('rect', { x: LABEL, y: top + 2, width: s.plot, height: LANE - 4, class: 'lane-bg' }))
    const lanes = samples.map((t) => t.lanes[id])
    // Bands, one path per kind: each pixel column any part of which the state covers.
    const band = (kind, has) => {
      const cols = perColumn(lanes.map((l) => (l && has(l) ? 1 : null)), xs, xRight, LABEL, s.plot, 'max')
      let tint = ''
      let strip = ''
      for (const r of runs(cols)) {
        if (!r.value) continue
        const x0 = LABEL + r.from
        const w = Math.max(1.5, r.to - r.from)
        // a faint tint over the whole lane, and a solid strip on top
        tint += `M${x0},${top + 2}h${w}v${LANE - 4}h${-w}Z`
        strip += `M${x0},${top + 2}h${w}v${STRIP}h${-w}Z`
      }
      if (!strip) return
      g.append(el('path', { d: tint, class: `tint band-${kind}` }))
      g.append(el('path', { d: strip, class: `band band-${kind}`, 'data-band': kind }))
    }
    for (const kind of ['until', 'health', 'run', 'manual']) band(kind, (l) => l.exclusion === kind)
    band('paused', (l) => l.paused)
    band('draining', (l) => l.draining)
    // utilization: busy / slots, drawn as a step area (over capacity clipped at the top)
    const use = lanes.map((l) => (!l ? null : l.slots > 0 ? Math.min(1, l.busy / l.slots) : l.busy > 0 ? 1 : 0))
    const base = top + LANE - 3
    const d = stepArea(perColumn(use, xs, xRight, LABEL, s.plot, 'mean'), LABEL, base, (v) => base - v * (LANE - 6 - STRIP - 2))
    g.append(el('path', { d: d || 'M0,0', class: 'util' }))
    const last = lanes.findLast((l) => l)
    g.append(el('text', { x: 4, y: top + LANE / 2 + 4, class: 'lane-label' }, `${id} (${last?.slots ?? 0})`))
    svg.append(g)
  })

  const cursor = el('line', { x1: LABEL, x2: LABEL, y1: AXIS - 4, y2: height, class: 'cursor', id: 'chart-cursor' })
  svg.append(cursor)
}

/** Moves the cursor to position p (or to `clock`, a virtual time, in time axis). */
export function moveChartCursor(svg, replay, p, clock) {
  const s = svg._scale
  const cursor = svg.querySelector('#chart-cursor')
  if (!s || !cursor) return
  let x = s.x(p)
  if (clock != null && s.xt) x = Math.min(s.xEnd, s.xt(clock))
  cursor.setAttribute('x1', String(x))
  cursor.setAttribute('x2', String(x))
  cursor.dataset.position = String(p)
}

/** The replay position under a mouse event on the chart. */
export function chartPositionAt(svg, replay, event) {
  const s = svg._scale
  if (!s) return replay.position
  const box = svg.getBoundingClientRect()
  const vb = svg.viewBox.baseVal
  const x = ((event.clientX - box.left) / box.width) * (vb?.width || box.width)
  if (x < LABEL) return 0
  if (s.axis === 'time') {
    const t = s.t0 + ((x - LABEL) / s.plot) * (s.end - s.t0)
    // The last position whose time is at or before t: its state shows at t.
    return Math.max(0, Math.min(replay.length, replay.positionAt(Math.floor(t) + 1) - 1))
  }
  return Math.max(0, Math.min(replay.length, Math.round(((x - LABEL) / s.plot) * (replay.length + 1))))
}
