// Small formatting and DOM helpers.

/** `2026-01-01 00:03:15` (UTC) for an epoch-ms instant. */
export function clockText(ms) {
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, '')
}

/** `00:03:15.250` — the time of day, with ms when there are any. */
export function timeOfDay(ms) {
  const iso = new Date(ms).toISOString()
  return iso.endsWith('.000Z') ? iso.slice(11, 19) : iso.slice(11, 23)
}

/** A span as `1h 02m`, `9m 58s`, `45s`, `250ms`; negative spans as `0s`. */
export function span(ms) {
  if (!(ms > 0)) return '0s'
  if (ms < 1000) return `${Math.round(ms)}ms`
  const s = Math.floor(ms / 1000)
  const h = Math.floor(s / 3600)
  const m = Math.floor((s % 3600) / 60)
  const sec = s % 60
  if (h > 0) return `${h}h ${String(m).padStart(2, '0')}m`
  if (m > 0) return `${m}m ${String(sec).padStart(2, '0')}s`
  return `${sec}s`
}

/**
 * Builds an element: `h('div', { class: 'x', onclick: f, dataset: {...} }, ...children)`.
 * Children may be strings, nodes, arrays, null/false (skipped).
 */
export function h(tag, attrs, ...children) {
  const el = tag.startsWith('svg:')
    ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
    : document.createElement(tag)
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue
    if (key === 'dataset') Object.assign(el.dataset, value)
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value)
    else if (key === 'style' && typeof value === 'object') {
      for (const [name, v] of Object.entries(value)) el.style.setProperty(name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`), v)
    }
    else el.setAttribute(key, value === true ? '' : String(value))
  }
  append(el, children)
  return el
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    if (Array.isArray(child)) append(el, child)
    else el.append(child instanceof Node ? child : String(child))
  }
}

/** Role colours: distinguishable hues, assigned in the document's role order. */
const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#e15759', '#76b7b2', '#edc948', '#9c755f', '#ff9da7', '#bab0ac']

export function roleColor(roles, role) {
  const i = roles.indexOf(role)
  return PALETTE[(i < 0 ? roles.length : i) % PALETTE.length]
}

/** A request's label when it says more than its id (`job 605` labelled `job 605`: none). */
export function shownLabel(id, label) {
  if (label === undefined || label === null || label === '') return null
  return String(label).trim() === String(id).trim() ? null : label
}

/** A short text for an input, as the log shows it. */
export function describeInput(input) {
  switch (input.type) {
    case 'lease':
    case 'tryLease': {
      const extra = []
      if (input.rank !== undefined) extra.push(`rank ${input.rank}`)
      if (input.prefer) extra.push(`prefer ${input.prefer}`)
      if (input.pin) extra.push(`pin ${input.pin}`)
      if (input.avoid?.length) extra.push(`avoid ${input.avoid.join(',')}`)
      const label = shownLabel(input.id, input.label)
      if (label) extra.push(`“${label}”`)
      return `${input.type} ${input.id} ${input.role}${extra.length ? ` (${extra.join('; ')})` : ''}`
    }
    case 'release':
      return `release lease ${input.lease}`
    case 'cancel':
      return `cancel ${input.id}`
    case 'report':
      return `report ${input.executor}: ${input.failure?.kind}${input.failure?.message ? ` “${input.failure.message}”` : ''}`
    case 'exclude':
      return `exclude ${input.executor} (${input.kind ?? 'manual'})${input.reason ? `: ${input.reason}` : ''}`
    case 'resume':
      return `resume ${input.executor}`
    case 'probeResult':
      return `probe ${input.executor}: ${input.up ? 'up' : 'down'}`
    case 'machineCreated':
      return `machine created for ${input.id}`
    case 'machineFailed':
      return `machine failed for ${input.id}${input.message ? `: ${input.message}` : ''}`
    case 'preflightResult':
      return `preflight ${input.executor}: ${input.ok ? 'ok' : `failed (${input.error ?? ''})`}`
    case 'reload':
      return `reload (${input.document?.executors?.length ?? '?'} executors)`
    case 'occupy':
      return `occupy ${input.executor} for ${input.id}`
    case 'restore':
      return `restore ${input.state?.exclusions?.length ?? 0} exclusions`
    case 'tick':
      return 'tick'
    default:
      return input.type
  }
}

/** A short text for an effect output (not an event). */
export function describeEffect(output) {
  switch (output.type) {
    case 'probe':
      return `host: probe ${output.executor} at ${output.url}`
    case 'createMachine':
      return `host: create a machine on ${output.executor} for ${output.request}`
    case 'deleteMachine':
      return `host: delete machine ${JSON.stringify(output.hold)} on ${output.executor}`
    case 'preflight':
      return `host: preflight ${output.executor}`
    case 'persist':
      return `host: persist: ${describePersist(output)}`
    default:
      return null
  }
}

/**
 * What a persist writes, per executor: `codex excluded until 00:10:00` for an entry
 * written, `a back in the round` for one removed (its id with no entry).
 */
export function describePersist({ ids, state }) {
  return ids
    .map((id) => {
      const entry = state.exclusions.find((e) => e.id === id)
      if (!entry) return `${id} back in the round`
      if (entry.until != null) return `${id} excluded ${entry.kind === 'until' ? '' : `(${entry.kind}) `}until ${timeOfDay(entry.until)}`
      return `${id} excluded (${entry.kind}${entry.kind === 'manual' ? ', until resumed' : ''})`
    })
    .join('; ')
}
