// The page draws IDs in the browser and writes them into <pre id="ids">.
import { Snowflake } from 'edgeleaf';

const s = new Snowflake({ workerId: 13 });
const out = document.getElementById('ids') ?? document.body.appendChild(document.createElement('pre'));
out.id = 'ids';
out.textContent = JSON.stringify([...s.nextIds(3)].map(String));
