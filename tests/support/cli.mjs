// Runs the npm package's command line (pkg/cli/edgeleaf.mjs) as a user
// would: its own process, an environment without the caller's EDGELEAF_*.
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const CLI = join(dirname(fileURLToPath(import.meta.url)), '../../pkg/cli/edgeleaf.mjs');

/** `edgeleaf …args` with `env` added (a variable set to `undefined` is left out): `{ code, stdout, stderr }`. */
export function runCli(args, env = {}) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('EDGELEAF_')));
  const all = { ...clean, ...env };
  for (const k of Object.keys(all)) if (all[k] === undefined) delete all[k];
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: all }, (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stdout, stderr }));
  });
}
