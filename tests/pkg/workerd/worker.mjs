// A Worker that uses the npm package as a Workers user would: `import` by
// name; wrangler picks the `workerd` export and imports the .wasm as a module.
import { Snowflake, SegmentGenerator } from 'edgeleaf';

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get('n') ?? 10000);
    const s = new Snowflake({ workerId: 11 });
    const ids = await s.nextIdsAsync(n);
    let increasing = true;
    for (let i = 1; i < ids.length; i++) if (!(ids[i] > ids[i - 1])) increasing = false;
    let max = 0n;
    const g = new SegmentGenerator({
      tag: 'workerd',
      step: 10,
      fetchSegment: async (tag, step) => { const start = max + 1n; max += BigInt(step); return { start, end: max }; },
    });
    const seg = await Promise.all(Array.from({ length: 500 }, () => g.next()));
    let code;
    try { new Snowflake({ workerId: -1 }); } catch (e) { code = e.code; }
    return Response.json({
      count: ids.length,
      unique: new Set(ids).size,
      increasing,
      first: ids[0].toString(),
      workerId: s.decompose(ids[0]).workerId,
      segmentUnique: new Set(seg).size,
      badOptionCode: code,
    });
  },
};
