// A server-side bundle (as Next.js and other frameworks make for prerendering):
// the package bundled into one file for Node, then run away from node_modules.
import { Snowflake } from 'edgeleaf';

const s = new Snowflake({ workerId: 22 });
console.log(JSON.stringify([...s.nextIds(3)].map(String)));
