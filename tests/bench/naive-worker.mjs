// What a user would build instead of segments: every request increments a
// counter in the tag's Durable Object (SQLite-backed) and answers it. Written
// in plain JS, the cheapest form of it, and run by tests/bench/http.bench.mjs next
// to the segment route to show what the double buffer buys.
export class Counter {
  constructor(state) {
    this.sql = state.storage.sql;
    this.sql.exec('CREATE TABLE IF NOT EXISTS counter(id INTEGER PRIMARY KEY, n INTEGER NOT NULL)');
  }

  fetch() {
    const [{ n }] = this.sql.exec(
      'INSERT INTO counter(id, n) VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET n = n + 1 RETURNING n',
    ).toArray();
    return new Response(String(n));
  }
}

export default {
  fetch(request, env) {
    const tag = new URL(request.url).pathname.split('/').pop();
    return env.COUNTER.get(env.COUNTER.idFromName(tag)).fetch(request);
  },
};
