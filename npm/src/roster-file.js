// Roster files (Node): JSON, or YAML for a `.yaml`/`.yml` path (the `yaml` package,
// loaded only when a YAML file is read), and watching them for `watch: true`.

import { watch } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { basename, dirname, resolve } from 'node:path'

const isYaml = (path) => /\.ya?ml$/i.test(path)

/** Reads a roster file: `{ document }`, `{ document: undefined }` when missing, or `{ violation }`. */
export async function readRosterFile(path) {
  let text
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if (error?.code === 'ENOENT') return { document: undefined }
    return { violation: { path, message: `cannot read the roster file (${error.code ?? error.message})` } }
  }
  if (isYaml(path)) {
    const { parse } = await import('yaml')
    try {
      // YAML 1.2 core schema: what JSON can say, no custom tags.
      return { document: parse(text, { schema: 'core', prettyErrors: true }) ?? null }
    } catch (error) {
      return { violation: { path, message: `the roster file is not YAML (${error.message.split('\n')[0]})` } }
    }
  }
  try {
    return { document: JSON.parse(text) }
  } catch (error) {
    return { violation: { path, message: `the roster file is not JSON (${error.message})` } }
  }
}

/**
 * Calls `onChange` (debounced by `delayMs`) when one of `paths` is written, created,
 * replaced or removed. Watches each file's directory, so an editor's save by rename
 * is seen too. Returns `close()`. The watchers never keep the process alive.
 */
export function watchRosterFiles(paths, onChange, { delayMs = 50 } = {}) {
  const byDir = new Map()
  for (const path of paths) {
    const full = resolve(path)
    const dir = dirname(full)
    if (!byDir.has(dir)) byDir.set(dir, new Set())
    byDir.get(dir).add(basename(full))
  }
  let timer
  const changed = () => {
    clearTimeout(timer)
    timer = setTimeout(onChange, delayMs)
  }
  const watchers = []
  for (const [dir, names] of byDir) {
    const watcher = watch(dir, { persistent: false }, (_type, name) => {
      // Some platforms give no name: then any change in the directory counts.
      if (name === null || name === undefined || names.has(String(name))) changed()
    })
    watcher.on('error', () => {})
    watchers.push(watcher)
  }
  return () => {
    clearTimeout(timer)
    for (const watcher of watchers) watcher.close()
  }
}
