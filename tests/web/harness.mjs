// What the browser tests in tests/web share: the paths ctest hands them
// (tests/web/CMakeLists.txt sets the environment; the defaults are the
// source tree's, for running a test by hand), the skip rule (exit 77, ctest's
// SKIP_RETURN_CODE, with the reason on stdout), playwright's Chromium
// launcher, and `kestrel serve` started on a home with the URL it prints.
// Not a test itself: ctest runs only the *.test.mjs files it names.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
export const CLI = process.env.KESTREL_CLI || path.join(repo, 'build/src/cli/kestrel')
export const DIST = process.env.KESTREL_WEB_DIST || path.join(repo, 'build/web/dist')
export const MODULES = process.env.KESTREL_WEB_MODULES || path.join(repo, 'web/node_modules')
export const ARTIFACTS = process.env.KESTREL_WEB_ARTIFACTS || path.join(repo, 'build/tests/web/artifacts')
export const CHROMIUM = process.env.KESTREL_CHROMIUM || '/usr/bin/chromium'
// The reference fixtures (../shared/reference, README there).
export const REFERENCE = process.env.KESTREL_REFERENCE || path.resolve(repo, '..', 'shared', 'reference')
export const PARITY = path.join(REFERENCE, 'val_parity')

// Ends the test as skipped (ctest: SKIP_RETURN_CODE 77), saying why.
export function skip(why) {
  console.log(`SKIP: ${why}`)
  process.exit(77)
}

// playwright-core's `chromium` (web/node_modules; no browser download: the
// tests launch Debian's at CHROMIUM). Skips without either.
export function chromiumOrSkip() {
  if (!fs.existsSync(CHROMIUM)) skip(`no browser at ${CHROMIUM} (scripts/install-deps.sh installs Debian's chromium)`)
  if (!fs.existsSync(path.join(MODULES, 'playwright-core'))) skip(`${MODULES}/playwright-core is not installed (scripts/build-web.sh runs npm ci)`)
  return createRequire(path.join(MODULES, '..', 'package.json'))('playwright-core').chromium
}

// Starts `kestrel --home HOME serve ARGS...` and resolves { proc, url } once
// it prints "kestrel serve: listening on URL"; rejects, with what it wrote,
// when it exits first or says nothing of the kind within `wait` ms.
export function startKestrelServe({ home, args = [], wait = 30000 }) {
  return new Promise((resolve, reject) => {
    const proc = spawn(CLI, ['--home', home, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    const timer = setTimeout(() => reject(new Error(`kestrel serve did not start: ${out}${err}`)), wait)
    proc.stderr.on('data', (d) => (err += d))
    proc.stdout.on('data', (d) => {
      out += d
      const m = /^kestrel serve: listening on (http:\/\/\S+)\n/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve({ proc, url: m[1] })
      }
    })
    proc.on('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`kestrel serve exited ${code}: ${err}`))
    })
  })
}
