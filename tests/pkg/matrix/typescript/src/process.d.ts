// The one Node global these examples read (no @types/node needed).
declare const process: { argv: string[] };
