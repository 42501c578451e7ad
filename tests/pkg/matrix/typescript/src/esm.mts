// TypeScript, strict, an ES module: the `import` condition's types.
import { Snowflake, type EdgeleafError } from 'edgeleaf';

const s = new Snowflake({ workerId: Number(process.argv[2]) });
const ids: bigint[] = [...s.nextIds(2), await s.next()];
try {
  new Snowflake({ workerId: 4096 });
} catch (e) {
  if ((e as EdgeleafError).code !== 'out_of_range') throw e;
}
console.log(JSON.stringify(ids.map(String)));
