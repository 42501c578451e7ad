'use client';
// How most people write it: the import at the top of a client component.
import { useEffect, useState } from 'react';
import { Snowflake } from 'edgeleaf';

// Rendered on the server while `next build` prerenders, and again in the
// browser: the same ID both times (a fixed time, worker and sequence).
const COMPOSED = { timestamp: Date.UTC(2026, 0, 1), workerId: 7, sequence: 3 };

export default function Ids() {
  const [ids, setIds] = useState(null);
  useEffect(() => {
    const gen = new Snowflake({ workerId: 1 });
    gen.nextIdsAsync(5).then((got) => setIds(Array.from(got, String)));
  }, []);
  return (
    <main>
      <p id="ssr">{Snowflake.compose(COMPOSED).toString()}</p>
      {ids && <pre id="ids">{JSON.stringify(ids)}</pre>}
    </main>
  );
}
