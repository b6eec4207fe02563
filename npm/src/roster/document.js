// The roster's document and its driver options: read (files, on Node), merged (the
// repository's roster over the user's), narrowed to `executors`, validated (every
// violation at once), and the Policy built from it.

import { RotaError, invalidDocument } from '../errors.js'
import { list } from './requests.js'
import { schedulerProblems } from './scheduler.js'

/** The driver's own options, checked up front (the core checks `options.options`); a shared roster's refusals too. */
export function checkOptions(options) {
  const wrong = []
  const fn = (name, value) => value === undefined || typeof value === 'function' || wrong.push(`${name} must be a function`)
  fn('now', options.now)
  wrong.push(...schedulerProblems(options.scheduler))
  if (options.scheduler !== undefined && options.now !== undefined) wrong.push('give the clock once: scheduler.now or now, not both')
  fn('onEvent', options.onEvent)
  fn('preflight', options.preflight)
  if (!(options.probe === undefined || options.probe === false || typeof options.probe === 'function')) {
    wrong.push('probe must be a function or false')
  }
  if (options.machines !== undefined) {
    if (options.machines === null || typeof options.machines !== 'object') wrong.push('machines must be { create, delete }')
    else {
      fn('machines.create', options.machines.create)
      fn('machines.delete', options.machines.delete)
    }
  }
  const retry = options.stateRetry
  if (retry !== undefined) {
    const positive = (v) => v === undefined || (Number.isFinite(v) && v > 0)
    if (retry === null || typeof retry !== 'object' || !positive(retry.firstMs) || !positive(retry.maxMs)) {
      wrong.push('stateRetry must be { firstMs?, maxMs? } in positive milliseconds')
    }
  }
  if (options.probeTimeoutMs !== undefined && !(Number.isFinite(options.probeTimeoutMs) && options.probeTimeoutMs > 0)) {
    wrong.push('probeTimeoutMs must be a positive number of milliseconds')
  }
  if (options.watch !== undefined && typeof options.watch !== 'boolean') wrong.push('watch must be true or false')
  if (options.watch === true && options.rosterPath === undefined && options.repoRosterPath === undefined) {
    wrong.push('watch needs rosterPath or repoRosterPath')
  }
  const meter = options.meter
  if (meter !== undefined && (meter === null || typeof meter.createCounter !== 'function')) {
    wrong.push('meter must be an OpenTelemetry Meter (metrics.getMeter(name) of @opentelemetry/api)')
  }
  for (const key of ['rosterPath', 'repoRosterPath', 'statePath']) {
    if (options[key] !== undefined && typeof options[key] !== 'string') wrong.push(`${key} must be a path`)
  }
  const state = options.state
  if (state !== undefined && (state === null || typeof state.load !== 'function' || typeof state.save !== 'function')) {
    wrong.push('state must be { load, save }')
  }
  if (options.shared !== undefined) {
    if (options.statePath !== undefined || state !== undefined) {
      wrong.push('a shared roster has no state file (statePath, state): the log on PostgreSQL is its persistence')
    }
    if (options.preflight !== undefined) wrong.push('a shared roster does not preflight (log version 1): drop preflight')
    if (options.watch === true) wrong.push('a shared roster does not watch roster files: call reload()')
    if (options.now !== undefined) wrong.push("a shared roster runs on the log's clock (the database's): drop now")
    if (options.scheduler !== undefined) wrong.push("a shared roster runs on the log's clock and its own timers: drop scheduler")
  }
  if (wrong.length > 0) throw new RotaError('INVALID_INPUT', `Roster.create: ${wrong.join('; ')}`)
}

/** Ids listed twice in one roster (`side` names it in the violation's path). */
function duplicates(document, side) {
  const seen = new Set()
  const found = []
  const executors = Array.isArray(document?.executors) ? document.executors : []
  executors.forEach((entry, index) => {
    const id = entry?.id
    if (typeof id !== 'string') return
    if (seen.has(id)) found.push({ path: `${side}: executors[${index}].id`, message: `executor '${id}' is listed twice` })
    seen.add(id)
  })
  return found
}

/**
 * `watch: true`: `reload()` when a roster file changes; a bad edit is an event, the
 * roster runs on. `roster` (Roster.js `#side`): { closing(), event(...), track(promise) }.
 * Returns the unwatch.
 */
export function watchFiles(platform, options, roster, reload) {
  if (platform.watchRoster === undefined) throw new RotaError('INVALID_INPUT', 'watch needs a file system (Node)')
  const paths = [options.rosterPath, options.repoRosterPath].filter((p) => p !== undefined)
  let running = Promise.resolve()
  const changed = () => {
    running = running.then(async () => {
      if (roster.closing()) return
      try {
        await reload()
      } catch (error) {
        if (roster.closing()) return
        roster.event('warn', 'reloadFailed', `the changed roster file was not applied: ${error?.message ?? error}`, {
          paths,
          error: String(error?.message ?? error),
          ...(error?.violations === undefined ? {} : { violations: error.violations }),
        })
      }
    })
    roster.track(running)
  }
  try {
    return platform.watchRoster(paths, changed)
  } catch (error) {
    roster.event('warn', 'watchFailed', `cannot watch ${paths.join(' and ')}: ${error?.message ?? error}`, {
      paths,
      error: String(error?.message ?? error),
    })
    return undefined
  }
}

/** `{ resolveDocument, buildPolicy }` over a wasm API and a platform ({ readRoster? }). */
export function documents(api, platform) {
  const { Policy } = api

  /**
   * Merge and narrow as the seed does; every violation at once. With `deferred`, a
   * document with no id listed twice is not validated here (`validated: false`): the
   * Policy the caller builds from it validates it (`buildPolicy`), one walk fewer.
   */
  async function resolveDocument(options, deferred = false) {
    const violations = []
    const read = async (path, side) => {
      if (platform.readRoster === undefined) {
        throw new RotaError('INVALID_INPUT', `${side} is a file path, and this platform has no file system`)
      }
      const result = await platform.readRoster(path)
      if (result.violation !== undefined) violations.push(result.violation)
      return result.document
    }
    let user = options.document ?? null
    let repo = options.repoDocument ?? null
    if (options.rosterPath !== undefined) user = (await read(options.rosterPath, 'rosterPath')) ?? null
    if (options.repoRosterPath !== undefined) repo = (await read(options.repoRosterPath, 'repoRosterPath')) ?? null
    if (violations.length > 0) throw invalidDocument(violations)
    if (user === null && repo === null) {
      const where = [options.rosterPath, options.repoRosterPath].filter((p) => p !== undefined)
      const message =
        where.length > 0
          ? `no roster: ${where.join(' and ')} ${where.length > 1 ? 'do' : 'does'} not exist`
          : 'no roster: give `document` or `rosterPath`'
      throw invalidDocument([{ path: '$', message }])
    }
    // Merging keeps one entry per id, so an id listed twice in one file would vanish
    // silently: name it, with everything else wrong, before merging.
    const twice = [
      ...duplicates(user, options.rosterPath ?? 'document'),
      ...duplicates(repo, options.repoRosterPath ?? 'repoDocument'),
    ]
    if (deferred && twice.length === 0 && options.executors === undefined && typeof Policy.__fromRosters === 'function') {
      // Nothing to narrow: the Policy merges and builds in one call (`buildPolicy`),
      // the merged document never crossing into JS and back.
      return { unknown: [], warnings: [], validated: false, rosters: { user, repo, options } }
    }
    return mergeAndNarrow(options, user, repo, twice, deferred)
  }

  /** The rest of `resolveDocument`: merge, narrow, validate (unless `deferred`). */
  function mergeAndNarrow(options, user, repo, twice, deferred) {
    let merged
    try {
      merged = api.merge(user, repo)
    } catch (error) {
      if (error?.code !== 'INVALID_DOCUMENT') throw error
      throw invalidDocument([...twice, ...error.violations])
    }
    // `--executors a,b` as the seed's command line gives it, or a list.
    const ids =
      typeof options.executors === 'string'
        ? options.executors.split(',').map((id) => id.trim()).filter((id) => id !== '')
        : (list(options.executors, 'executors') ?? [])
    let narrowed
    if (ids.length === 0) {
      // Narrowing to no list keeps every executor: merge's document as it is.
      narrowed = { document: merged, unknown: [], warnings: [] }
    } else {
      try {
        // An id the roster does not have is ignored, as the seed does, with a warning
        // naming it (the core's); a reload may drop some of the run's filter this way.
        narrowed = api.narrow(merged, ids)
      } catch (error) {
        if (error?.code !== 'INVALID_DOCUMENT') throw error
        throw invalidDocument([...twice, ...error.violations, ...api.validate(merged, options.options?.kinds)])
      }
    }
    const resolved = { document: narrowed.document, unknown: narrowed.unknown, warnings: narrowed.warnings }
    if (deferred && twice.length === 0) return { ...resolved, validated: false }
    const found = [...twice, ...api.validate(narrowed.document, options.options?.kinds)]
    if (found.length > 0) throw invalidDocument(found)
    return { ...resolved, validated: true }
  }

  /**
   * The Policy of a resolved document. One `resolveDocument` left unvalidated is
   * validated by the constructor; its refusal is then worded as `resolveDocument`'s
   * (INVALID_DOCUMENT with every violation, before any error in the options).
   */
  function buildPolicy({ document, validated, rosters }, coreOptions, kinds) {
    if (rosters !== undefined) {
      const { user, repo, options } = rosters
      try {
        return Policy.__fromRosters(user, repo, coreOptions)
      } catch {
        // Refused: the two-step path words the refusal exactly as it always has.
        return buildPolicy(mergeAndNarrow(options, user, repo, [], true), coreOptions, kinds)
      }
    }
    try {
      return new Policy(document, coreOptions)
    } catch (error) {
      if (validated) throw error
      const found = api.validate(document, kinds)
      if (found.length > 0) throw invalidDocument(found)
      throw error
    }
  }

  return { resolveDocument, buildPolicy }
}
