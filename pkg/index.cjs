// Node, `require`: the nodejs build of the wasm and the CommonJS copy of api.mjs
// (api.cjs, made by `make pkg`).
'use strict';
const wasm = require('./node/edgeleaf.js');
const { makeApi } = require('./api.cjs');

module.exports = makeApi(wasm);
