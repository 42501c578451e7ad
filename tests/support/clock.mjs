// Steps the SERVICE's own wall clock in tests: workerd runs under an
// LD_PRELOAD library (tests/support/clockshift.c) that adds an offset, read
// from a file this module rewrites, to CLOCK_REALTIME reads (clock_gettime,
// gettimeofday, time) and leaves CLOCK_MONOTONIC alone, so timers still
// work. Miniflare runs the wrapper script named by MINIFLARE_WORKERD_PATH
// instead of its bundled workerd. (Debian's libfaketime hangs workerd at
// start-up; see /work/shared/TOOLCHAIN.md.)
//
//   const clock = await clockShift();
//   const { child, url } = await spawnService(dir, vars, { env: clock.env });
//   await clock.setOffsetMs(-60_000);   // the Worker's Date.now() is 60 s behind
//
// Only workerd's clock moves: this process's, Miniflare's and Node's do not.
// workerd never lets a Durable Object's Date.now() go back: after a step
// back it stands at its highest reading, and the object's timers fire only
// once the wall clock is past that again (tests/service/clock-shim.test.mjs).
//
// In-process (`start()`): Miniflare reads the variable when it starts
// workerd, so `Object.assign(process.env, clock.env)` first.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, renameSync, chmodSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SHIM_SOURCE = fileURLToPath(new URL('./clockshift.c', import.meta.url));

/** The workerd binary Miniflare would run (resolved from Miniflare's own location). */
export function workerdPath() {
  const require = createRequire(createRequire(import.meta.url).resolve('miniflare'));
  return require('workerd').default;
}

/** Compiles the shim into `dir`; returns the .so's path. */
export function buildShim(dir) {
  const so = join(dir, 'libclockshift.so');
  execFileSync('cc', ['-shared', '-fPIC', '-O2', '-o', so, SHIM_SOURCE, '-ldl'], { stdio: 'inherit' });
  return so;
}

/** Writes a wrapper that runs workerd with the shim preloaded; returns its path. */
export function makeWrapper(dir, { so, offsetFile, workerd = workerdPath() }) {
  const wrapper = join(dir, 'workerd-clockshift');
  const q = (s) => `'${s.replaceAll("'", "'\\''")}'`;
  writeFileSync(wrapper, [
    '#!/bin/sh',
    `LD_PRELOAD=${q(so)}\${LD_PRELOAD:+:$LD_PRELOAD} CLOCKSHIFT_FILE=${q(offsetFile)} exec ${q(workerd)} "$@"`,
    '',
  ].join('\n'));
  chmodSync(wrapper, 0o755);
  return wrapper;
}

/** Sets the offset in `offsetFile` (atomically: write, then rename). */
export function writeOffsetMs(offsetFile, ms) {
  if (!Number.isInteger(ms)) throw new TypeError(`offset: expected an integer of ms, found ${ms}`);
  const tmp = `${offsetFile}.${process.pid}.tmp`;
  writeFileSync(tmp, `${ms}\n`);
  renameSync(tmp, offsetFile);
}

/**
 * Builds the shim and the wrapper in a fresh temp dir, offset 0. Returns
 * `{ dir, so, wrapper, offsetFile, env, setOffsetMs(ms), dispose() }`; pass
 * `env` to spawnService (`{ env }`) or merge it into process.env before an
 * in-process Miniflare starts.
 */
export async function clockShift({ offsetMs = 0 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'clockshift-'));
  const offsetFile = join(dir, 'offset-ms');
  const so = buildShim(dir);
  writeOffsetMs(offsetFile, offsetMs);
  const wrapper = makeWrapper(dir, { so, offsetFile });
  return {
    dir,
    so,
    wrapper,
    offsetFile,
    env: { MINIFLARE_WORKERD_PATH: wrapper },
    /** Writes the offset; resolves once workerd reads it (the shim looks every 2 ms). */
    setOffsetMs: (ms) => {
      writeOffsetMs(offsetFile, ms);
      return new Promise((r) => setTimeout(r, 10));
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}
