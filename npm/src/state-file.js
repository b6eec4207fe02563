// The state file on disk. What it holds is the core's rule (`state-rule.js`: parse,
// merge, render, the name a corrupt file is set aside under); this module does the IO,
// with the protocol the wasmtime host (`host-wasmtime/src/state_file.rs`) follows too,
// so writers of both kinds can share one file:
//
// - Lock: the directory `<file>.lock`, made with mkdir (atomic), with a file `owner`
//   in it holding `<pid> <hostname>`; held for one read-merge-write (or one load) and
//   removed after. A lock is a dead writer's, removed and taken, when its owner is on
//   this host and no longer runs, or when its mtime is older than LOCK_STALE_MS (npm
//   proper-lockfile's convention). A held lock is polled with back-off for up to
//   LOCK_WAIT_MS.
// - Atomic write: `.<file name>.tmp-<pid>-<n>` in the same directory, fsync, rename
//   over the file, fsync the directory. Temp files are made only under the lock, so
//   one found while holding it is a killed writer's: removed when a roster starts.
// - A file that cannot be parsed is renamed (under the lock) to the core's
//   `<file>.corrupt-<ISO time without colons>`, with a `stateFileCorrupt` event: never
//   written over. One that cannot be read at all (EACCES, a directory in its place)
//   is left alone: the error has the code STATE_FILE_UNREADABLE and the roster retries.

import { lstat, mkdir, open, readFile, readdir, rename, rmdir, stat, unlink, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { RotaError } from './errors.js'
import { isCorrupt } from './state-rule.js'

export const LOCK_STALE_MS = 10_000
export const LOCK_WAIT_MS = 30_000

let tempSeq = 0
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Whether a process runs (EPERM: it does, as another user). */
function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return error?.code === 'EPERM'
  }
}

/** A `{ load, save, discard }` store over one state file, by the core's `rule`. */
export function fileStateStore(rule, path) {
  const dir = dirname(path)
  const name = basename(path)
  const lockPath = join(dir, `${name}.lock`)
  const tempPrefix = `.${name}.tmp-`

  const ownerPath = join(lockPath, 'owner')
  const me = `${process.pid} ${hostname()}`

  /** Whether the lock is a dead writer's: its owner on this host is gone, or it is old. */
  async function stale() {
    const owner = await readFile(ownerPath, 'utf8').catch(() => '')
    const [pid, host] = owner.trim().split(' ')
    if (host === hostname() && Number(pid) > 0 && !alive(Number(pid))) return true
    const age = await stat(lockPath).then((s) => Date.now() - s.mtimeMs, () => 0)
    return age > LOCK_STALE_MS
  }

  async function lock() {
    const start = Date.now()
    let pause = 5
    await mkdir(dir, { recursive: true })
    for (;;) {
      try {
        await mkdir(lockPath)
        await writeFile(ownerPath, `${me}\n`).catch(() => {})
        return
      } catch (error) {
        if (error?.code !== 'EEXIST') throw error
      }
      if (await stale()) {
        // A dead writer's: take it over (a live one would have removed it).
        await unlock()
        continue
      }
      if (Date.now() - start >= LOCK_WAIT_MS) {
        throw Object.assign(new Error(`${lockPath} is held by another writer`), { code: 'ELOCKED' })
      }
      await sleep(pause)
      pause = Math.min(pause * 2, 100)
    }
  }
  const unlock = async () => {
    await unlink(ownerPath).catch(() => {})
    await rmdir(lockPath).catch(() => {})
  }
  const locked = async (work) => {
    await lock()
    try {
      return await work()
    } finally {
      await unlock()
    }
  }

  /** `undefined` when missing, the text, or `{ notText }`; throws STATE_FILE_UNREADABLE. */
  async function read() {
    let bytes
    try {
      bytes = await readFile(path)
    } catch (error) {
      if (error?.code === 'ENOENT') return undefined
      throw new RotaError('STATE_FILE_UNREADABLE', `cannot read ${path}: ${error?.code ?? ''} ${error?.message ?? error}`.trim(), { path }, { cause: error })
    }
    try {
      return utf8.decode(bytes)
    } catch {
      return { notText: true }
    }
  }

  async function setAside(reason, { now, event }) {
    for (let attempt = 0; ; attempt += 1) {
      const target = join(dir, rule.asideName(name, now, attempt))
      const taken = await lstat(target).then(() => true, () => false)
      if (taken && attempt < 1000) continue
      await rename(path, target)
      event('warn', 'stateFileCorrupt', `the state file ${path} is not one rota reads (${reason}); set aside as ${target}`, {
        path,
        reason,
        movedTo: target,
      })
      return target
    }
  }

  async function removeStaleTemps() {
    const names = await readdir(dir).catch(() => [])
    await Promise.all(names.filter((n) => n.startsWith(tempPrefix)).map((n) => unlink(join(dir, n)).catch(() => {})))
  }

  async function writeAtomically(text) {
    const temp = join(dir, `${tempPrefix}${process.pid}-${++tempSeq}`)
    let handle
    try {
      handle = await open(temp, 'wx', 0o644)
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
    // The rename is durable once the directory is synced (best effort).
    const folder = await open(dir, 'r').catch(() => undefined)
    await folder?.sync().catch(() => {})
    await folder?.close().catch(() => {})
  }

  return {
    path,

    /** At start: stale temp files removed, the file read; a corrupt one set aside. */
    async load(context) {
      return locked(async () => {
        await removeStaleTemps()
        const text = await read()
        if (text === undefined) return undefined
        if (typeof text !== 'string') {
          await setAside('the file is not UTF-8 text', context)
          return undefined
        }
        try {
          return rule.restore(text, context.now)
        } catch (error) {
          if (!isCorrupt(error)) throw error
          await setAside(error.message, context)
          return undefined
        }
      })
    },

    /** One read-merge-write under the lock. */
    async save(update, context) {
      await locked(async () => {
        let existing = await read()
        if (existing !== undefined && typeof existing !== 'string') {
          await setAside('the file is not UTF-8 text', context)
          existing = undefined
        }
        let text
        try {
          text = rule.merge(existing ?? null, [update], context.now)
        } catch (error) {
          if (!isCorrupt(error)) throw error
          await setAside(error.message, context)
          text = rule.merge(null, [update], context.now)
        }
        await writeAtomically(text)
      })
    },

    /** Sets the file aside (the core refused what it holds). */
    async discard(reason, context) {
      await locked(async () => {
        if ((await read()) !== undefined) await setAside(reason, context)
      })
    },
  }
}
