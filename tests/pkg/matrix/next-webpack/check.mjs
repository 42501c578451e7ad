// The Next.js app of next-turbopack/, built with `next build --webpack`
// (the same checks: next-turbopack/check.mjs).
import { checkNext } from '../next-turbopack/check.mjs';

export const tool = 'next';
export default (h) => checkNext(h, { webpack: true });
