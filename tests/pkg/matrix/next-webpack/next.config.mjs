// Only the workspace root: this app sits inside the edgeleaf repository, whose
// own package-lock.json Next would otherwise take for the root (and warn).
const root = import.meta.dirname;

export default { turbopack: { root }, outputFileTracingRoot: root };
