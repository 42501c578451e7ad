// Deno 2, the package from node_modules (a package.json project), imported
// by name, typed by its declarations.
import { Snowflake } from 'edgeleaf';

const s = new Snowflake({ workerId: 18 });
const ids: bigint[] = [...s.nextIds(2), await s.next()];
console.log(JSON.stringify(ids.map(String)));
