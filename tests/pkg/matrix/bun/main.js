// Bun, the package imported by name: run as a script, and bundled for a
// browser by `bun build` (the page writes its IDs into <pre id="ids">).
import { Snowflake } from 'edgeleaf';

const s = new Snowflake({ workerId: 19 });
const ids = JSON.stringify([...s.nextIds(3)].map(String));
if (typeof document === 'undefined') console.log(ids);
else document.getElementById('ids').textContent = ids;
