// The slim entry: the app serves the .wasm itself (esbuild's file loader
// copies it and gives its URL) and awaits init() before drawing IDs.
import { init, Snowflake } from 'edgeleaf/slim';
import wasmUrl from 'edgeleaf/edgeleaf.wasm';

await init(new URL(wasmUrl, import.meta.url));
const s = new Snowflake({ workerId: 21 });
document.getElementById('ids').textContent = JSON.stringify([...s.nextIds(3)].map(String));
