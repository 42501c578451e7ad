// Node, ES module, the package imported by name.
import { Snowflake } from 'edgeleaf';

const s = new Snowflake({ workerId: Number(process.argv[2]) });
console.log(JSON.stringify([...s.nextIds(3), await s.next()].map(String)));
