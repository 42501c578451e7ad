// The page draws IDs in the browser and writes them into <pre id="ids">.
import { Snowflake } from 'edgeleaf';

const s = new Snowflake({ workerId: 12 });
document.getElementById('ids').textContent = JSON.stringify([...s.nextIds(3)].map(String));
