// Node, CommonJS, the package required by name.
const { Snowflake } = require('edgeleaf');

const s = new Snowflake({ workerId: Number(process.argv[2]) });
console.log(JSON.stringify([...s.nextIds(3)].map(String)));
