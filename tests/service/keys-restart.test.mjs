// API keys and the per-key worker-ID cap across a kill -9: the whole service
// (workerd, and with it the KeyStore and the WorkerRegistry) is SIGKILLed and
// started again on the same persisted Durable Object state. Afterwards every
// key opens what it opened and nothing more, a revoked key stays refused, and
// the leases a key took before the kill still count against
// MAX_WORKERS_PER_KEY. A fresh process has an empty key cache: every answer
// after the restart comes from what the stores kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnService, killHard, ADMIN } from '../support/service.mjs';

const VARS = { MAX_WORKERS_PER_KEY: '2' };

test('after kill -9 and a restart on the same state: keys open what they opened, revoked keys stay refused, per-key caps hold', async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-keys-restart-'));
  let svc = await spawnService(persist, VARS);
  try {
    const call = async (path, { method = 'GET', body, token } = {}) => {
      const res = await fetch(`${svc.url}${path}`, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      return { status: res.status, code: res.status >= 400 ? JSON.parse(text).error?.code : undefined, text };
    };
    const makeKey = async (spec) => {
      const res = await call('/v1/keys', { method: 'POST', body: spec, token: ADMIN });
      assert.equal(res.status, 201, res.text);
      return JSON.parse(res.text);
    };
    const lease = (token, nodeKey) => call('/v1/workers/lease', { method: 'POST', body: { nodeKey, nodeTime: Date.now() }, token });

    for (const t of ['rs-a', 'rs-b']) assert.equal((await call(`/v1/tags/${t}`, { method: 'PUT', body: { step: 10 }, token: ADMIN })).status, 200);
    const ids = await makeKey({ name: 'rs-a ids', scopes: ['ids'], tags: 'rs-a' });
    const monitor = await makeKey({ name: 'monitor', scopes: ['monitor'] });
    const revoked = await makeKey({ name: 'revoked', scopes: ['ids'] });
    const fleet = await makeKey({ name: 'fleet', scopes: ['registry'] });
    const other = await makeKey({ name: 'other fleet', scopes: ['registry'] });

    // What each credential may do: [what, request, expected status (and code)].
    const expectations = () => [
      ['ids key, its tag', () => call('/v1/segment/rs-a', { token: ids.token }), 200],
      ['ids key, another tag', () => call('/v1/segment/rs-b', { token: ids.token }), 403, 'forbidden'],
      ['ids key, a monitor route', () => call('/v1/tags', { token: ids.token }), 403, 'forbidden'],
      ['monitor key', () => call('/v1/tags', { token: monitor.token }), 200],
      ['monitor key, an admin route', () => call('/v1/keys', { token: monitor.token }), 403, 'forbidden'],
      ['revoked key', () => call('/v1/snowflake', { token: revoked.token }), 403, 'forbidden'],
      ['registry key at its cap', () => lease(fleet.token, 'fleet-over'), 429, 'worker_id_limit'],
    ];
    const check = async (when) => {
      const wrong = [];
      for (const [what, request, status, code] of expectations()) {
        const res = await request();
        if (res.status !== status || (code && res.code !== code)) wrong.push(`${when}, ${what}: expected ${status} ${code ?? ''}, found ${res.status} ${res.text.slice(0, 160)}`);
      }
      return wrong;
    };

    assert.equal((await call('/v1/snowflake', { token: revoked.token })).status, 200);
    assert.equal((await call(`/v1/keys/${revoked.id}`, { method: 'DELETE', token: ADMIN })).status, 200);
    const held = [];
    for (const n of ['fleet-0', 'fleet-1']) {
      const res = await lease(fleet.token, n);
      assert.equal(res.status, 200, res.text);
      held.push(JSON.parse(res.text));
    }
    assert.deepEqual(await check('before the kill'), []);

    await killHard(svc.child);
    svc = await spawnService(persist, VARS);

    // Every expectation, all reported at once.
    assert.deepEqual(await check('after the restart'), []);
    const keys = JSON.parse((await call('/v1/keys', { token: ADMIN })).text).keys.map((k) => k.id);
    assert.ok(!keys.includes(revoked.id) && keys.includes(ids.id) && keys.includes(fleet.id), JSON.stringify(keys));
    // The cap is per key, not the registry full: another key still leases.
    assert.equal((await lease(other.token, 'other-0')).status, 200);
    // The leases that count are the ones taken before the kill: releasing one makes room for one.
    const [first] = held;
    const released = await call(`/v1/workers/${first.workerId}`, { method: 'DELETE', body: { generation: first.generation, secret: first.secret }, token: fleet.token });
    assert.equal(released.status, 200, released.text);
    assert.equal((await lease(fleet.token, 'fleet-2')).status, 200);
    const over = await lease(fleet.token, 'fleet-3');
    assert.deepEqual([over.status, over.code], [429, 'worker_id_limit']);
  } finally {
    await killHard(svc.child);
  }
});
