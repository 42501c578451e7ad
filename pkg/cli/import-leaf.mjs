// `edgeleaf import-leaf`: Leaf's `leaf_alloc` rows made tags of the service,
// each continuing strictly above every ID Leaf could have handed out.
//
// Where each tag continues, and whether it may, is the core's rule
// (`continueAfterLeaf`, src/leaf.rs: Leaf's max_id plus a margin of, by
// default, two of Leaf's largest segment loads; a target past 2^62 refused
// unless forced; docs/service.md, "Moving a Leaf installation"). This file
// asks the service, applies the plan, and says what it did. Each write is
// conditional on what the plan read (`expectMaxId`): a tag created or drawn
// from in between is refused (409 `tag_changed`), never raised over IDs it
// handed out.
import { continueAfterLeaf } from 'edgeleaf';
// The bindings themselves, made ready by the import of 'edgeleaf' above (the
// same module: index.mjs imports it and compiles the wasm).
import { leafMaxStep } from '../web/edgeleaf.js';

/** Leaf's largest dynamic step (`SegmentIDGenImpl.MAX_STEP`; the core's `leaf::LEAF_MAX_STEP`), for the help text. */
export const LEAF_MAX_STEP = leafMaxStep();

/**
 * What to do with each row: `{ tag, leafMaxId, step, tagStep, description,
 * line, margin, targetMaxId, serviceMaxId (bigint | null), action }`, where
 * `tagStep` is the step a created tag gets (`step`, else Leaf's), and action is
 * `create` (no such tag), `raise` (it never allotted an ID), `unchanged`
 * (at or above the target) or `conflict` (with `reason`: the service allotted
 * IDs of this tag below the target, it is opaque, the target passes the
 * last ID, or it passes 2^62 without `force`). `getTag(tag)` answers the
 * service's view, `null` (no such tag) or `undefined` (not asked: the
 * action is then `create?`).
 */
export async function plan(rows, { margin, step, getTag, force = false }) {
  const out = [];
  for (const r of rows) {
    const view = await getTag(r.bizTag);
    const serviceMaxId = view ? BigInt(view.maxId) : null;
    const service = view ? { maxId: serviceMaxId, opaque: Boolean(view.opaque) } : null;
    // The margin counts Leaf's step, whatever step the new tag gets.
    const c = continueAfterLeaf(r.maxId, r.step, { margin, service, force });
    const p = { tag: r.bizTag, leafMaxId: r.maxId, step: r.step, tagStep: step ?? r.step, description: r.description, line: r.line, margin: c.margin, targetMaxId: c.targetMaxId, serviceMaxId };
    if (c.action !== 'conflict') {
      out.push({ ...p, action: view === undefined ? 'create?' : c.action });
      continue;
    }
    const reason = {
      past_last_id: `${r.bizTag}: Leaf's max_id ${r.maxId} + the margin ${c.margin} passes the largest ID`,
      short_runway: `${r.bizTag}: Leaf's max_id ${r.maxId} + the margin ${c.margin} passes 2^62, leaving the tag a short runway (a tag's maxId never goes back): check the dump, or import it with --force`,
      opaque: `${r.bizTag} is an opaque tag on the service: its IDs are a permutation, not above Leaf's max_id`,
      allotted: `${r.bizTag} already allotted IDs up to ${serviceMaxId} on the service, below Leaf's max_id ${r.maxId} + the margin ${c.margin}: they may equal Leaf's`,
    }[c.conflict];
    out.push({ ...p, action: 'conflict', reason });
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
 * `putTag(tag, body)` (the service's view back), each write conditional on
 * the tag as the plan read it (`expectMaxId`: `null` for none, else its
 * maxId; refused with 409 `tag_changed` if it changed in between). A tag
 * deleted on the service keeps its max_id: if that is above the target,
 * re-creating it without one continues there. Each entry comes back with
 * `action` in the past tense and `maxId`, the tag's maxId on the service now.
 */
export async function apply(entries, { putTag }) {
  const done = [];
  for (const e of entries) {
    if (e.action === 'unchanged') { done.push({ ...e, maxId: e.serviceMaxId }); continue; }
    const maxId = e.targetMaxId.toString();
    let view;
    if (e.action === 'create') {
      const body = { step: e.tagStep, maxId, ...(e.description ? { description: e.description } : {}), expectMaxId: null };
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
      view = await putTag(e.tag, { maxId, expectMaxId: e.serviceMaxId.toString() });
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
