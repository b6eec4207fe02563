// Packs this package (`npm pack`) and installs the tarball into a fresh project, as a
// user would. Shared by test/run.mjs (Node tests) and test/browser/ (Chromium).

import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const PACKAGE_ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

/** Fails early when the wasm-bindgen output is missing. */
export function requireBuild() {
  for (const file of ['pkg/node/rota_wasm.js', 'pkg/node/rota_wasm_embedded.js', 'pkg/web/rota_wasm.js', 'pkg/web/rota_wasm_bg.wasm', 'pkg/web/rota_wasm_embedded.js']) {
    if (!existsSync(join(PACKAGE_ROOT, file))) {
      throw new Error(`npm/${file} is missing: build it first (make wasm)`)
    }
  }
}

/**
 * Packs into a new temp dir and installs into `<dir>/project` (a copy of
 * test/fixture). Returns `{ work, project, tarball, files, size }`.
 */
export function packAndInstall({ quiet = false } = {}) {
  requireBuild()
  const work = mkdtempSync(join(tmpdir(), 'rota-npm-test-'))
  const packed = JSON.parse(
    execFileSync(npm, ['pack', '--json', '--pack-destination', work], {
      cwd: PACKAGE_ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', quiet ? 'ignore' : 'inherit'],
    }),
  )
  const tarball = join(work, packed[0].filename)
  const project = join(work, 'project')
  cpSync(join(PACKAGE_ROOT, 'test', 'fixture'), project, { recursive: true })
  execFileSync(npm, ['install', '--no-audit', '--no-fund', '--no-save', tarball], {
    cwd: project,
    stdio: quiet ? 'ignore' : 'inherit',
  })
  return {
    work,
    project,
    tarball,
    files: packed[0].files.map((f) => f.path).sort(),
    size: packed[0].size,
    filename: packed[0].filename,
  }
}
