// The harness each matrix app's check.mjs is handed (`export default async
// function check(h)`). An app is a folder tests/pkg/matrix/<app>/ with its own
// package.json and package-lock.json (the tool, pinned; the package under test
// is the packed tarball, installed by the runner, tests/pkg/matrix.test.mjs).
//
//   h.dir                          the app's folder
//   h.run(cmd, args, opts)         runs to completion → { stdout, stderr }; throws on a
//                                  nonzero exit or a timeout, with the output
//   h.serve(dir)                   a static file server on 127.0.0.1 → { url, close() }
//   h.start(cmd, args, opts)       a long process (a dev server) → { url, stop() }, once
//                                  opts.readyUrl answers 2xx
//   h.page(url)                    the page in headless Chromium → { ids, consoleErrors },
//                                  once it wrote its IDs as a JSON array of decimal
//                                  strings into <pre id="ids"> (30 s at most)
//   h.consoleErrors                every console error of every page the check opened
//                                  (the runner asserts there is none)
//   h.clean(...paths)              removes build outputs in the app's folder (before a build)
//   h.files(path)                  the files under a folder of the app, relative, sorted
//   h.port()                       a free TCP port on 127.0.0.1
//   h.node20, h.node22             the two Node binaries (the package's floor; the tools')
//
// Commands run in the app's folder with its node_modules/.bin first on PATH,
// then the repository's (Node 22 as `node`). Every process is started in its
// own process group and ended by that group's id; whatever a check left
// running is stopped by `close()` (the runner calls it).
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createServer as netServer } from 'node:net';
import { readFile, readdir, rm, stat } from 'node:fs/promises';
import { extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch } from '../../support/chromium.mjs';

export const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
export const NODE22 = join(ROOT, 'node_modules/.bin/node');
/** The system's Node (20 here), the floor the package supports. */
export const NODE20 = process.env.EDGELEAF_NODE20 ?? '/usr/bin/node';

// Quiet, non-interactive tools: no telemetry, prompts, update checks or colour.
const QUIET = {
  CI: '1', NO_COLOR: '1', NO_UPDATE_NOTIFIER: '1', DO_NOT_TRACK: '1',
  NEXT_TELEMETRY_DISABLED: '1', WRANGLER_SEND_METRICS: 'false', BROWSERSLIST_IGNORE_OLD_DATA: '1',
  ASTRO_TELEMETRY_DISABLED: '1', npm_config_update_notifier: 'false', npm_config_fund: 'false',
  npm_config_audit: 'false',
};

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript',
  '.cjs': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.map': 'application/json',
  '.wasm': 'application/wasm', '.svg': 'image/svg+xml', '.txt': 'text/plain', '.ico': 'image/x-icon',
};

const tail = (s, n = 4000) => (s.length > n ? `…${s.slice(-n)}` : s);

/** Ends a process group started here (by its leader's PID). */
function killGroup(child, signal = 'SIGTERM') {
  if (child.exitCode !== null || child.signalCode !== null) return;
  try { process.kill(-child.pid, signal); } catch { /* already gone */ }
}

let browser;
/** The one Chromium of a run, launched on first use; `closeBrowser()` ends it. */
async function chromium() {
  browser ??= launch();
  return browser;
}
export async function closeBrowser() {
  if (!browser) return;
  const b = browser;
  browser = undefined;
  await (await b).close().catch(() => {});
}

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((ok, fail) => {
    const s = netServer();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

export function harness(dir) {
  const cleanups = new Set();
  const allConsoleErrors = [];
  const envOf = (extra) => ({
    ...process.env,
    ...QUIET,
    PATH: `${join(dir, 'node_modules/.bin')}:${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
    ...extra,
  });

  function run(cmd, args = [], { env, timeoutMs = 180_000, cwd = dir, input } = {}) {
    return new Promise((ok, fail) => {
      const child = spawn(cmd, args, { cwd, env: envOf(env), detached: true, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => { stdout += d; });
      child.stderr.on('data', (d) => { stderr += d; });
      if (input !== undefined) {
        child.stdin.on('error', () => {}); // it may exit before reading
        child.stdin.end(input);
      }
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup(child, 'SIGKILL');
      }, timeoutMs);
      const cleanup = () => killGroup(child, 'SIGKILL');
      cleanups.add(cleanup);
      child.on('error', (e) => {
        clearTimeout(timer);
        cleanups.delete(cleanup);
        fail(new Error(`${cmd}: ${e.message}`));
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        cleanups.delete(cleanup);
        // Whatever the command left behind in its group goes with it.
        try { process.kill(-child.pid, 'SIGKILL'); } catch { /* none left */ }
        if (code === 0) return ok({ stdout, stderr });
        const why = timedOut ? `timed out after ${timeoutMs} ms` : `exited with ${code ?? signal}`;
        fail(new Error(`${cmd} ${args.join(' ')}: ${why}\n--- stdout\n${tail(stdout)}\n--- stderr\n${tail(stderr)}`));
      });
    });
  }

  async function serve(root) {
    const base = resolve(dir, root);
    const server = createServer(async (req, res) => {
      let path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
      if (path.includes('\0') || !resolve(base, `.${path}`).startsWith(base)) return res.writeHead(403).end();
      try {
        let file = join(base, path);
        if ((await stat(file)).isDirectory()) file = join(file, 'index.html');
        const body = await readFile(file);
        res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
        res.end(body);
      } catch {
        // A site without an icon: Chromium asks for one anyway, and a 404 is a console error.
        if (path === '/favicon.ico') return res.writeHead(204).end();
        res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: ${path}`);
      }
    });
    await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
    const close = () => new Promise((ok) => { server.closeAllConnections?.(); server.close(() => ok()); });
    cleanups.add(close);
    return { url: `http://127.0.0.1:${server.address().port}`, close: () => { cleanups.delete(close); return close(); } };
  }

  async function start(cmd, args = [], { readyUrl, env, timeoutMs = 120_000, cwd = dir } = {}) {
    if (!readyUrl) throw new Error('h.start: readyUrl is required');
    const child = spawn(cmd, args, { cwd, env: envOf(env), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => { output += d; });
    child.stderr.on('data', (d) => { output += d; });
    let exited = null;
    child.on('exit', (code, signal) => { exited = code ?? signal; });
    child.on('error', (e) => { exited = e.message; });
    const stop = async () => {
      cleanups.delete(stop);
      if (exited !== null) return;
      const gone = new Promise((ok) => child.once('exit', ok));
      killGroup(child, 'SIGTERM');
      const t = setTimeout(() => killGroup(child, 'SIGKILL'), 5000);
      await gone;
      clearTimeout(t);
      try { process.kill(-child.pid, 'SIGKILL'); } catch { /* none left */ }
    };
    cleanups.add(stop);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (exited !== null) {
        await stop();
        throw new Error(`${cmd} ${args.join(' ')} exited (${exited}) before ${readyUrl} answered\n${tail(output)}`);
      }
      try {
        const res = await fetch(readyUrl, { signal: AbortSignal.timeout(5000) });
        await res.arrayBuffer();
        if (res.ok) break;
      } catch { /* not yet */ }
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`${readyUrl} did not answer within ${timeoutMs} ms\n${tail(output)}`);
      }
      await new Promise((ok) => setTimeout(ok, 250));
    }
    return { url: readyUrl, stop, output: () => output };
  }

  async function page(url, { timeoutMs = 30_000 } = {}) {
    const context = await (await chromium()).newContext();
    const close = () => context.close().catch(() => {});
    cleanups.add(close);
    const consoleErrors = [];
    try {
      const p = await context.newPage();
      p.on('console', (m) => {
        if (m.type() === 'error') consoleErrors.push(`${m.text()}${m.location()?.url ? ` (${m.location().url})` : ''}`);
      });
      // An uncaught error ends the wait: the page will not recover.
      let uncaught;
      const thrown = new Promise((ok) => { uncaught = ok; });
      p.on('pageerror', (e) => { consoleErrors.push(`uncaught: ${e.message}`); uncaught(); });
      p.on('requestfailed', (r) => consoleErrors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
      await p.goto(url);
      const written = p.waitForFunction(() => {
        const t = document.getElementById('ids')?.textContent;
        if (!t) return false;
        try { return Array.isArray(JSON.parse(t)); } catch { return false; }
      }, null, { timeout: timeoutMs }).then(() => true, () => false);
      if (!(await Promise.race([written, thrown.then(() => false)]))) {
        const text = await p.evaluate(() => document.body?.innerText ?? '').catch(() => '');
        throw new Error(`${url}: no IDs in <pre id="ids"> (waited up to ${timeoutMs} ms); console errors: ${JSON.stringify(consoleErrors)}; page text: ${tail(text, 1000)}`);
      }
      const ids = JSON.parse(await p.evaluate(() => document.getElementById('ids').textContent));
      return { ids, consoleErrors };
    } finally {
      allConsoleErrors.push(...consoleErrors.map((e) => `${url}: ${e}`));
      cleanups.delete(close);
      await close();
    }
  }

  async function clean(...paths) {
    for (const p of paths) {
      const full = resolve(dir, p);
      if (!full.startsWith(`${dir}/`)) throw new Error(`h.clean: ${p} is outside the app`);
      await rm(full, { recursive: true, force: true });
    }
  }

  async function files(p) {
    const entries = await readdir(resolve(dir, p), { recursive: true, withFileTypes: true });
    return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath ?? e.path, e.name).slice(resolve(dir, p).length + 1)).sort();
  }

  /** Stops whatever the check left running. */
  async function close() {
    for (const c of [...cleanups].reverse()) await c();
  }

  return { dir, run, serve, start, page, clean, files, port: freePort, node20: NODE20, node22: NODE22, consoleErrors: allConsoleErrors, close };
}
