// A crash between the two writes of making or revoking an API key never
// leaves a revoked key usable (docs/service.md, "One object per key"). The
// key's own object (`ApiKey`) is the truth for a token; the index
// (`KeyStore`) only lists. Each crash is made on the stopped service's
// files: the state it would leave is put together from the Durable Objects'
// SQLite files, then the service is started on it.
//  - Revocation writes the key's object, then removes the index's row: the
//    index from before the revocation, with the key's object revoked, is a
//    crash between. The key stays refused; it is still listed; revoking it
//    again finishes.
//  - Creation writes the index's row, then the key's object: the index with
//    the row and no object of the key is a crash between. The key opens
//    nothing (its token was never answered); revoking it removes the row.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnService, killHard, ADMIN } from '../support/service.mjs';

const sqliteFiles = (dir) => readdirSync(dir).filter((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite');

async function service(persist) {
  const svc = await spawnService(persist);
  svc.call = async (path, { method = 'GET', body, token = ADMIN } = {}) => {
    const res = await fetch(`${svc.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  return svc;
}

test('a crash between the two writes of a revocation: the key stays refused, is still listed, and a second revocation finishes', async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-keys-crash-'));
  const index = join(persist, 'do', '-KeyStore');
  const snapshot = mkdtempSync(join(tmpdir(), 'edgeleaf-keys-crash-index-'));
  let svc = await service(persist);
  let key;
  try {
    key = (await svc.call('/v1/keys', { method: 'POST', body: { name: 'half revoked', scopes: ['ids'] } })).body;
    assert.equal((await svc.call('/v1/snowflake', { token: key.token })).status, 200);
    await killHard(svc.child);
    // The index as it was before the revocation (its files, WAL included).
    cpSync(index, snapshot, { recursive: true });
    svc = await service(persist);
    assert.equal((await svc.call(`/v1/keys/${key.id}`, { method: 'DELETE' })).status, 200);
    await killHard(svc.child);
    // The crash: the key's object revoked, the index's row never removed.
    rmSync(index, { recursive: true });
    cpSync(snapshot, index, { recursive: true });
    svc = await service(persist);
    const listed = (await svc.call('/v1/keys')).body.keys.map((k) => k.id);
    assert.ok(listed.includes(key.id), 'the half-revoked key is listed');
    const refused = await svc.call('/v1/snowflake', { token: key.token });
    assert.equal(refused.status, 403, `a half-revoked key opened: ${JSON.stringify(refused.body)}`);
    assert.equal(refused.body.error.code, 'forbidden');
    assert.equal((await svc.call(`/v1/keys/${key.id}`, { method: 'DELETE' })).status, 200, 'revoking again');
    assert.ok(!(await svc.call('/v1/keys')).body.keys.some((k) => k.id === key.id));
    assert.equal((await svc.call('/v1/snowflake', { token: key.token })).status, 403);
  } finally {
    await killHard(svc.child);
  }
});

test('a crash between the two writes of a creation: the listed key opens nothing, and revoking it removes it', async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-keys-crash-'));
  const objects = join(persist, 'do', '-ApiKey');
  let svc = await service(persist);
  try {
    const other = (await svc.call('/v1/keys', { method: 'POST', body: { name: 'whole', scopes: ['ids'] } })).body;
    await killHard(svc.child);
    const before = new Set(sqliteFiles(objects));
    svc = await service(persist);
    const key = (await svc.call('/v1/keys', { method: 'POST', body: { name: 'half made', scopes: ['ids'] } })).body;
    await killHard(svc.child);
    // The crash: the index's row written, the key's object never.
    const made = sqliteFiles(objects).filter((f) => !before.has(f));
    assert.equal(made.length, 1, `the new key's object: ${made}`);
    for (const f of readdirSync(objects).filter((f) => f.startsWith(made[0].replace(/\.sqlite$/, '')))) rmSync(join(objects, f));
    svc = await service(persist);
    assert.ok((await svc.call('/v1/keys')).body.keys.some((k) => k.id === key.id), 'the half-made key is listed');
    assert.equal((await svc.call('/v1/snowflake', { token: key.token })).status, 403, 'a half-made key opened');
    assert.equal((await svc.call('/v1/snowflake', { token: other.token })).status, 200, 'another key is untouched');
    assert.equal((await svc.call(`/v1/keys/${key.id}`, { method: 'DELETE' })).status, 200);
    assert.ok(!(await svc.call('/v1/keys')).body.keys.some((k) => k.id === key.id));
  } finally {
    await killHard(svc.child);
  }
});
