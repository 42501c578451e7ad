// Waiting without busy-waiting: the core says how long, a timer waits.

/** Resolves after `delay` ms. */
export const sleep = (delay) => new Promise((resolve) => setTimeout(resolve, delay));
