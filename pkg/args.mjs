// The argument checks only JS can make (BigInt IDs, counts, the JS-only
// APIs' options). Options objects of the wasm classes are checked once, in
// the bindings (pkg/wasm/).

import { codedError, describe } from './errors.mjs';

const MAX_ID = (1n << 63n) - 1n;
/** Most IDs one call (`nextIds`, `nextIdsAsync`, `next` of a segment) returns. */
export const MAX_IDS_PER_CALL = 1_000_000;

/** An options object of the JS-only APIs (the client), `{}` when absent. */
export function options(what, value, example) {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw codedError('invalid_option', `${what}: expected an object such as ${example}, found ${describe(value)}`);
  }
  return value;
}

/** A function-valued option of the JS-only APIs. */
export function fn(what, value) {
  if (typeof value !== 'function') {
    throw codedError('invalid_option', `${what}: expected a function, found ${describe(value)}`);
  }
  return value;
}

/** An ID from a bigint, a safe integer or a decimal string, checked to be 0..2^63-1. */
export function toId(value, what = 'id') {
  let id;
  if (typeof value === 'bigint') id = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) id = BigInt(value);
  else if (typeof value === 'string' && /^[0-9]{1,19}$/.test(value)) id = BigInt(value);
  if (id === undefined || id < 0n || id > MAX_ID) {
    throw codedError('invalid_id', `${what}: expected a bigint or decimal string in 0..=${MAX_ID}, found ${describe(value)}`);
  }
  return id;
}

/** How many IDs one call asks for, 1..=MAX_IDS_PER_CALL. */
export function count(n) {
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_IDS_PER_CALL) {
    throw codedError('out_of_range', `count: expected 1..=${MAX_IDS_PER_CALL}, found ${describe(n)}`);
  }
  return n;
}
