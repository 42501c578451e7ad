// edgeleaf/file-store's declarations: a FileStore is a LeaseStore for snowflake().
import { fileStore, type FileStore } from 'edgeleaf/file-store';
import { EdgeleafClient, type EdgeleafError, type LeaseState, type LeasedSnowflake } from 'edgeleaf';

const store: FileStore = fileStore('/var/lib/app/edgeleaf-lease.json');
fileStore(new URL('file:///var/lib/app/edgeleaf-lease.json'));
const path: string = store.path;
const loaded: Promise<LeaseState | undefined> = store.load();
const saved: Promise<void> = store.save({ nodeKey: 'host-1', lastTimestamp: 1 });
const sf: Promise<LeasedSnowflake> = new EdgeleafClient({ url: 'http://127.0.0.1:8787' }).snowflake({ nodeKey: 'host-1', store });
const closed: Promise<void> = store.close();
const code: EdgeleafError['code'] = 'store_locked';
// @ts-expect-error: a path is a string or a URL
fileStore(5);
export { path, loaded, saved, sf, closed, code };
