#!/usr/bin/env node
// `npx edgeleaf …`: the package's JS API on the command line. Decoding,
// local IDs and opaque IDs are the package's own classes (the core's rules);
// the service commands are `EdgeleafClient.request` calls. Nothing here
// decides anything about IDs: it reads arguments, calls, and prints.
//
// Exit codes: 0 done; 1 a bug (an error without a code); 2 bad usage or bad
// input (refused before anything was sent); 3 refused by the service (a 4xx
// answer), or an import that conflicts with the service's tags; 4 the
// service unavailable (a 5xx answer, or no answer at all).
import { parseArgs } from 'node:util';
import { readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Snowflake, SegmentGenerator, OpaqueIds, EdgeleafClient, layoutInfo, codedError, MAX_IDS_PER_CALL } from 'edgeleaf';
import { parseLeafRows } from './leaf-dump.mjs';
import { plan, apply, LEAF_MAX_STEP } from './import-leaf.mjs';

export const EXIT = { ok: 0, bug: 1, usage: 2, refused: 3, unavailable: 4 };

const usage = (message) => codedError('invalid_argument', message);

// ------------------------------------------------------------ arguments

const COMMON = {
  json: { type: 'boolean', help: 'print JSON (IDs as decimal strings) for scripts' },
  help: { type: 'boolean', short: 'h', help: 'this help' },
};
const SERVICE = {
  url: { type: 'string', help: 'the service, e.g. http://127.0.0.1:8787 (default: $EDGELEAF_URL)' },
};
const LAYOUT = {
  layout: { type: 'string', help: 'leaf (41/10/12, default), jsSafe (38/7/8 in 10 ms units), or a JSON layout' },
  epoch: { type: 'string', help: "the layout's epoch: Unix ms or an ISO date (default: the layout's)" },
};

/** A whole number argument (ranges are the API's or the service's to check). */
function whole(name, s) {
  if (s === undefined) return undefined;
  if (!/^[0-9]{1,15}$/.test(s)) throw usage(`${name}: expected a whole number, found ${JSON.stringify(s)}`);
  return Number(s);
}

function layoutOptions(v) {
  const o = {};
  if (v.layout !== undefined) {
    if (v.layout.trim().startsWith('{')) {
      try { o.layout = JSON.parse(v.layout); } catch { throw usage(`--layout: expected leaf, jsSafe or a JSON object, found ${JSON.stringify(v.layout)}`); }
    } else o.layout = v.layout;
  }
  if (v.epoch !== undefined) {
    const ms = /^[0-9]+$/.test(v.epoch) ? Number(v.epoch) : Date.parse(v.epoch);
    if (!Number.isSafeInteger(ms)) throw usage(`--epoch: expected Unix ms or an ISO date, found ${JSON.stringify(v.epoch)}`);
    o.epoch = ms;
  }
  return o;
}

/**
 * Checks a tag (and a step) with the core's rules, the ones SegmentGenerator
 * applies and the service too: `invalid_key`, `out_of_range`.
 */
function checkTag(tag, step) {
  new SegmentGenerator({ tag, ...(step === undefined ? {} : { step }), fetchSegment: () => Promise.reject(new Error('not used')) });
  return tag;
}

/** The service named by `--url` or `$EDGELEAF_URL`, with `$EDGELEAF_TOKEN` (never a flag: it would land in shell history). */
function service(v) {
  const url = v.url ?? process.env.EDGELEAF_URL;
  if (!url) throw usage('--url: expected the service\'s URL (or set EDGELEAF_URL), found none');
  const token = process.env.EDGELEAF_TOKEN || undefined;
  return new EdgeleafClient({ url, token });
}

// A tag in a path: checked by the core first, its characters ([A-Za-z0-9._:-]) go as they are.
const tagPath = (tag) => `/v1/tags/${checkTag(tag)}`;

// ------------------------------------------------------------ output

const iso = (ms) => (ms === null || ms === undefined ? '—' : new Date(ms).toISOString());

/**
 * A control character written as an escape: C0 as JSON writes it (`\n`,
 * `\u001b`), DEL and C1 (U+0080..U+009F, which terminals also read as
 * commands: U+009B is CSI) as `\u007f`..`\u009f` (JSON leaves them raw).
 */
const escapeControl = (ch) => (ch < '\x7f' ? JSON.stringify(ch).slice(1, -1) : `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** `text` with control characters (but line breaks) written as escapes. */
const printable = (text) => text.replace(/[\x00-\x09\x0b-\x1f\x7f-\x9f]/g, escapeControl);

/** Columns padded to their widest cell; numbers right-aligned. */
export function table(headers, rows) {
  // A control character (a description's line break) is shown escaped: one row, one line.
  const cell = (c) => (c === null || c === undefined ? '—' : String(c).replace(/[\x00-\x1f\x7f-\x9f]/g, escapeControl));
  const cells = [headers, ...rows.map((r) => r.map(cell))];
  const right = headers.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number' || typeof r[i] === 'bigint' || /^[0-9]+$/.test(String(r[i] ?? ''))));
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 && !right[i] ? c : right[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd()).join('\n');
}

const toJson = (data) => JSON.stringify(data, (_, v) => (typeof v === 'bigint' ? v.toString() : v), 2);

function kindOf(t) {
  if (t.opaque) return `opaque ${Object.entries(t.opaque).map(([k, n]) => `${k}:${n}`).join('')}`;
  return t.monotonic ? 'monotonic' : 'plain';
}

const tagRows = (tags) => table(
  ['tag', 'maxId', 'step', 'maxStep', 'kind', 'updated', 'description'],
  tags.map((t) => [t.bizTag, t.maxId, t.step, t.maxStep, kindOf(t), iso(t.updateTime), t.description]),
);

// ------------------------------------------------------------ commands

const COMMANDS = {
  decode: {
    args: '<id>',
    summary: 'the time, worker ID and sequence of a snowflake ID',
    options: { ...LAYOUT },
    positionals: [1, 1],
    run([id], v) {
      const layout = layoutOptions(v);
      const p = Snowflake.decompose(id, layout);
      const info = layoutInfo(layout);
      const data = { id: String(id), timestamp: p.timestamp, date: p.date.toISOString(), workerId: p.workerId, sequence: p.sequence };
      const name = typeof layout.layout === 'string' ? layout.layout : layout.layout ? 'custom' : 'leaf';
      const text = table(['', ''], [
        ['id', data.id],
        ['time', `${data.date} (${p.timestamp} ms)`],
        ['worker', p.workerId],
        ['sequence', p.sequence],
        ['layout', `${name}: ${info.timestampBits}/${info.workerBits}/${info.sequenceBits} bits, epoch ${iso(info.epoch)} (${info.epoch}), ${info.unitMs} ms units`],
      ]).split('\n').slice(1).join('\n');
      return { data, text };
    },
  },

  id: {
    args: '',
    summary: 'snowflake IDs made here, one per line (not unique against other generators under the same worker ID)',
    options: {
      ...LAYOUT,
      n: { type: 'string', short: 'n', help: `how many, 1..=${MAX_IDS_PER_CALL} (default 1)` },
      'worker-id': { type: 'string', help: 'the worker ID to mint under (required: no default can be safe, and 0.. are the service\'s minters\')' },
    },
    positionals: [0, 0],
    async run(_, v) {
      const workerId = whole('--worker-id', v['worker-id']);
      if (workerId === undefined) throw usage('id: expected --worker-id N, one no other generator uses (IDs made under a worker ID another generator also uses can repeat)');
      const gen = new Snowflake({ workerId, ...layoutOptions(v) });
      const ids = [...(await gen.nextIdsAsync(whole('-n', v.n) ?? 1))].map(String);
      return { data: { ids }, text: ids.join('\n') };
    },
  },

  'opaque key': {
    args: '',
    summary: 'a new 128-bit opaque key (hex), for EDGELEAF_OPAQUE_KEY',
    options: {},
    positionals: [0, 0],
    run() {
      const key = Array.from(OpaqueIds.generateKey(), (b) => b.toString(16).padStart(2, '0')).join('');
      return { data: { key }, text: key };
    },
  },

  'opaque encode': {
    args: '<counter>',
    summary: 'the opaque ID of a counter, under $EDGELEAF_OPAQUE_KEY',
    options: opaqueOptions(),
    positionals: [1, 1],
    run([counter], v) {
      const id = opaque(v).encode(counter).toString();
      return { data: { counter, id }, text: id };
    },
  },

  'opaque decode': {
    args: '<id>',
    summary: 'the counter of an opaque ID, under $EDGELEAF_OPAQUE_KEY',
    options: opaqueOptions(),
    positionals: [1, 1],
    run([id], v) {
      const counter = opaque(v).decode(id).toString();
      return { data: { id, counter }, text: counter };
    },
  },

  tags: {
    args: '',
    summary: "the service's tags (scope monitor)",
    options: { ...SERVICE },
    positionals: [0, 0],
    async run(_, v) {
      // Every page (the service lists 100 tags a page, `next` the cursor of
      // the one after; a service before 0.2 lists them all at once).
      const data = await service(v).request('GET', '/v1/tags?limit=1000');
      for (let next = data.next; next; ) {
        const page = await service(v).request('GET', `/v1/tags?limit=1000&cursor=${encodeURIComponent(next)}`);
        data.tags.push(...page.tags);
        if (page.unavailable) data.unavailable = [...(data.unavailable ?? []), ...page.unavailable];
        next = page.next;
      }
      delete data.next;
      return { data, text: data.tags.length ? tagRows(data.tags) : 'no tags' };
    },
  },

  'tag put': {
    args: '<tag>',
    summary: 'creates or changes a tag (scope admin; maxId only grows)',
    options: {
      ...SERVICE,
      step: { type: 'string', help: 'the step (segment length), 1..=1000000' },
      'max-step': { type: 'string', help: 'the largest step granted (equal to --step pins it)' },
      'max-id': { type: 'string', help: 'the highest ID already handed out: the next segment starts above it' },
      description: { type: 'string', help: 'free text' },
      monotonic: { type: 'boolean', help: 'at creation: every ID greater than every one before it' },
      opaque: { type: 'string', help: 'at creation: opaque IDs, bits:32..63 or digits:6..18' },
    },
    positionals: [1, 1],
    async run([tag], v) {
      checkTag(tag);
      const body = {};
      if (v.step !== undefined) body.step = whole('--step', v.step);
      if (v['max-step'] !== undefined) body.maxStep = whole('--max-step', v['max-step']);
      if (v['max-id'] !== undefined) {
        if (!/^[0-9]{1,19}$/.test(v['max-id'])) throw usage(`--max-id: expected a decimal integer, found ${JSON.stringify(v['max-id'])}`);
        body.maxId = v['max-id'];
      }
      if (v.description !== undefined) body.description = v.description;
      if (v.monotonic) body.monotonic = true;
      if (v.opaque !== undefined) {
        const m = /^(bits|digits):([0-9]{1,2})$/.exec(v.opaque);
        if (!m) throw usage(`--opaque: expected bits:N or digits:N, found ${JSON.stringify(v.opaque)}`);
        body.opaque = { [m[1]]: Number(m[2]) };
      }
      const data = await service(v).request('PUT', tagPath(tag), body);
      return { data, text: tagRows([data]) };
    },
  },

  'keys create': {
    args: '',
    summary: 'makes an API key; its token is printed this once (scope admin)',
    options: {
      ...SERVICE,
      name: { type: 'string', help: 'what the key is for' },
      scopes: { type: 'string', help: 'comma-separated: ids, registry, monitor, admin' },
      tags: { type: 'string', help: 'limit it to a tag, or a prefix ending in * (default: every tag)' },
    },
    positionals: [0, 0],
    async run(_, v) {
      if (v.name === undefined) throw usage('--name: expected a name for the key, found none');
      if (v.scopes === undefined) throw usage('--scopes: expected e.g. ids or ids,registry, found none');
      const body = { name: v.name, scopes: v.scopes.split(',').map((s) => s.trim()).filter(Boolean), ...(v.tags !== undefined ? { tags: v.tags } : {}) };
      const data = await service(v).request('POST', '/v1/keys', body);
      return { data, text: `${keyRows([data])}\n\ntoken ${data.token}\n(shown this once: keep it where the key's user reads it, e.g. their EDGELEAF_TOKEN)` };
    },
  },

  'keys list': {
    args: '',
    summary: 'every API key (never a token) (scope admin)',
    options: { ...SERVICE },
    positionals: [0, 0],
    async run(_, v) {
      const data = await service(v).request('GET', '/v1/keys');
      return { data, text: data.keys.length ? keyRows(data.keys) : 'no keys' };
    },
  },

  'keys revoke': {
    args: '<id>',
    summary: 'revokes a key (refused everywhere within 10 s) (scope admin)',
    options: { ...SERVICE },
    positionals: [1, 1],
    async run([id], v) {
      const data = await service(v).request('DELETE', `/v1/keys/${encodeURIComponent(id)}`);
      return { data, text: `revoked ${data.revoked?.id ?? id}${data.revoked?.name ? ` (${data.revoked.name})` : ''}` };
    },
  },

  history: {
    args: '<tag>',
    summary: "a tag's allocations, IDs per hour and runway (scope monitor)",
    options: { ...SERVICE, minutes: { type: 'string', help: 'the minutes to cover, 1..=1440 (default 60)' } },
    positionals: [1, 1],
    async run([tag], v) {
      checkTag(tag);
      const q = v.minutes === undefined ? '' : `?minutes=${whole('--minutes', v.minutes)}`;
      const h = await service(v).request('GET', `${tagPath(tag)}/history${q}`);
      const r = h.runway;
      const exhausted = r.exhaustedAtMs === null ? 'never at this rate (no allocation in the last hour)'
        : r.exhaustedAtMs >= 8.64e15 ? 'beyond any date' : iso(r.exhaustedAtMs);
      const busy = h.minutes.filter((m) => m.ids > 0);
      const text = [
        `tag          ${h.bizTag}`,
        `maxId        ${h.maxId} (domain ends at ${h.domainMax})`,
        `step         ${h.step}`,
        `allocations  ${h.allocations} (${h.remembered} remembered)`,
        `IDs/hour     ${r.idsPerHour}`,
        `remaining    ${r.remaining}`,
        `exhausted    ${exhausted}`,
        '',
        busy.length ? table(['minute', 'ids', 'segments', 'largest'], busy.map((m) => [iso(m.minuteMs), m.ids, m.allocations, m.maxStep])) : 'no allocations in the window',
        '',
        h.recent.length ? table(['at', 'start', 'end', 'ids', 'by'], h.recent.slice(0, 20).map((e) => [iso(e.atMs), e.start, e.end, e.ids, e.by])) : 'no allocations remembered',
      ].join('\n');
      return { data: h, text };
    },
  },

  'import-leaf': {
    args: '<file | ->',
    summary: "creates tags from Leaf's leaf_alloc rows (a mysqldump, or a CSV of biz_tag,max_id,step,description), each continuing above Leaf's max_id (scope admin)",
    options: {
      ...SERVICE,
      'dry-run': { type: 'boolean', help: 'show the plan, change nothing (without a URL: parse and plan only)' },
      margin: { type: 'string', help: `IDs to leave above Leaf's max_id (default: 2 × max(step, ${LEAF_MAX_STEP}) per tag; 0 if Leaf's table was frozen before the dump)` },
      step: { type: 'string', help: "the step of the tags it creates (default: each row's; the margin counts Leaf's step either way)" },
      format: { type: 'string', help: 'sql or csv (default: from the file name, else its first line)' },
      table: { type: 'string', help: "the table's name in the dump (default leaf_alloc)" },
      force: { type: 'boolean', help: 'accept a row that leaves a tag past 2^62 (a short runway; refused by default: a bad or hostile dump would exhaust the tag for good)' },
    },
    positionals: [1, 1],
    run: importLeaf,
  },
};

function opaqueOptions() {
  return {
    bits: { type: 'string', help: 'the domain: IDs below 2^bits, 32..=63' },
    digits: { type: 'string', help: 'the domain: IDs of at most this many decimal digits, 6..=18' },
  };
}

/** OpaqueIds under `$EDGELEAF_OPAQUE_KEY` (a secret: never a flag) and the domain named. */
function opaque(v) {
  const key = process.env.EDGELEAF_OPAQUE_KEY;
  if (!key) throw usage('EDGELEAF_OPAQUE_KEY: expected the key (32 hex digits, e.g. from `edgeleaf opaque key`), found none');
  if ((v.bits === undefined) === (v.digits === undefined)) throw usage('expected one of --bits or --digits');
  return new OpaqueIds(v.bits !== undefined ? { key, bits: whole('--bits', v.bits) } : { key, digits: whole('--digits', v.digits) });
}

function keyRows(keys) {
  return table(['id', 'name', 'scopes', 'tags', 'created', 'last used'],
    keys.map((k) => [k.id, k.name, k.scopes.join(','), k.tags, iso(k.createdMs), iso(k.lastUsedMs)]));
}

async function importLeaf([file], v) {
  const format = v.format;
  if (format !== undefined && format !== 'sql' && format !== 'csv') throw usage(`--format: expected sql or csv, found ${JSON.stringify(format)}`);
  let margin;
  if (v.margin !== undefined) {
    if (!/^[0-9]{1,19}$/.test(v.margin)) throw usage(`--margin: expected a whole number of IDs, found ${JSON.stringify(v.margin)}`);
    margin = BigInt(v.margin);
  }
  let input;
  try {
    input = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (e) {
    throw usage(`${file}: cannot read it (${e.code ?? e.message})`);
  }
  const source = file === '-' ? 'stdin' : file;
  const rows = parseLeafRows(input, { format, source, table: v.table });
  const step = whole('--step', v.step);
  for (const r of rows) {
    try { checkTag(r.bizTag, step ?? r.step); } catch (e) {
      e.message = `${source}:${r.line}: ${e.message}${e.code === 'out_of_range' && step === undefined ? ` (Leaf's step, too large for the service: give the new tags another with --step N; the margin still counts Leaf's)` : ''}`;
      throw e;
    }
  }
  const offline = v['dry-run'] && v.url === undefined && !process.env.EDGELEAF_URL;
  const client = offline ? null : service(v);
  // The service's answers name no tag: its errors get the tag's name and line.
  const line = new Map(rows.map((r) => [r.bizTag, r.line]));
  const about = (tag, e) => {
    if (typeof e?.message === 'string') e.message = `${tag} (${source}:${line.get(tag)}): ${e.message}`;
    return e;
  };
  const getTag = async (tag) => {
    if (!client) return undefined;
    try {
      return await client.request('GET', tagPath(tag));
    } catch (e) {
      if (e.code === 'not_found') return null;
      throw about(tag, e);
    }
  };
  let written = 0;
  const putTag = async (tag, body) => {
    try {
      const view = await client.request('PUT', tagPath(tag), body);
      written++;
      return view;
    } catch (e) {
      throw about(tag, e);
    }
  };
  const entries = await plan(rows, { margin, step, getTag, force: Boolean(v.force) });
  const conflicts = entries.filter((e) => e.action === 'conflict');
  let done = entries;
  if (!v['dry-run'] && !conflicts.length) {
    try {
      done = await apply(entries, { putTag });
    } catch (e) {
      e.message += ` (${written} tag${written === 1 ? '' : 's'} written before this; the import is idempotent: run it again once this is mended)`;
      throw e;
    }
  }
  const newMaxId = (e) => e.maxId ?? (e.action === 'unchanged' ? e.serviceMaxId : e.targetMaxId);
  const counts = {};
  for (const e of done) counts[e.action] = (counts[e.action] ?? 0) + 1;
  const data = {
    dryRun: Boolean(v['dry-run']),
    tags: done.map((e) => ({
      tag: e.tag, line: e.line, leafMaxId: e.leafMaxId, step: e.step, description: e.description, margin: e.margin,
      serviceMaxId: e.serviceMaxId, newMaxId: newMaxId(e), action: e.action, ...(e.reason ? { reason: e.reason } : {}),
    })),
    counts,
  };
  const summary = Object.entries(counts).map(([a, n]) => `${n} ${a}`).join(', ');
  const text = [
    table(['tag', 'Leaf max_id', 'step', 'service maxId', 'new maxId', 'action'],
      done.map((e) => [e.tag, e.leafMaxId, e.step, e.serviceMaxId ?? (client ? '—' : '?'), newMaxId(e), e.action])),
    '',
    `${rows.length} tag${rows.length === 1 ? '' : 's'} from ${source}: ${summary}${v['dry-run'] ? ' (dry run: nothing changed)' : ''}`,
    ...(offline ? ['(the service was not asked: no --url or EDGELEAF_URL)'] : []),
  ].join('\n');
  if (conflicts.length) {
    const err = codedError('import_conflict', `nothing changed: ${conflicts.map((c) => c.reason).join('; ')}`);
    err.output = { data, text };
    throw err;
  }
  return { data, text };
}

// ------------------------------------------------------------ help

function commandHelp(name) {
  const c = COMMANDS[name];
  const opts = { ...c.options, ...COMMON };
  const lines = Object.entries(opts).map(([k, o]) => [`${o.short && o.short !== k ? `-${o.short}, ` : ''}${k.length === 1 ? `-${k}` : `--${k}`}${o.type === 'string' ? ' <value>' : ''}`, o.help]);
  const env = Object.hasOwn(c.options, 'url')
    ? '\n\nEnvironment: EDGELEAF_URL (the service, if no --url), EDGELEAF_TOKEN (the bearer token: an API key or the admin token; never a flag)'
    : name.startsWith('opaque ') && name !== 'opaque key' ? '\n\nEnvironment: EDGELEAF_OPAQUE_KEY (the key, 32 hex digits; never a flag)' : '';
  return `usage: edgeleaf ${name}${c.args ? ` ${c.args}` : ''} [options]\n\n${c.summary}\n\n${table(['options', ''], lines).split('\n').slice(1).map((l) => `  ${l}`).join('\n')}${env}\n\n${EXITS}`;
}

const EXITS = 'Exit codes: 0 done, 1 a bug, 2 bad usage or input, 3 refused by the service (4xx) or an import conflict, 4 the service unavailable (5xx, no answer).';

function mainHelp(prefix = '') {
  const rows = Object.entries(COMMANDS).filter(([n]) => n.startsWith(prefix)).map(([n, c]) => [`${n}${c.args ? ` ${c.args}` : ''}`, c.summary]);
  return `usage: edgeleaf <command> [options]   (edgeleaf <command> --help for its options)\n\n${table(['commands', ''], rows).split('\n').slice(1).map((l) => `  ${l}`).join('\n')}\n\nEvery command takes --json (JSON on stdout for scripts; errors stay on stderr as {"error":{"code","message"}}).\nService commands: --url or EDGELEAF_URL; the token only from EDGELEAF_TOKEN.\n${EXITS}`;
}

// ------------------------------------------------------------ main

/** The exit code of an error. */
export function exitCode(e) {
  if (e?.code === 'service_unreachable' || e?.code === 'registry_unreachable') return EXIT.unavailable;
  if (typeof e?.status === 'number') return e.status >= 500 ? EXIT.unavailable : EXIT.refused;
  if (e?.code === 'import_conflict') return EXIT.refused;
  if (e?.code === 'internal') return EXIT.bug;
  if (typeof e?.code === 'string' && !e.code.startsWith('ERR_')) return EXIT.usage;
  if (typeof e?.code === 'string' && e.code.startsWith('ERR_PARSE_ARGS')) return EXIT.usage;
  return EXIT.bug;
}

/** Runs `argv` (without `node` and the script); resolves `{ code, stdout, stderr }`. */
export async function main(argv) {
  const json = argv.includes('--json');
  const out = [];
  const err = [];
  try {
    if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || (argv[0] === 'help' && argv.length === 1)) {
      out.push(mainHelp());
      return { code: argv.length === 0 ? EXIT.usage : EXIT.ok, stdout: out.join('\n'), stderr: '' };
    }
    if (argv[0] === '--version') {
      const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
      return { code: EXIT.ok, stdout: pkg.version, stderr: '' };
    }
    let rest = argv;
    let name = argv[0];
    if (name === 'help') rest = [...argv.slice(1), '--help'];
    name = rest[0];
    if (!COMMANDS[name] && COMMANDS[`${rest[0]} ${rest[1]}`]) name = `${rest[0]} ${rest[1]}`;
    const cmd = COMMANDS[name];
    if (!cmd) {
      const groups = Object.keys(COMMANDS).filter((n) => n.startsWith(`${rest[0]} `)).map((n) => n.split(' ')[1]);
      if (groups.length && (rest[1] === '--help' || rest[1] === '-h')) {
        return { code: EXIT.ok, stdout: mainHelp(`${rest[0]} `), stderr: '' };
      }
      throw usage(groups.length
        ? `${rest[0]}: expected one of ${groups.join(', ')}, found ${rest[1] === undefined ? 'none' : JSON.stringify(rest[1])}`
        : `expected a command (${Object.keys(COMMANDS).filter((n) => !n.includes(' ')).concat(['opaque', 'tag', 'keys']).join(', ')}), found ${JSON.stringify(rest[0])}`);
    }
    const { values, positionals } = parseArgs({
      args: rest.slice(name.split(' ').length),
      options: Object.fromEntries(Object.entries({ ...cmd.options, ...COMMON }).map(([k, o]) => [k, { type: o.type, ...(o.short ? { short: o.short } : {}) }])),
      allowPositionals: true,
      strict: true,
    });
    if (values.help) return { code: EXIT.ok, stdout: commandHelp(name), stderr: '' };
    const [min, max] = cmd.positionals;
    if (positionals.length < min || positionals.length > max) {
      throw usage(`usage: edgeleaf ${name}${cmd.args ? ` ${cmd.args}` : ''}: expected ${min === max ? min : `${min}..${max}`} argument${max === 1 ? '' : 's'}, found ${positionals.length}`);
    }
    const { data, text } = await cmd.run(positionals, values);
    return { code: EXIT.ok, stdout: json ? toJson(data) : text, stderr: '' };
  } catch (e) {
    const code = exitCode(e);
    if (e?.output) out.push(json ? toJson(e.output.data) : e.output.text);
    const errCode = typeof e?.code === 'string' ? (e.code.startsWith('ERR_PARSE_ARGS') ? 'invalid_argument' : e.code) : 'internal';
    // A dump's or a service's words may hold control characters: shown
    // escaped, never as terminal commands.
    const message = printable(e?.message ?? String(e));
    if (code === EXIT.bug) err.push(`${errCode}: ${e?.stack ?? message}`);
    else if (json) err.push(JSON.stringify({ error: { code: errCode, message, ...(e.status ? { status: e.status } : {}) } }));
    else err.push(`${errCode}: ${message}${code === EXIT.usage ? '\n(edgeleaf --help for the commands, edgeleaf <command> --help for one)' : ''}`);
    return { code, stdout: out.join('\n'), stderr: err.join('\n') };
  }
}

// Run as a program (`npx edgeleaf`, `node cli/edgeleaf.mjs`), not when imported.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { code, stdout, stderr } = await main(process.argv.slice(2));
  if (stdout) process.stdout.write(`${stdout}\n`);
  if (stderr) process.stderr.write(`${stderr}\n`);
  process.exitCode = code;
}
