// edgeleaf/slim's declarations: init/initSync, then the same API.
import { init, initSync, Snowflake, type WasmSource, type EdgeleafError } from 'edgeleaf/slim';

const sources: WasmSource[] = ['/edgeleaf.wasm', new URL('https://example.invalid/edgeleaf.wasm'), new Uint8Array(8), fetch('/edgeleaf.wasm')];
const ready: Promise<void> = init(sources[0]);
initSync(new Uint8Array(8));
const id: bigint = new Snowflake({ workerId: 1 }).nextId();
const code: EdgeleafError['code'] = 'not_initialized';
// @ts-expect-error: init needs the wasm
init();
export { ready, id, code };
