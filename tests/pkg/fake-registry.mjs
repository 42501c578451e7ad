// A stand-in for the service's worker-ID registry, as a `fetch` for
// `EdgeleafClient`, on a clock the test holds: it grants, renews and takes
// releases the way the registry's answers look (worker/rules/src/wire/),
// with no floor of its own (issueAfterMs 0), so that what a test sees of the
// client's timestamps is the client's own doing. The real registry is tested
// against the client in tests/service/.
export const LEAF = { timestampBits: 41, workerBits: 10, sequenceBits: 12, epoch: 1288834974657, unitMs: 1 };

export function fakeRegistry({ now = Date.now, ttlMs = 60_000, workerId = 7 } = {}) {
  const reg = { asks: [], renewals: [], releases: [], generation: 0, secret: null, down: false };
  const secret = () => Array.from({ length: 32 }, () => Math.floor(Math.random() * 16).toString(16)).join('');
  const answer = (status, body) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  const lease = (withSecret) => ({
    workerId, generation: reg.generation, expiresAtMs: now() + ttlMs, issueAfterMs: 0, ttlMs,
    layout: { ...LEAF }, ...(withSecret ? { secret: reg.secret } : {}),
  });
  reg.fetch = async (url, init) => {
    if (reg.down) throw new Error('ECONNREFUSED');
    const path = new URL(url).pathname;
    const body = init.body ? JSON.parse(init.body) : undefined;
    if (init.method === 'POST' && path === '/v1/workers/lease') {
      reg.asks.push(body);
      reg.generation++;
      reg.secret = secret();
      return answer(200, lease(true));
    }
    if (init.method === 'POST' && path === `/v1/workers/${workerId}/renew`) {
      reg.renewals.push(body);
      return answer(200, lease(false));
    }
    if (init.method === 'DELETE' && path === `/v1/workers/${workerId}`) {
      reg.releases.push(body);
      return answer(200, {});
    }
    return answer(404, { error: { code: 'not_found', message: `${init.method} ${path}` } });
  };
  return reg;
}
