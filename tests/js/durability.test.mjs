// Durability: the service runs in a child process (Miniflare + workerd) on a
// 127.0.0.1 port; clients draw IDs over HTTP; the whole process group is
// killed with SIGKILL mid-stream and restarted on the same state directory.
// No ID may be issued twice, and max_id may only grow.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, ADMIN, CLIENT } from './service.mjs';

async function freePort() {
  const srv = createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

async function launch(persist, port) {
  const child = spawn(process.execPath, [join(ROOT, 'tests/js/service.mjs'), persist, String(port)], {
    detached: true, // its own process group, so workerd dies with it
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('service did not start in 30 s')), 30_000);
    child.stdout.on('data', (d) => { if (String(d).includes('ready')) { clearTimeout(timer); resolve(); } });
    child.on('exit', (code) => reject(new Error(`service exited with ${code}`)));
  });
  return child;
}

function killHard(child) {
  try { process.kill(-child.pid, 'SIGKILL'); } catch { /* already gone */ }
  return new Promise((r) => (child.exitCode !== null || child.signalCode ? r() : child.once('exit', r)));
}

test('kill -9 while clients draw IDs, restart on the same state: nothing issued twice, max_id only grew', async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-kill-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const get = (path, token = CLIENT, init = {}) =>
    fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${token}` } });

  let child = await launch(persist, port);
  try {
    assert.equal((await get('/v1/tags/kill', ADMIN, { method: 'PUT', body: JSON.stringify({ step: 50 }) })).status, 200);
    const segment = new Set();
    const snowflake = new Set();
    let dups = 0;
    const add = (set, id) => { if (set.has(id)) dups++; set.add(id); };
    // Clients draw until the service disappears under them.
    let stop = false;
    const draw = async (c) => {
      while (!stop) {
        try {
          const path = c % 2 ? '/v1/segment/kill?count=37' : '/v1/snowflake?count=50';
          const res = await get(path);
          if (res.status !== 200) continue;
          for (const id of (await res.json()).ids) add(c % 2 ? segment : snowflake, id);
        } catch {
          // connection refused / reset while the process is dead
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    const clients = Array.from({ length: 8 }, (_, c) => draw(c));
    await new Promise((r) => setTimeout(r, 700));
    const maxBefore = BigInt((await (await get('/v1/tags/kill', ADMIN)).json()).maxId);
    await killHard(child);
    const killedWith = segment.size;
    child = await launch(persist, port);
    await new Promise((r) => setTimeout(r, 700));
    stop = true;
    await Promise.all(clients);

    const maxAfter = BigInt((await (await get('/v1/tags/kill', ADMIN)).json()).maxId);
    assert.ok(killedWith > 0 && segment.size > killedWith, `drew IDs before (${killedWith}) and after (${segment.size}) the kill`);
    assert.ok(maxAfter > maxBefore, `max_id only grew: ${maxBefore} → ${maxAfter}`);
    assert.equal(dups, 0, 'no ID issued twice across the kill');
    assert.ok(snowflake.size > 0);
  } finally {
    await killHard(child);
  }
});
