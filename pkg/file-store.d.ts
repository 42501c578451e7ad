// Types of edgeleaf/file-store: a leased snowflake's store in a file (Node, Deno, Bun).
import type { LeaseState, LeaseStore } from './index.js';

/**
 * `EdgeleafClient#snowflake({ store })`'s store in one file: atomic saves (a temporary file, fsynced, renamed
 * over the old one), mode 0600 (it holds the lease's secret), and one live process at a time (a lock file
 * `<path>.lock`, taken by the first `load()` or `save()`; another live process gets `store_locked`, a lock
 * left by a dead process is taken over; one whose pid cannot be checked — another host, pid namespace or
 * boot — once no `load()` or `save()` has refreshed it for 30 s).
 */
export interface FileStore extends LeaseStore {
  /** The state file (absolute; its directory's symlinks resolved once the lock is taken). */
  readonly path: string;
  /** The saved state, or undefined. @throws {EdgeleafError} `store_locked`; `store_error` when the file holds no JSON object. */
  load(): Promise<LeaseState | undefined>;
  /** Replaces the saved state atomically, refreshing the lock. @throws {EdgeleafError} `store_locked` (also when another process took the lock over). */
  save(state: LeaseState): Promise<void>;
  /** Releases the lock (the file stays); a later `load()` or `save()` takes it again. `snowflake()` calls it when it fails. */
  close(): Promise<void>;
}

/** A store in the file at `path` (a path or a `file:` URL). @throws {EdgeleafError} `invalid_argument` */
export declare function fileStore(path: string | URL): FileStore;
