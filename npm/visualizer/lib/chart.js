// The replay chart (SVG): one lane per executor with its slot use over time as a step
// area, exclusions (by kind), provisioning pauses and draining as bands behind it, the
// queue length on top, and a cursor at the replay's position.

import { span, timeOfDay } from './format.js'

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
  const xs = Array.from({ length: n + 1 }, (_, p) => s.x(p))
  const xRight = (p) => (p + 1 <= n ? xs[p + 1] : s.xEnd)

  // axis ticks
  const axisG = el('g', { class: 'axis' })
  const ticks = 6
  for (let i = 0; i <= ticks; i++) {
    const x = LABEL + (s.plot * i) / ticks
    let label
    if (s.axis === 'time') {
      const t = Math.round(s.t0 + ((s.end - s.t0) * i) / ticks)
      // Time of day (as the log shows it) unless the run spans days: then time since its start.
      label = s.end - s.t0 < 20 * 3_600_000 ? timeOfDay(t).slice(0, 8) : `+${span(t - s.t0)}`
    }
    else label = `step ${Math.round(((n + 1) * i) / ticks)}`
    axisG.append(el('line', { x1: x, x2: x, y1: AXIS - 4, y2: height, class: 'grid' }))
    axisG.append(el('text', { x, y: AXIS - 6, 'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle' }, label))
  }
  svg.append(axisG)

  // queue lane
  const qTop = AXIS
  const qMax = Math.max(1, ...replay.timeline.map((t) => t.queue))
  const qG = el('g', { class: 'lane queue-lane', 'data-lane': 'queue' })
  qG.append(el('text', { x: 4, y: qTop + QUEUE_LANE / 2 + 4, class: 'lane-label' }, `queue (max ${qMax})`))
  let qPath = ''
  for (const r of runs(replay.timeline.map((t) => t.queue))) {
    if (!r.value) continue
    const y = qTop + QUEUE_LANE - 3 - (r.value / qMax) * (QUEUE_LANE - 6)
    qPath += `M${xs[r.from]},${qTop + QUEUE_LANE - 3}V${y}H${xRight(r.to - 1)}V${qTop + QUEUE_LANE - 3}Z`
  }
  qG.append(el('path', { d: qPath || 'M0,0', class: 'queue-area' }))
  svg.append(qG)

  // executor lanes
  ids.forEach((id, i) => {
    const top = AXIS + QUEUE_LANE + i * LANE
    const g = el('g', { class: 'lane', 'data-lane': id })
    g.append(el('rect', { x: LABEL, y: top + 2, width: s.plot, height: LANE - 4, class: 'lane-bg' }))
    const lanes = replay.timeline.map((t) => t.lanes[id])
    const band = (key, cls) => {
      for (const r of runs(lanes.map((l) => (l ? key(l) : null)))) {
        if (!r.value) continue
        const x0 = xs[r.from]
        const x1 = Math.max(x0 + 1.5, xRight(r.to - 1))
        // a faint tint over the whole lane, and a solid strip on top
        g.append(el('rect', { x: x0, y: top + 2, width: x1 - x0, height: LANE - 4, class: `tint ${cls(r.value)}` }))
        g.append(el('rect', { x: x0, y: top + 2, width: x1 - x0, height: STRIP, class: `band ${cls(r.value)}`, 'data-band': r.value }))
      }
    }
    band((l) => l.exclusion, (v) => `band-${v}`)
    band((l) => (l.paused ? 'paused' : null), () => 'band-paused')
    band((l) => (l.draining ? 'draining' : null), () => 'band-draining')
    // utilization: busy / slots, drawn as a step area (over capacity clipped at the top)
    const use = lanes.map((l) => (!l ? null : l.slots > 0 ? Math.min(1, l.busy / l.slots) : l.busy > 0 ? 1 : 0))
    let d = ''
    const base = top + LANE - 3
    for (const r of runs(use)) {
      if (!r.value) continue
      const y = base - r.value * (LANE - 6 - STRIP - 2)
      d += `M${xs[r.from]},${base}V${y}H${xRight(r.to - 1)}V${base}Z`
    }
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
