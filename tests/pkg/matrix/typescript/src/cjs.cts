// TypeScript, strict, compiled to CommonJS: the `require` condition's types.
import { Snowflake } from 'edgeleaf';

const s = new Snowflake({ workerId: Number(process.argv[2]) });
const ids: BigUint64Array = s.nextIds(3);
console.log(JSON.stringify([...ids].map(String)));
