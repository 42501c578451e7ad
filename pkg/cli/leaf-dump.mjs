// Reads Leaf's `leaf_alloc` rows from a `mysqldump` of the table (or of the
// whole database) or from a CSV of `biz_tag,max_id,step,description`.
// Parsing only: each row comes out with the line it was read from; what a
// valid tag is, and what the service accepts, is decided elsewhere (the core,
// the service). Anything this cannot read is refused with its line, never
// skipped: a row left out would be a tag whose IDs start again at 1.

/** Leaf's columns, in the order of its `CREATE TABLE` (when the dump has none). */
export const LEAF_COLUMNS = ['biz_tag', 'max_id', 'step', 'description', 'update_time'];

const MAX_ID = (1n << 63n) - 1n;

/** An error of the input, at a line: `invalid_dump`, `<source>:<line>: …`. */
function dumpError(source, line, message) {
  const err = new Error(`${source}:${line}: ${message}`);
  err.code = 'invalid_dump';
  err.line = line;
  return err;
}

/** `sql` or `csv`, from the file's name, else from how it begins. */
export function detectFormat(text, name = '') {
  if (/\.csv$/i.test(name)) return 'csv';
  if (/\.sql$/i.test(name)) return 'sql';
  const head = text.replace(/^\uFEFF/, '').trimStart();
  return /^(--|#|\/\*|(insert|replace|create|drop|set|lock|use|delimiter)\b)/i.test(head) ? 'sql' : 'csv';
}

/**
 * The rows of `text`: `[{ bizTag, maxId (bigint), step (number), description, line }]`.
 * `format`: `sql` or `csv` (default: detected); `table`: the table's name in a dump.
 */
export function parseLeafRows(text, { format, source = 'input', table = 'leaf_alloc' } = {}) {
  const fmt = format ?? detectFormat(text, source);
  const rows = fmt === 'csv' ? csvRows(text, source) : sqlRows(text, source, table);
  if (rows.length === 0) {
    throw dumpError(source, 1, fmt === 'csv'
      ? 'no rows: expected biz_tag,max_id,step[,description] lines'
      : `no rows of \`${table}\`: expected INSERT INTO \`${table}\` VALUES (...) statements (mysqldump of the table)`);
  }
  const seen = new Map();
  for (const r of rows) {
    if (seen.has(r.bizTag)) throw dumpError(source, r.line, `biz_tag ${JSON.stringify(r.bizTag)} twice (first at line ${seen.get(r.bizTag)}); Leaf's biz_tag is the table's primary key`);
    seen.set(r.bizTag, r.line);
  }
  return rows;
}

// One row from its named values, checked for what any row must have.
function row(source, line, get) {
  const tag = get('biz_tag');
  if (typeof tag !== 'string') throw dumpError(source, line, `biz_tag: expected a string, found ${show(tag)}`);
  const maxId = integer(source, line, 'max_id', get('max_id'));
  if (maxId > MAX_ID) throw dumpError(source, line, `max_id: expected 0..=${MAX_ID}, found ${maxId}`);
  const step = integer(source, line, 'step', get('step'));
  if (step < 1n || step > BigInt(Number.MAX_SAFE_INTEGER)) throw dumpError(source, line, `step: expected a positive integer, found ${step}`);
  const description = get('description');
  if (description !== null && description !== undefined && typeof description !== 'string') {
    throw dumpError(source, line, `description: expected a string or NULL, found ${show(description)}`);
  }
  return { bizTag: tag, maxId, step: Number(step), description: description ?? '', line };
}

function integer(source, line, what, v) {
  const s = typeof v === 'object' && v !== null ? v.number : v;
  if (typeof s !== 'string' || !/^[0-9]{1,20}$/.test(s)) throw dumpError(source, line, `${what}: expected a whole number, found ${show(v)}`);
  return BigInt(s);
}

function show(v) {
  if (v === null) return 'NULL';
  if (v === undefined) return 'nothing';
  if (typeof v === 'object') return v.number;
  return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
}

// ---------------------------------------------------------------- SQL

// MySQL's backslash escapes, as mysqldump writes them (others stand for the
// character itself; `\%` and `\_` keep their backslash).
const ESCAPES = { 0: '\0', b: '\b', n: '\n', r: '\r', t: '\t', Z: '\x1a', '%': '\\%', _: '\\_' };

/**
 * The statements of a dump as token lists. Tokens: `{ t: 'word' | 'ident' |
 * 'string' | 'number' | 'punct', v, line }`. Comments (`-- `, `#`, `/* *\/`,
 * and the `/*!40101 … *\/` ones mysqldump writes) are skipped; `DELIMITER`
 * lines change the statement delimiter as the mysql client does.
 */
function statements(text, source) {
  const out = [];
  let cur = [];
  let delimiter = ';';
  let line = 1;
  let i = 0;
  const n = text.length;
  const end = () => { if (cur.length) out.push(cur); cur = []; };
  if (text.charCodeAt(0) === 0xfeff) i = 1;
  while (i < n) {
    const c = text[i];
    if (c === '\n') { line++; i++; continue; }
    if (c === ' ' || c === '\t' || c === '\r' || c === '\f') { i++; continue; }
    // `DELIMITER x` is the client's, at the start of a statement.
    if (cur.length === 0 && /^delimiter[ \t]/i.test(text.slice(i, i + 10))) {
      const eol = text.indexOf('\n', i);
      const m = /^delimiter[ \t]+(\S+)/i.exec(text.slice(i, eol < 0 ? n : eol));
      if (!m) throw dumpError(source, line, 'DELIMITER: expected a delimiter after it');
      delimiter = m[1];
      i = eol < 0 ? n : eol;
      continue;
    }
    if (text.startsWith(delimiter, i)) { end(); i += delimiter.length; continue; }
    if (c === '#' || (c === '-' && text[i + 1] === '-' && /[ \t\r\n]/.test(text[i + 2] ?? '\n'))) {
      const eol = text.indexOf('\n', i);
      i = eol < 0 ? n : eol;
      continue;
    }
    if (c === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      if (close < 0) throw dumpError(source, line, 'a /* comment that never ends');
      for (let k = i; k < close; k++) if (text[k] === '\n') line++;
      i = close + 2;
      continue;
    }
    if (c === "'" || c === '"' || c === '`') {
      const start = line;
      let v = '';
      let k = i + 1;
      for (;;) {
        if (k >= n) throw dumpError(source, start, `a ${c === '`' ? 'quoted name' : 'string'} that never ends (opened here)`);
        const d = text[k];
        if (d === c) {
          if (text[k + 1] === c) { v += c; k += 2; continue; } // '' inside '…'
          k++;
          break;
        }
        if (d === '\\' && c !== '`') {
          const e = text[k + 1];
          if (e === undefined) throw dumpError(source, start, 'a string that never ends (opened here)');
          if (e === '\n') line++;
          v += ESCAPES[e] ?? e;
          k += 2;
          continue;
        }
        if (d === '\n') line++;
        v += d;
        k++;
      }
      cur.push({ t: c === '`' ? 'ident' : 'string', v, line: start });
      i = k;
      continue;
    }
    const num = /^(?:0x[0-9a-f]+|[0-9]+(?:\.[0-9]*)?(?:e[+-]?[0-9]+)?|\.[0-9]+(?:e[+-]?[0-9]+)?)/i.exec(text.slice(i, i + 64));
    if (num) {
      cur.push({ t: 'number', v: num[0], line });
      i += num[0].length;
      continue;
    }
    const word = /^[A-Za-z_$@][A-Za-z0-9_$@]*/.exec(text.slice(i, i + 256));
    if (word) {
      const w = word[0];
      // X'…' / b'…' literals and _charset'…' introducers: one string token.
      if (text[i + w.length] === "'" && /^(x|_[a-z0-9]+)$/i.test(w)) {
        cur.push({ t: w.toLowerCase() === 'x' ? 'hexprefix' : 'introducer', v: w, line });
      } else {
        cur.push({ t: 'word', v: w, line });
      }
      i += w.length;
      continue;
    }
    cur.push({ t: 'punct', v: c, line });
    i++;
  }
  end();
  return out;
}

const isWord = (tok, ...words) => tok?.t === 'word' && words.includes(tok.v.toUpperCase());

// A table name (`t`, `db`.`t`) at `k`: [name, next index].
function tableName(toks, k) {
  const name = (tok) => (tok?.t === 'ident' || tok?.t === 'word' ? tok.v : undefined);
  let last = name(toks[k]);
  if (last === undefined) return [undefined, k];
  k++;
  while (toks[k]?.t === 'punct' && toks[k].v === '.' && name(toks[k + 1]) !== undefined) {
    last = name(toks[k + 1]);
    k += 2;
  }
  return [last, k];
}

function sqlRows(text, source, table) {
  const want = table.toLowerCase();
  let columns;
  const rows = [];
  for (const toks of statements(text, source)) {
    const first = toks[0];
    if (isWord(first, 'CREATE')) {
      let k = 1;
      if (isWord(toks[k], 'TEMPORARY')) k++;
      if (!isWord(toks[k], 'TABLE')) continue;
      k++;
      if (isWord(toks[k], 'IF') && isWord(toks[k + 1], 'NOT') && isWord(toks[k + 2], 'EXISTS')) k += 3;
      const [name, after] = tableName(toks, k);
      if (name?.toLowerCase() !== want) continue;
      columns = createColumns(toks, after, source);
    } else if (isWord(first, 'INSERT', 'REPLACE')) {
      let k = 1;
      while (isWord(toks[k], 'LOW_PRIORITY', 'DELAYED', 'HIGH_PRIORITY', 'IGNORE')) k++;
      if (isWord(toks[k], 'INTO')) k++;
      const [name, after] = tableName(toks, k);
      if (name === undefined) throw dumpError(source, first.line, `${first.v.toUpperCase()}: expected a table name after it`);
      if (name.toLowerCase() !== want) continue;
      insertRows(toks, after, columns, source, rows);
    }
  }
  return rows;
}

// The column names of `CREATE TABLE name ( … )`, in order.
function createColumns(toks, k, source) {
  const open = toks[k];
  if (open?.t !== 'punct' || open.v !== '(') throw dumpError(source, open?.line ?? toks[0].line, 'CREATE TABLE: expected ( after the name');
  const cols = [];
  let depth = 0;
  let atItem = true;
  for (k++; k < toks.length; k++) {
    const tok = toks[k];
    if (tok.t === 'punct' && tok.v === '(') depth++;
    else if (tok.t === 'punct' && tok.v === ')') {
      if (depth === 0) return cols;
      depth--;
    } else if (tok.t === 'punct' && tok.v === ',' && depth === 0) {
      atItem = true;
      continue;
    } else if (atItem && (tok.t === 'ident' || tok.t === 'word')
      && !isWord(tok, 'PRIMARY', 'KEY', 'UNIQUE', 'INDEX', 'CONSTRAINT', 'FOREIGN', 'FULLTEXT', 'SPATIAL', 'CHECK')) {
      cols.push(tok.v.toLowerCase());
    }
    atItem = false;
  }
  throw dumpError(source, toks[toks.length - 1].line, 'CREATE TABLE: expected ) to close the column list');
}

// `[(col, …)] VALUES (…), (…) [ON DUPLICATE KEY UPDATE …]`.
function insertRows(toks, k, tableColumns, source, rows) {
  const at = (i) => toks[i] ?? { t: 'end', v: 'the end of the statement', line: toks[toks.length - 1].line };
  const expect = (i, v) => {
    const tok = at(i);
    if (tok.t !== 'punct' || tok.v !== v) throw dumpError(source, tok.line, `INSERT: expected ${v}, found ${tok.t === 'end' ? tok.v : JSON.stringify(tok.v)}`);
  };
  let columns = tableColumns ?? LEAF_COLUMNS;
  let named = tableColumns !== undefined;
  if (at(k).t === 'punct' && at(k).v === '(') {
    columns = [];
    for (k++; ; k += 2) {
      const tok = at(k);
      if (tok.t !== 'ident' && tok.t !== 'word') throw dumpError(source, tok.line, `INSERT: expected a column name, found ${JSON.stringify(tok.v)}`);
      columns.push(tok.v.toLowerCase());
      if (at(k + 1).t === 'punct' && at(k + 1).v === ')') { k += 2; break; }
      expect(k + 1, ',');
    }
    named = true;
  }
  for (const c of ['biz_tag', 'max_id', 'step']) {
    if (!columns.includes(c)) throw dumpError(source, toks[0].line, `INSERT: expected a ${c} column, found only ${columns.join(', ')}`);
  }
  if (!isWord(at(k), 'VALUES', 'VALUE')) throw dumpError(source, at(k).line, `INSERT: expected VALUES, found ${JSON.stringify(at(k).v)}`);
  k++;
  for (;;) {
    expect(k, '(');
    const line = at(k).line;
    const values = [];
    k++;
    for (;;) {
      const [v, next] = value(toks, k, source, at);
      values.push(v);
      k = next;
      if (at(k).t === 'punct' && at(k).v === ')') { k++; break; }
      expect(k, ',');
      k++;
    }
    if (values.length !== columns.length) {
      throw dumpError(source, line, `INSERT: expected ${columns.length} values (${columns.join(', ')})${named ? '' : ', Leaf\'s columns: the dump has no CREATE TABLE'}, found ${values.length}`);
    }
    rows.push(row(source, line, (c) => values[columns.indexOf(c)]));
    if (at(k).t === 'punct' && at(k).v === ',') { k++; continue; }
    if (k >= toks.length || isWord(at(k), 'ON')) return;
    throw dumpError(source, at(k).line, `INSERT: expected , or the end of the statement, found ${JSON.stringify(at(k).v)}`);
  }
}

// One value of a row: a string, NULL, a number (as `{ number }`), or an
// expression mysqldump does not write (refused).
function value(toks, k, source, at) {
  let tok = at(k);
  if (tok.t === 'introducer') tok = at(++k); // _utf8mb4'…'
  if (tok.t === 'string') return [tok.v, k + 1];
  if (tok.t === 'hexprefix') {
    const s = at(k + 1);
    return [hexString(s.v, source, s.line), k + 2];
  }
  if (isWord(tok, 'NULL')) return [null, k + 1];
  if (tok.t === 'number') {
    if (/^0x/i.test(tok.v)) return [hexString(tok.v.slice(2), source, tok.line), k + 1];
    return [{ number: tok.v }, k + 1];
  }
  if (tok.t === 'punct' && (tok.v === '-' || tok.v === '+') && at(k + 1).t === 'number') {
    return [{ number: tok.v + at(k + 1).v }, k + 2];
  }
  throw dumpError(source, tok.line, `INSERT: expected a value (a string, a number or NULL), found ${tok.t === 'end' ? tok.v : JSON.stringify(tok.v)}`);
}

function hexString(hex, source, line) {
  if (hex.length % 2 !== 0 || !/^[0-9a-f]*$/i.test(hex)) throw dumpError(source, line, `a hex literal with an odd or bad digit: ${hex}`);
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return new TextDecoder().decode(bytes);
}

// ---------------------------------------------------------------- CSV

// RFC 4180 records, each with the line it starts on: fields separated by
// commas, optionally in double quotes ("" inside is one "), which may hold
// commas and line breaks.
function csvRecords(text, source) {
  const records = [];
  let fields = [];
  let field = '';
  // Whether `field` is only whitespace so far (kept as a flag: testing
  // `field.trim()` at every quote made a hostile line quadratic).
  let blank = true;
  let quoted = false;
  let line = 1;
  let start = 1;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  const endRecord = () => {
    fields.push({ v: field, quoted });
    if (!(fields.length === 1 && fields[0].v.trim() === '' && !fields[0].quoted)) records.push({ fields, line: start });
    fields = [];
    field = '';
    blank = true;
    quoted = false;
  };
  while (i < text.length) {
    const c = text[i];
    if (c === '"' && blank && !quoted) {
      const open = line;
      let k = i + 1;
      field = '';
      for (;;) {
        if (k >= text.length) throw dumpError(source, open, 'a quoted field that never ends (opened here)');
        if (text[k] === '"') {
          if (text[k + 1] === '"') { field += '"'; k += 2; continue; }
          k++;
          break;
        }
        if (text[k] === '\n') line++;
        field += text[k++];
      }
      quoted = true;
      blank = false;
      i = k;
      while (text[i] === ' ' || text[i] === '\t') i++;
      if (i < text.length && text[i] !== ',' && text[i] !== '\n' && text[i] !== '\r') {
        throw dumpError(source, line, `expected , or the end of the line after a quoted field, found ${JSON.stringify(text[i])}`);
      }
      continue;
    }
    if (c === ',') { fields.push({ v: field, quoted }); field = ''; blank = true; quoted = false; i++; continue; }
    if (c === '\r' && text[i + 1] === '\n') { i++; continue; }
    if (c === '\n') { endRecord(); line++; start = line; i++; continue; }
    field += c;
    blank &&= /\s/.test(c);
    i++;
  }
  if (field !== '' || quoted || fields.length) endRecord();
  return records;
}

function csvRows(text, source) {
  const records = csvRecords(text, source);
  let columns = ['biz_tag', 'max_id', 'step', 'description'];
  let from = 0;
  const head = records[0]?.fields.map((f) => f.v.trim().toLowerCase());
  // A header names biz_tag first (a row would hold a number in its second field).
  if (head && head[0] === 'biz_tag' && !/^[0-9]+$/.test(head[1] ?? '')) {
    columns = head;
    from = 1;
    for (const c of ['biz_tag', 'max_id', 'step']) {
      if (!columns.includes(c)) throw dumpError(source, records[0].line, `header: expected a ${c} column, found ${head.join(',')}`);
    }
  }
  const rows = [];
  for (const rec of records.slice(from)) {
    const need = from === 1 ? columns.length : 3;
    if (rec.fields.length < need) {
      throw dumpError(source, rec.line, `expected ${from === 1 ? columns.length : 'at least 3'} fields (${columns.join(',')}), found ${rec.fields.length}`);
    }
    rows.push(row(source, rec.line, (c) => {
      const f = rec.fields[columns.indexOf(c)];
      if (f === undefined) return undefined;
      if (!f.quoted && (f.v === '\\N' || (c === 'description' && f.v === ''))) return null;
      return c === 'max_id' || c === 'step' ? f.v.trim() : (f.quoted ? f.v : f.v.trim());
    }));
  }
  return rows;
}
