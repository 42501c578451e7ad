// A user's Worker calling edgeleaf through its service bindings (see
// wrangler.toml). Each path is one way of drawing IDs that
// tests/service/binding.test.mjs and tests/bench/http.bench.mjs compare:
//   /rpc?op=segment&args=["tag",10]   one RPC call of the `Ids` entrypoint, as answered
//   /rpc-many?tag=T&count=C&calls=N   N concurrent RPC segment calls, their IDs
//   /fetch?path=/v1/segment/T         edgeleaf's HTTP API through the binding's fetch
//   /public?op=segment                an RPC method asked of the default entrypoint
//   /client?tag=T&n=N                 N IDs from `new EdgeleafClient({ binding: env.IDS })`
//   /client-snowflake?n=N             N IDs from its `snowflake()` (a leased worker ID)
//   /client-error?tag=T               the client's error for a tag it may not use
//   /bench?via=rpc|fetch|http&tag=T&count=C&calls=K&chains=P
//                                     P concurrent chains of K calls each, one
//                                     way: an RPC call, fetch through the
//                                     binding, or a public HTTP request (to `base`)
import { EdgeleafClient } from 'edgeleaf';

const json = (v, status = 200) => new Response(JSON.stringify(v), { status, headers: { 'content-type': 'application/json' } });

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = (k, d) => url.searchParams.get(k) ?? d;
    switch (url.pathname) {
      case '/rpc':
        return json(await env.IDS[q('op')](...JSON.parse(q('args', '[]'))));
      case '/rpc-many': {
        const calls = Array.from({ length: Number(q('calls', 1)) }, () => env.IDS.segment(q('tag'), Number(q('count', 1))));
        const answers = await Promise.all(calls);
        const failed = answers.find((a) => a.error);
        return failed ? json(failed, 500) : json({ ids: answers.flatMap((a) => a.ids) });
      }
      case '/fetch':
        return env.EDGELEAF.fetch(`http://edgeleaf${q('path')}`, { headers: { authorization: request.headers.get('authorization') ?? '' } });
      case '/public':
        try {
          return json({ answer: await env.EDGELEAF[q('op')]('rpc-load', 1) });
        } catch (e) {
          return json({ thrown: String(e?.message ?? e) });
        }
      case '/client': {
        const client = new EdgeleafClient({ binding: env.IDS });
        const gen = client.segment(q('tag'));
        try {
          const ids = await gen.nextIds(Number(q('n', 1)));
          return json({ ids: Array.from(ids, String) });
        } finally {
          await gen.close();
        }
      }
      case '/client-snowflake': {
        const client = new EdgeleafClient({ binding: env.IDS });
        const flake = await client.snowflake();
        try {
          return json({ ids: Array.from(flake.nextIds(Number(q('n', 1))), String), workerId: flake.workerId });
        } finally {
          await flake.close();
        }
      }
      case '/client-error': {
        const client = new EdgeleafClient({ binding: env.IDS });
        try {
          await client.segment(q('tag')).next();
          return json({ error: null });
        } catch (e) {
          return json({ code: e.code, cause: e.cause?.code, message: e.message });
        }
      }
      case '/bench': {
        const [tag, count, auth] = [q('tag'), q('count', '1'), request.headers.get('authorization') ?? ''];
        const viaHttp = (f, base) => async () => (await f(`${base}/v1/segment/${tag}?count=${count}`, { headers: { authorization: auth } })).json();
        const one = {
          rpc: () => env.IDS.segment(tag, Number(count)),
          fetch: viaHttp((u, i) => env.EDGELEAF.fetch(u, i), 'http://edgeleaf'),
          http: viaHttp(fetch, q('base')),
        }[q('via')];
        let ids = 0;
        const chain = async () => {
          for (let i = 0; i < Number(q('calls', 1)); i++) {
            const a = await one();
            if (!a.ids) throw new Error(JSON.stringify(a));
            ids += a.ids.length;
          }
        };
        await Promise.all(Array.from({ length: Number(q('chains', 1)) }, chain));
        return json({ ids });
      }
      default:
        return json({ error: 'no such path' }, 404);
    }
  },
};
