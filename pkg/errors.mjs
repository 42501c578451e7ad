// Coded errors: every error the package throws is an `Error` with a
// machine-readable `code` from the one list (src/code.rs; pkg/index.d.ts,
// ErrorCode).

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
