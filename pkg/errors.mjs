// Coded errors and the argument checks that only JS can make (BigInt IDs,
// counts). Options objects are checked once, in the wasm bindings.

const MAX_ID = (1n << 63n) - 1n;
/** Most IDs one batch call returns. */
export const MAX_BATCH = 1_000_000;

/** An `Error` with a machine-readable `code` (and extra fields). */
export function codedError(code, message, fields) {
  const err = new Error(message);
  err.code = code;
  if (fields) Object.assign(err, fields);
  return err;
}

/** How a value reads in a message. */
export function describe(value) {
  if (value === null) return 'null';
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

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

/** A batch size, 1..=MAX_BATCH. */
export function count(n) {
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_BATCH) {
    throw codedError('out_of_range', `count: expected 1..=${MAX_BATCH}, found ${describe(n)}`);
  }
  return n;
}

export const sleep = (delay) => new Promise((resolve) => setTimeout(resolve, delay));
