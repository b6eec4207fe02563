// The state file: the roster seed's format, `{ "version": 1, "exclusions": [...] }`,
// shared by every roster that names it. A save replaces the entries of its roster's
// executors and keeps everyone else's (dropping theirs only once expired, as the seed
// does). Writes are atomic (a temp file in the same directory, fsync, rename). A file
// that cannot be read as state is moved aside (`<path>.corrupt-<epoch ms>`) and
// reported as an event: never a crash, never a silent loss.

import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'

export const STATE_VERSION = 1

let tempSeq = 0

/** Entries a save keeps from other rosters: outliving the run and not yet expired. */
const stillValid = (entry, now) => {
  if (entry === null || typeof entry !== 'object') return false
  if (entry.kind === 'run') return false
  if ((entry.kind === 'until' || entry.kind === 'manual') && typeof entry.until === 'number') {
    return entry.until > now
  }
  return true
}

/** Reads the file: `{ state }`, `{ missing: true }`, or `{ corrupt: reason }`. */
async function readState(path) {
  let text
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if (error?.code === 'ENOENT') return { missing: true }
    return { unreadable: `${error.code ?? 'error'}: ${error.message}` }
  }
  let value
  try {
    value = JSON.parse(text)
  } catch (error) {
    return { corrupt: `not JSON (${error.message})` }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { corrupt: 'not a JSON object' }
  }
  if (value.version !== undefined && value.version !== STATE_VERSION) {
    return { corrupt: `version ${JSON.stringify(value.version)}, this rota reads version ${STATE_VERSION}` }
  }
  if (value.exclusions !== undefined && !Array.isArray(value.exclusions)) {
    return { corrupt: '`exclusions` is not a list' }
  }
  return { state: { version: STATE_VERSION, exclusions: value.exclusions ?? [] } }
}

async function writeAtomically(path, text) {
  await mkdir(dirname(path), { recursive: true })
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.${++tempSeq}.tmp`)
  let handle
  try {
    handle = await open(temp, 'w', 0o600)
    await handle.writeFile(text, 'utf8')
    await handle.sync()
    await handle.close()
    handle = undefined
    await rename(temp, path)
  } catch (error) {
    await handle?.close().catch(() => {})
    await unlink(temp).catch(() => {})
    throw error
  }
}

/** Moves a bad state file aside; returns where it went (or undefined when that failed too). */
async function moveAside(path, now) {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const target = `${path}.corrupt-${now}${attempt === 0 ? '' : `-${attempt}`}`
    try {
      // Never overwrite an earlier corrupt copy.
      const probe = await open(target, 'wx')
      await probe.close()
      await rename(path, target)
      return target
    } catch (error) {
      if (error?.code === 'EEXIST') continue
      if (error?.code === 'ENOENT') return undefined
      throw error
    }
  }
  return undefined
}

/** A `{ load, save, discard }` store over one state file. */
export function fileStateStore(path) {
  const quarantine = async (reason, { now, event }) => {
    let movedTo
    let failure
    try {
      movedTo = await moveAside(path, now)
    } catch (error) {
      failure = error.message
    }
    event(
      'warn',
      'stateCorrupt',
      movedTo !== undefined
        ? `the roster state ${path} is unreadable (${reason}); moved aside to ${movedTo}, starting clean`
        : `the roster state ${path} is unreadable (${reason}) and could not be moved aside${failure ? ` (${failure})` : ''}; starting clean`,
      { path, reason, ...(movedTo === undefined ? {} : { movedTo }) },
    )
    return failure
  }

  return {
    path,

    async load(context) {
      const result = await readState(path)
      if (result.missing) return undefined
      if (result.state !== undefined) return result.state
      await quarantine(result.corrupt ?? result.unreadable, context)
      return undefined
    },

    async save({ ids, state }, context) {
      const result = await readState(path)
      let others = []
      if (result.state !== undefined) {
        const mine = new Set(ids)
        others = result.state.exclusions.filter(
          (entry) => !mine.has(entry?.id) && stillValid(entry, context.now),
        )
      } else if (!result.missing) {
        // Do not write over what we could not read: keep it aside, then write ours.
        const failure = await quarantine(result.corrupt ?? result.unreadable, context)
        if (failure !== undefined) {
          throw new Error(`not writing over ${path}, which could not be read or moved aside (${failure})`)
        }
      }
      const exclusions = [...others, ...state.exclusions.filter((e) => e.kind !== 'run')]
      await writeAtomically(path, `${JSON.stringify({ version: STATE_VERSION, exclusions }, null, 2)}\n`)
    },

    async discard(reason, context) {
      await quarantine(reason, context)
    },
  }
}

/** Reads a roster file: `{ document }`, `{ document: undefined }` when missing, or `{ violation }`. */
export async function readRosterFile(path) {
  let text
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if (error?.code === 'ENOENT') return { document: undefined }
    return { violation: { path, message: `cannot read the roster file (${error.code ?? error.message})` } }
  }
  try {
    return { document: JSON.parse(text) }
  } catch (error) {
    return { violation: { path, message: `the roster file is not JSON (${error.message})` } }
  }
}
