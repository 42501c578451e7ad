// `/metrics?tag=a&tag=b` reads each named tag from its own object: one that
// does not answer (here: its stored row made unreadable, so it answers
// `store_error`) is shown down — `edgeleaf_tag_up{tag="…"} 0`, and no other
// series of it — never silently left out; the tags that answer are up (1)
// with their series, and a name that is no tag has none at all. So too in
// the default scrape (the busiest), for a tag with no summary's stats yet,
// whose history is read; named as well, it is listed once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start } from '../support/service.mjs';
import { objectFiles, tableNames } from '../support/fixture.mjs';

/** The persisted SQLite file of `tag`'s object. */
function tagFile(persist, tag) {
  return objectFiles(persist, 'TagStore')
    .filter((f) => tableNames(f).includes('tag'))
    .find((f) => {
      const db = new DatabaseSync(f, { readOnly: true });
      const has = db.prepare('SELECT biz_tag FROM tag').get()?.biz_tag === tag;
      db.close();
      return has;
    });
}

test('/metrics?tag= shows a named tag whose object does not answer as down, not missing', async () => {
  const persist = mkdtempSync(join(tmpdir(), 'edgeleaf-metrics-down-'));
  try {
    let svc = await start({ persist });
    try {
      for (const tag of ['m-up', 'm-down']) {
        assert.ok([200, 201].includes((await svc.admin(`/v1/tags/${tag}`, { method: 'PUT', body: JSON.stringify({ step: 10 }) })).status));
      }
    } finally {
      await svc.dispose();
    }
    const file = tagFile(persist, 'm-down');
    assert.ok(file, "m-down's object has its table");
    const db = new DatabaseSync(file);
    db.exec("UPDATE tag SET max_id = 'unreadable'");
    db.close();
    // m-down has no stats in the catalog (the default scrape then reads its
    // history), whether or not its first report landed before the stop.
    const [catalog] = objectFiles(persist, 'Catalog');
    const cat = new DatabaseSync(catalog);
    cat.prepare('UPDATE tags SET summary = NULL, rate = 0, quiet_ms = 0 WHERE biz_tag = ?').run('m-down');
    assert.equal(cat.prepare('SELECT COUNT(*) AS n FROM tags WHERE biz_tag = ?').get('m-down').n, 1, 'm-down is listed');
    cat.close();

    svc = await start({ persist });
    try {
      const view = await svc.admin('/v1/tags/m-down');
      assert.ok(view.status >= 500, `m-down's object fails: ${view.status} ${await view.text()}`);
      const res = await svc.admin('/metrics?tag=m-up&tag=m-down&tag=no-such-tag');
      const text = await res.text();
      assert.equal(res.status, 200, text);
      const series = (tag) => [...text.matchAll(/^(edgeleaf_tag_\w+)\{tag="([^"]*)"\} (\S+)$/gm)]
        .filter((m) => m[2] === tag).map((m) => `${m[1]} ${m[3]}`);
      assert.match(text, /^# TYPE edgeleaf_tag_up gauge$/m);
      assert.deepEqual(series('m-down'), ['edgeleaf_tag_up 0'], text);
      assert.ok(series('m-up').includes('edgeleaf_tag_up 1'), text);
      assert.ok(series('m-up').includes('edgeleaf_tag_step 10'), text);
      assert.deepEqual(series('no-such-tag'), [], text);

      // The busiest (the default scrape): m-down has no stats in the catalog
      // (cleared above), so it is read from its history; that fails, and it
      // is listed down, not left out.
      const busiest = await svc.admin('/metrics');
      const all = await busiest.text();
      assert.equal(busiest.status, 200, all);
      const seriesOf = (tag) => [...all.matchAll(/^(edgeleaf_tag_\w+)\{tag="([^"]*)"\} (\S+)$/gm)]
        .filter((m) => m[2] === tag).map((m) => `${m[1]} ${m[3]}`);
      assert.deepEqual(seriesOf('m-down'), ['edgeleaf_tag_up 0'], all);
      assert.ok(seriesOf('m-up').includes('edgeleaf_tag_up 1'), all);
      // Named too: listed once (asked once), not down twice.
      const both = await (await svc.admin('/metrics?top=10&tag=m-down')).text();
      assert.equal(both.match(/^edgeleaf_tag_up\{tag="m-down"\} 0$/gm)?.length, 1, both);
    } finally {
      await svc.dispose();
    }
  } finally {
    rmSync(persist, { recursive: true, force: true });
  }
});
