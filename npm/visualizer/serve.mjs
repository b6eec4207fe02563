#!/usr/bin/env node
// Serves the visualizer and the package's browser entry (src/ and the wasm web build in
// pkg/web) from 127.0.0.1. No dependencies; offline.
//
//   node visualizer/serve.mjs [--port N]      (or PORT=N; default 8417, 0 = any free port)
//   npm run visualize                          (from npm/)
//
// Only visualizer/, src/ and pkg/web/ under npm/ are served; `/` goes to /visualizer/.

import { createServer } from 'node:http'
import { readFile, stat } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { extname, join, normalize, sep } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url))
const SERVED = ['visualizer', 'src', 'pkg/web']

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.jsonl': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ts': 'text/plain; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
}

/** Where `urlPath` lives on disk, or null when it is outside what is served. */
function resolve(urlPath) {
  let path
  try {
    path = decodeURIComponent(urlPath.split('?')[0])
  } catch {
    return null
  }
  const relative = normalize(path).replace(/^[/\\]+/, '')
  if (relative.split(sep).includes('..')) return null
  const allowed = SERVED.some((dir) => relative === dir || relative.startsWith(`${dir}/`))
  return allowed ? join(PACKAGE_ROOT, relative) : null
}

/** Starts the server; resolves to `{ server, url, close }`. */
export function startServer({ port = 8417, host = '127.0.0.1', quiet = false } = {}) {
  const server = createServer(async (req, res) => {
    const send = (status, body, type = 'text/plain; charset=utf-8', extra = {}) => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', ...extra })
      res.end(body)
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'method not allowed\n')
    const urlPath = req.url.split('?')[0]
    if (urlPath === '/' || urlPath === '/visualizer') return send(302, '', undefined, { location: '/visualizer/' })
    let file = resolve(urlPath)
    if (!file) return send(404, `not found: ${urlPath}\n`)
    try {
      if ((await stat(file)).isDirectory()) file = join(file, 'index.html')
      const body = await readFile(file)
      const type = TYPES[extname(file)] ?? 'application/octet-stream'
      res.writeHead(200, { 'content-type': type, 'content-length': body.length, 'cache-control': 'no-store' })
      res.end(req.method === 'HEAD' ? undefined : body)
    } catch {
      send(404, `not found: ${urlPath}\n`)
    }
  })
  return new Promise((done, fail) => {
    server.once('error', fail)
    server.listen(port, host, () => {
      const address = server.address()
      const url = `http://${host}:${address.port}/visualizer/`
      if (!quiet) {
        console.log(`rota visualizer: ${url}`)
        if (!existsSync(join(PACKAGE_ROOT, 'pkg/web/rota_wasm_bg.wasm'))) {
          console.log("  warning: npm/pkg/web has no wasm build yet: run 'make wasm' at the repository root")
        }
      }
      done({ server, url, close: () => new Promise((closed) => server.close(closed)) })
    })
  })
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const at = process.argv.indexOf('--port')
  const port = Number(at > 0 ? process.argv[at + 1] : (process.env.PORT ?? 8417))
  startServer({ port }).catch((error) => {
    console.error(`rota visualizer: cannot listen on 127.0.0.1:${port}: ${error.message}`)
    process.exit(1)
  })
}
