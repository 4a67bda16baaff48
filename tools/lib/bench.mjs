// The start-up that the benchmarks in tools/ share (chart-paint.mjs,
// job-list.mjs, serve-load.mjs; docs/server.md "Performance"): their
// options, a temporary home with the `kestrel` CLI over it, `kestrel serve`
// on a free port, and Debian's Chromium driven by playwright-core
// (web/node_modules) with the flags of tests/web/ui.test.mjs.
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')

// The build outputs every tool may use (each overridable by an option).
export const BUILT = {
  kestrel: path.join(repo, 'build/src/cli/kestrel'),
  writer: path.join(repo, 'build/bench/serve_load/kestrel_bench_event_writer'),
  dist: path.join(repo, 'build/web/dist'),
  modules: path.join(repo, 'web/node_modules'),
  chromium: '/usr/bin/chromium',
}

// `--name value` pairs over `defaults` (a number option takes a number >=
// `min`); an unknown or incomplete option, or a bad number, prints `usage`
// (when given) and exits 2.
export function parseOptions(tool, defaults, { min = 1, usage = '' } = {}) {
  const opts = { ...defaults }
  const fail = (msg) => {
    console.error(`${tool}: ${msg}${usage ? `\n${usage}` : ''}`)
    process.exit(2)
  }
  for (let i = 2; i < process.argv.length; i += 2) {
    const k = process.argv[i].replace(/^--/, '')
    if (!(k in opts) || i + 1 >= process.argv.length) fail(`unknown or incomplete option '${process.argv[i]}'`)
    opts[k] = typeof defaults[k] === 'number' ? Number(process.argv[i + 1]) : process.argv[i + 1]
    if (typeof defaults[k] === 'number' && !(opts[k] >= min)) fail(`--${k} must be a number >= ${min}`)
  }
  return opts
}

// Exits 2 naming the first of `files` that is not there.
export function requireBuilt(tool, files, how) {
  for (const f of files) {
    if (!fs.existsSync(f)) {
      console.error(`${tool}: ${f} is not built (${how})`)
      process.exit(2)
    }
  }
}

// playwright-core's chromium, or exit 77 (SKIP) without Chromium or web/node_modules.
export function playwrightChromium(opts) {
  if (!fs.existsSync(opts.chromium) || !fs.existsSync(path.join(opts.modules, 'playwright-core'))) {
    console.log(`SKIP: needs ${opts.chromium} and ${opts.modules}/playwright-core (scripts/build-web.sh)`)
    process.exit(77)
  }
  return createRequire(path.join(opts.modules, '..', 'package.json'))('playwright-core').chromium
}

// Headless Chromium on a fresh profile folder, 1280x800, with the flags of
// tests/web/ui.test.mjs (this machine has no network).
export function launchBrowser(chromium, opts, profile) {
  return chromium.launchPersistentContext(profile, {
    executablePath: opts.chromium,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
}

// A temporary folder with `home` in it (not created), the `kestrel` CLI over
// that home, and the child processes to kill: `track(proc)` adds one; at exit
// they are killed and the folder removed. Ctrl-C exits 130.
export function benchHome(tool, opts) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `kestrel-${tool}-`))
  const home = path.join(tmp, 'home')
  const procs = []
  process.on('exit', () => {
    for (const p of procs) if (p && p.exitCode === null) p.kill('SIGKILL')
    fs.rmSync(tmp, { recursive: true, force: true })
  })
  process.on('SIGINT', () => process.exit(130))
  const kestrel = (...args) => execFileSync(opts.kestrel, ['--home', home, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  return {
    tmp,
    home,
    track: (proc) => (procs.push(proc), proc),
    kestrel,
    kestrelJson: (...args) => JSON.parse(kestrel('--json', ...args)),
    log: (s) => process.stderr.write(`${tool}: ${s}\n`),
  }
}

// `kestrel serve --port 0 [args]` on `home`; resolves { proc, url } (the
// URL it prints, a string) once it listens. The caller tracks the process.
export function startServer(opts, home, args = []) {
  return new Promise((resolve, reject) => {
    const proc = spawn(opts.kestrel, ['--home', home, 'serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    const timer = setTimeout(() => reject(new Error(`kestrel serve did not start: ${out}${err}`)), 15000)
    proc.stderr.on('data', (d) => (err += d))
    proc.stdout.on('data', (d) => {
      out += d
      const m = /kestrel serve: listening on (http:\/\/\S+)\n/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve({ proc, url: m[1] })
      }
    })
    proc.on('exit', (code) => reject(new Error(`kestrel serve exited (${code}): ${err}`)))
  })
}
