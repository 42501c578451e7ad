// Raw DEFLATE (RFC 1951) decoding, synchronous, in plain JS. The default
// entry carries the .wasm in its JS, deflated then base64-encoded
// (web/edgeleaf_inline.js, made by `make pkg`): 40 KB gzipped where plain
// base64 costs 53 KB. Browsers decompress only asynchronously
// (DecompressionStream), and the entry must be ready at import, without
// top-level await: hence this decoder (RFC 1951; table-driven Huffman decoding). The input
// is the package's own, checked at build time to decode to the .wasm byte
// for byte; a corrupt input throws.

const MAXBITS = 15;
// Lengths 257..285 and distances 0..29: base values and extra bits.
const LEN_BASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LEN_EXTRA = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DIST_BASE = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073,
  4097, 6145, 8193, 12289, 16385, 24577];
const DIST_EXTRA = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];
// The order code-length code lengths come in (dynamic blocks).
const CLEN_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

const corrupt = (what) => new Error(`edgeleaf: the inlined wasm is corrupt (${what})`);

/**
 * A canonical Huffman code from its code lengths, as a lookup table indexed by
 * the next `bits` input bits (first bit lowest): entry = symbol << 4 | length.
 */
function huffman(lengths) {
  const n = lengths.length;
  const count = new Uint16Array(MAXBITS + 1);
  let bits = 1;
  for (let sym = 0; sym < n; sym++) {
    const l = lengths[sym];
    count[l]++;
    if (l > bits) bits = l;
  }
  count[0] = 0;
  // The first code of each length (RFC 1951, 3.2.2).
  const next = new Uint16Array(MAXBITS + 2);
  for (let len = 1, code = 0; len <= MAXBITS; len++) {
    code = (code + count[len - 1]) << 1;
    next[len] = code;
  }
  const size = 1 << bits;
  const table = new Uint16Array(size); // 0: no such code
  for (let sym = 0; sym < n; sym++) {
    const len = lengths[sym];
    if (len === 0) continue;
    const code = next[len]++;
    if (code >= 1 << len) throw corrupt('over-subscribed code');
    let rev = 0; // the code's bits, first bit lowest
    for (let i = 0; i < len; i++) rev |= ((code >>> i) & 1) << (len - 1 - i);
    const entry = (sym << 4) | len;
    for (let i = rev, step = 1 << len; i < size; i += step) table[i] = entry;
  }
  return { table, bits, mask: size - 1 };
}

let fixed;
function fixedCodes() {
  if (!fixed) {
    const lit = new Uint8Array(288);
    lit.fill(8, 0, 144).fill(9, 144, 256).fill(7, 256, 280).fill(8, 280, 288);
    fixed = [huffman(lit), huffman(new Uint8Array(30).fill(5))];
  }
  return fixed;
}

/** The input as a bit stream, first bit lowest (block headers and code lengths). */
class Bits {
  constructor(src) {
    this.src = src;
    this.at = 0; // next input byte
    this.buf = 0; // bits read ahead, not yet used
    this.cnt = 0; // how many
  }

  take(n) {
    let v = this.buf;
    while (this.cnt < n) {
      if (this.at >= this.src.length) throw corrupt('input ends early');
      v |= this.src[this.at++] << this.cnt;
      this.cnt += 8;
    }
    this.buf = v >>> n;
    this.cnt -= n;
    return v & ((1 << n) - 1);
  }

  decode({ table, bits, mask }) {
    // Peek `bits` bits (zeros past the end: a code there must be shorter).
    while (this.cnt < bits && this.at < this.src.length) {
      this.buf |= this.src[this.at++] << this.cnt;
      this.cnt += 8;
    }
    const e = table[this.buf & mask];
    const len = e & 15;
    if (len === 0 || len > this.cnt) throw corrupt('no such code');
    this.buf >>>= len;
    this.cnt -= len;
    return e >>> 4;
  }
}

/** A dynamic block's two codes, from its header. */
function dynamicCodes(bits) {
  const nlen = bits.take(5) + 257;
  const ndist = bits.take(5) + 1;
  const ncode = bits.take(4) + 4;
  const lengths = new Uint8Array(19);
  for (let i = 0; i < ncode; i++) lengths[CLEN_ORDER[i]] = bits.take(3);
  const lencode = huffman(lengths);
  const all = new Uint8Array(nlen + ndist);
  for (let i = 0; i < nlen + ndist;) {
    const sym = bits.decode(lencode);
    if (sym < 16) {
      all[i++] = sym;
      continue;
    }
    let len = 0;
    let n;
    if (sym === 16) {
      if (i === 0) throw corrupt('repeat with no length');
      len = all[i - 1];
      n = 3 + bits.take(2);
    } else {
      n = sym === 17 ? 3 + bits.take(3) : 11 + bits.take(7);
    }
    if (i + n > nlen + ndist) throw corrupt('too many lengths');
    all.fill(len, i, i + n);
    i += n;
  }
  return [huffman(all.subarray(0, nlen)), huffman(all.subarray(nlen))];
}

/**
 * A block's compressed data, up to its end code, into `out` from `put`;
 * returns the new `put`. The hot loop: the bit state lives in locals here.
 */
function inflateBlock(bits, out, put, lit, dist) {
  const { src } = bits;
  const end = src.length;
  const size = out.length;
  const { table: lt, bits: lb, mask: lm } = lit;
  const { table: dt, bits: db, mask: dm } = dist;
  let { at, buf, cnt } = bits;
  for (;;) {
    while (cnt < lb && at < end) { buf |= src[at++] << cnt; cnt += 8; }
    let e = lt[buf & lm];
    let l = e & 15;
    if (l === 0 || l > cnt) throw corrupt('no such code');
    buf >>>= l;
    cnt -= l;
    let sym = e >>> 4;
    if (sym < 256) {
      if (put >= size) throw corrupt('output too long');
      out[put++] = sym;
      continue;
    }
    if (sym === 256) break;
    sym -= 257;
    if (sym >= 29) throw corrupt('bad length');
    // Extra bits: at most 13, and 5 + 15 + 13 + 8 fit in 32.
    while (cnt < 5 && at < end) { buf |= src[at++] << cnt; cnt += 8; }
    let x = LEN_EXTRA[sym];
    if (cnt < x) throw corrupt('input ends early');
    const len = LEN_BASE[sym] + (buf & ((1 << x) - 1));
    buf >>>= x;
    cnt -= x;
    while (cnt < db && at < end) { buf |= src[at++] << cnt; cnt += 8; }
    e = dt[buf & dm];
    l = e & 15;
    if (l === 0 || l > cnt) throw corrupt('no such code');
    buf >>>= l;
    cnt -= l;
    const d = e >>> 4;
    if (d >= 30) throw corrupt('bad distance');
    x = DIST_EXTRA[d];
    while (cnt < x && at < end) { buf |= src[at++] << cnt; cnt += 8; }
    if (cnt < x) throw corrupt('input ends early');
    const back = DIST_BASE[d] + (buf & ((1 << x) - 1));
    buf >>>= x;
    cnt -= x;
    if (back > put || put + len > size) throw corrupt('distance or length out of range');
    if (back >= len) {
      out.copyWithin(put, put - back, put - back + len);
      put += len;
    } else {
      for (let i = 0; i < len; i++, put++) out[put] = out[put - back]; // overlapping: a run
    }
  }
  Object.assign(bits, { at, buf, cnt });
  return put;
}

/** Decodes raw DEFLATE `src` (a Uint8Array) into `size` bytes. */
export function inflateRaw(src, size) {
  const out = new Uint8Array(size);
  const bits = new Bits(src);
  let put = 0;
  let last;
  do {
    last = bits.take(1);
    const type = bits.take(2);
    if (type === 0) {
      // Stored: byte-aligned LEN, NLEN, then LEN bytes as they are. Whole
      // bytes already read ahead into the bit buffer go back to the input.
      bits.at -= bits.cnt >> 3;
      bits.buf = 0;
      bits.cnt = 0;
      const { at } = bits;
      if (at + 4 > src.length) throw corrupt('input ends early');
      const len = src[at] | (src[at + 1] << 8);
      if ((len ^ (src[at + 2] | (src[at + 3] << 8))) !== 0xffff) throw corrupt('stored length');
      if (at + 4 + len > src.length || put + len > size) throw corrupt('stored block out of range');
      out.set(src.subarray(at + 4, at + 4 + len), put);
      bits.at = at + 4 + len;
      put += len;
    } else if (type === 1) {
      put = inflateBlock(bits, out, put, ...fixedCodes());
    } else if (type === 2) {
      put = inflateBlock(bits, out, put, ...dynamicCodes(bits));
    } else {
      throw corrupt('block type 3');
    }
  } while (!last);
  if (put !== size) throw corrupt(`${put} bytes, expected ${size}`);
  return out;
}

/** Bytes from base64 (atob: every runtime the package supports has it). */
export function fromBase64(text) {
  const s = atob(text);
  const b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  return b;
}
