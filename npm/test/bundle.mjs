// Bundles the README's examples with esbuild, webpack and Vite, as a user would, from a
// project that installed the packed tarball. Shared by bundlers.test.mjs (Node targets:
// run the bundle) and browser/bundlers.test.mjs (browser targets: load it in Chromium).
// The bundlers are the package's dev dependencies (`root`).

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

/** The README's `<!-- example: name -->` code blocks: { node, browser }. */
export function readmeExamples(readmePath) {
  const text = readFileSync(readmePath, 'utf8')
  const out = {}
  for (const match of text.matchAll(/<!-- example: (\w+)[^>]*-->\s*```js\n([\s\S]*?)```/g)) out[match[1]] = match[2]
  return out
}

/** The same example for CommonJS (no top-level await there): require, and an async main. */
export function asCommonJs(example) {
  const imports = []
  const body = example.replace(/^import \{([^}]+)\} from '([^']+)'\n/gm, (_, names, from) => {
    imports.push(`const {${names}} = require('${from}')`)
    return ''
  })
  return `${imports.join('\n')}\n;(async () => {\n${body}\n})().catch((error) => {\n  console.error(error)\n  process.exitCode = 1\n})\n`
}

export const ESBUILD_ESM_BANNER = "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);"

const importFrom = async (root, name) => {
  const require = createRequire(join(root, 'package.json'))
  return import(pathToFileURL(require.resolve(name)).href)
}

/** Node targets: { name → the bundle to run with node }. */
export async function bundleForNode({ root, dir, example }) {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'example.mjs'), example)
  writeFileSync(join(dir, 'example.cjs'), asCommonJs(example))
  const out = join(dir, 'out')
  const esbuild = await importFrom(root, 'esbuild')
  const common = { bundle: true, platform: 'node', target: 'node20', logLevel: 'error', absWorkingDir: dir }
  // An ESM bundle for Node needs `require` for the CommonJS inside it (yaml's Node
  // build requires node:process): esbuild's documented banner (README, Bundlers).
  await esbuild.build({
    ...common,
    entryPoints: [join(dir, 'example.mjs')],
    format: 'esm',
    banner: { js: ESBUILD_ESM_BANNER },
    outfile: join(out, 'esbuild-esm', 'main.mjs'),
  })
  await esbuild.build({ ...common, entryPoints: [join(dir, 'example.cjs')], format: 'cjs', outfile: join(out, 'esbuild-cjs', 'main.cjs') })
  await webpack(root, {
    mode: 'production',
    target: 'node20',
    context: dir,
    entry: join(dir, 'example.mjs'),
    output: { path: join(out, 'webpack'), filename: 'main.cjs', chunkFilename: '[id].cjs' },
  })
  const vite = await importFrom(root, 'vite')
  await vite.build({
    root: dir,
    configFile: false,
    logLevel: 'error',
    ssr: { noExternal: true, target: 'node' },
    build: { ssr: join(dir, 'example.mjs'), outDir: join(out, 'vite'), emptyOutDir: true, rollupOptions: { output: { entryFileNames: 'main.mjs' } } },
  })
  return {
    'esbuild (esm)': join(out, 'esbuild-esm', 'main.mjs'),
    'esbuild (cjs)': join(out, 'esbuild-cjs', 'main.cjs'),
    'webpack (node)': join(out, 'webpack', 'main.cjs'),
    'vite (ssr)': join(out, 'vite', 'main.mjs'),
  }
}

/** Browser targets: { name → a directory with index.html to serve }. */
export async function bundleForBrowser({ root, dir, example }) {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'main.js'), example)
  const out = join(dir, 'out')
  const page = (script, type = 'module') =>
    `<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>rota</title><body><script type="${type}" src="${script}"></script></body>\n`
  // esbuild does not follow `new URL(…, import.meta.url)`: alias the package to
  // `rota/inline`, which has the module's bytes built in.
  const esbuild = await importFrom(root, 'esbuild')
  await esbuild.build({
    entryPoints: [join(dir, 'main.js')],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    alias: { rota: 'rota/inline' },
    outfile: join(out, 'esbuild', 'main.js'),
    absWorkingDir: dir,
    logLevel: 'error',
  })
  writeFileSync(join(out, 'esbuild', 'index.html'), page('main.js'))
  await webpack(root, {
    mode: 'production',
    target: 'web',
    context: dir,
    entry: join(dir, 'main.js'),
    output: { path: join(out, 'webpack'), filename: 'main.js', publicPath: 'auto' },
  })
  writeFileSync(join(out, 'webpack', 'index.html'), page('main.js', 'text/javascript'))
  writeFileSync(join(dir, 'index.html'), page('./main.js'))
  const vite = await importFrom(root, 'vite')
  // base './': the test serves each bundle under a path of its own.
  await vite.build({ root: dir, base: './', configFile: false, logLevel: 'error', build: { outDir: join(out, 'vite'), emptyOutDir: true } })
  return { esbuild: join(out, 'esbuild'), webpack: join(out, 'webpack'), vite: join(out, 'vite') }
}

async function webpack(root, config) {
  const { default: run } = await importFrom(root, 'webpack')
  const stats = await new Promise((resolve, reject) => run(config, (error, result) => (error ? reject(error) : resolve(result))))
  if (stats.hasErrors()) throw new Error(`webpack: ${stats.toString({ all: false, errors: true })}`)
}
