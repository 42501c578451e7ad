// `edgeleaf import-leaf`: Leaf's `leaf_alloc` rows made tags of the service,
// each continuing strictly above every ID Leaf could have handed out.
//
// What Leaf's max_id means: a Leaf node takes a segment with
// `UPDATE leaf_alloc SET max_id = max_id + step` and then hands out IDs below
// the new max_id (`[max_id - step, max_id)` in its code), so every ID Leaf has
// handed out *or holds in memory* — each node's current segment and the next
// one it prefetched — is at most max_id. The service's `maxId` is the same
// thing (the highest ID allotted in a segment; the next segment starts at
// maxId + 1), and `PUT /v1/tags/{tag}` only ever raises it. So a tag created
// with maxId = Leaf's max_id + margin hands out nothing Leaf could have.
//
// The margin covers what the dump cannot see: segments Leaf nodes take after
// it was made (a node still running takes another when 10% of its current
// one is used). Leaf's dynamic step doubles up to 1,000,000 IDs (Leaf's
// MAX_STEP), or stays at the configured step when that is larger, so one
// segment load is at most max(step, 1,000,000) IDs. The default margin is two
// such loads: it absorbs a dump taken as Leaf nodes were still loading (at
// most one load in flight per node and tag). A table frozen before the dump
// (no more UPDATEs: see docs/service.md, "Moving a Leaf installation") needs
// none: `--margin 0` is then exact. Skipping 2,000,000 IDs costs 2e-13 of
// the 63-bit space.

/** The largest ID: a tag's maxId can go no higher. */
export const MAX_ID = (1n << 63n) - 1n;

/** Leaf's largest dynamic step (`SegmentIDGenImpl.MAX_STEP`). */
export const LEAF_MAX_STEP = 1_000_000;

/** The default margin for a tag of `step`: two of the largest segments a Leaf node loads. */
export const defaultMargin = (step) => 2n * BigInt(Math.max(step, LEAF_MAX_STEP));

/**
 * What to do with each row: `{ tag, leafMaxId, step, tagStep, description,
 * line, margin, targetMaxId, serviceMaxId (bigint | null), action }`, where
 * `tagStep` is the step a created tag gets (`step`, else Leaf's), and action is
 * `create` (no such tag), `raise` (the tag's maxId is below the target),
 * `unchanged` (at or above it) or `conflict` (with `reason`: the service
 * already handed out IDs of this tag at or below Leaf's max_id, or it is
 * opaque). `getTag(tag)` answers the service's view, `null` (no such tag)
 * or `undefined` (not asked: the action is then `create?`).
 */
export async function plan(rows, { margin, step, getTag }) {
  const out = [];
  for (const r of rows) {
    // The margin counts Leaf's step, whatever step the new tag gets.
    const m = margin ?? defaultMargin(r.step);
    const target = r.maxId + m;
    const view = await getTag(r.bizTag);
    const serviceMaxId = view ? BigInt(view.maxId) : null;
    const p = { tag: r.bizTag, leafMaxId: r.maxId, step: r.step, tagStep: step ?? r.step, description: r.description, line: r.line, margin: m, targetMaxId: target, serviceMaxId };
    if (target > MAX_ID) {
      // Nothing is left above Leaf's IDs (and the margin) to continue with.
      out.push({ ...p, action: 'conflict', reason: `${r.bizTag}: Leaf's max_id ${r.maxId} + the margin ${m} passes the largest ID, ${MAX_ID}` });
    } else if (view === undefined) out.push({ ...p, action: 'create?' });
    else if (view === null) out.push({ ...p, action: 'create' });
    else if (view.opaque) {
      out.push({ ...p, action: 'conflict', reason: `${r.bizTag} is an opaque tag on the service: its IDs are a permutation, not above Leaf's max_id` });
    } else if (serviceMaxId >= target) out.push({ ...p, action: 'unchanged' });
    else if (serviceMaxId > 0n && serviceMaxId <= r.maxId) {
      out.push({ ...p, action: 'conflict', reason: `${r.bizTag} already handed out IDs up to ${serviceMaxId} on the service, at or below Leaf's max_id ${r.maxId}: they may equal Leaf's` });
    } else out.push({ ...p, action: 'raise' });
  }
  return out;
}

/** Whether `err` refuses `target` as a maxId because the tag keeps a higher one. */
function keptAbove(err, target) {
  const m = err?.code === 'out_of_range' && /\bmax_id: expected (\d+)\.\.=(\d+), found (\d+)\b/.exec(err.message ?? '');
  return Boolean(m) && BigInt(m[3]) === target && target < BigInt(m[1]);
}

/**
 * Carries out a plan with no conflict: creates and raises tags through
 * `putTag(tag, body)` (the service's view back). A tag deleted on the service
 * keeps its max_id: if that is above the target, re-creating it without one
 * continues there. Each entry comes back with `action` in the past tense and
 * `maxId`, the tag's maxId on the service now.
 */
export async function apply(entries, { putTag }) {
  const done = [];
  for (const e of entries) {
    if (e.action === 'unchanged') { done.push({ ...e, maxId: e.serviceMaxId }); continue; }
    const maxId = e.targetMaxId.toString();
    let view;
    if (e.action === 'create') {
      const body = { step: e.tagStep, maxId, ...(e.description ? { description: e.description } : {}) };
      try {
        view = await putTag(e.tag, body);
      } catch (err) {
        // A deleted tag keeps its maxId (a new one never goes back): above
        // ours, it stays, and the tag is re-created without one. Only that
        // refusal ("expected <kept>..=<last>, found <ours>" with ours below
        // the kept one): any other would create the tag at 0.
        if (!keptAbove(err, e.targetMaxId)) throw err;
        const { maxId: _, ...rest } = body;
        view = await putTag(e.tag, rest);
      }
    } else {
      view = await putTag(e.tag, { maxId });
    }
    const now = BigInt(view.maxId);
    if (now < e.targetMaxId) {
      const err = new Error(`${e.tag}: the service kept maxId ${now}, below the ${e.targetMaxId} asked`);
      err.code = 'import_conflict';
      throw err;
    }
    done.push({ ...e, action: e.action === 'create' ? 'created' : 'raised', maxId: now });
  }
  return done;
}
