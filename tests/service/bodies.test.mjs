// Request bodies are read up to their limit and no further (the real Worker
// in workerd, over HTTP on 127.0.0.1). A chunked body (no Content-Length)
// larger than MAX_BODY_BYTES = 4096 is refused with 413 body_too_large as
// soon as its first 4 KB have arrived: the answer comes while the client is
// still sending, after a few chunks of a body that would go on for a
// megabyte — the Worker never waited for (or read) the rest. A declared
// Content-Length past the limit is refused on the header alone (sent over a
// socket: fetch will not send a length that lies).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnService, killHard, ADMIN } from '../support/service.mjs';

const LIMIT = 4096;
const CHUNK = 1024;
const TOTAL = 1024 * 1024;

let svc;
before(async () => { svc = await spawnService(mkdtempSync(join(tmpdir(), 'edgeleaf-bodies-'))); });
after(async () => { if (svc) await killHard(svc.child); });

/**
 * Sends a chunked body of up to `TOTAL` bytes, CHUNK at a time every
 * `everyMs`, and stops sending when the answer arrives. Resolves the status,
 * the answer, and how many bytes had been handed to the socket by then.
 */
function chunked(path, { method = 'PUT', everyMs = 10 } = {}) {
  const { hostname, port } = new URL(svc.url);
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = false;
    let timer;
    const req = http.request({
      hostname, port, path, method,
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
    }, (res) => {
      answered = true;
      clearTimeout(timer);
      const sentWhenAnswered = sent;
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode, text, sentWhenAnswered, headers: res.headers });
      });
    });
    req.on('error', (e) => { if (!answered) reject(e); });
    // A JSON string that never ends: only its size can refuse it.
    const send = () => {
      if (answered) return;
      if (sent >= TOTAL) { req.end(); return; }
      const piece = sent === 0 ? `{"description":"${'x'.repeat(CHUNK - 16)}` : 'x'.repeat(CHUNK);
      req.write(piece);
      sent += piece.length;
      timer = setTimeout(send, everyMs);
    };
    send();
  });
}

test(`a chunked body past ${LIMIT} bytes: 413 body_too_large while the client is still sending`, async () => {
  const t0 = Date.now();
  const res = await chunked('/v1/tags/body-chunked');
  const took = Date.now() - t0;
  console.log(`chunked body: ${res.status} after ${res.sentWhenAnswered} bytes sent of ${TOTAL}, ${took} ms`);
  assert.equal(res.status, 413, res.text);
  const { error } = JSON.parse(res.text);
  assert.equal(error.code, 'body_too_large');
  assert.match(error.message, /expected at most 4096 bytes/);
  // Answered after about LIMIT bytes, not after the megabyte: the rest was never read.
  assert.ok(res.sentWhenAnswered < 64 * 1024, `answered only after ${res.sentWhenAnswered} bytes were sent`);
  // The tag was not made.
  const tag = await fetch(`${svc.url}/v1/tags/body-chunked`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(tag.status, 404, await tag.text());
});

test('a chunked body within the limit is read whole', async () => {
  const { hostname, port } = new URL(svc.url);
  // 4000 bytes: JSON padded with whitespace, sent 500 at a time.
  const body = JSON.stringify({ step: 10, description: 'small' }).padEnd(4000, ' ');
  const res = await new Promise((resolve, reject) => {
    const req = http.request({
      hostname, port, path: '/v1/tags/body-small', method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
    }, (r) => {
      let text = '';
      r.on('data', (d) => { text += d; });
      r.on('end', () => resolve({ status: r.statusCode, text }));
    });
    req.on('error', reject);
    for (let i = 0; i < body.length; i += 500) req.write(body.slice(i, i + 500));
    req.end();
  });
  assert.equal(res.status, 200, res.text);
});

test('a declared Content-Length past the limit: 413 on the header alone, the body never awaited', async () => {
  const { hostname, port } = new URL(svc.url);
  const t0 = Date.now();
  const answer = await new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port) }, () => {
      // Says 99,999,999 bytes, sends 10, then waits.
      socket.write(`PUT /v1/tags/body-declared HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${ADMIN}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 99999999\r\n\r\n{"step":10');
    });
    let text = '';
    const timer = setTimeout(() => { socket.destroy(); resolve(text); }, 5000);
    socket.on('data', (d) => {
      text += d;
      if (/\{"error".*\}/.test(text)) { clearTimeout(timer); socket.destroy(); resolve(text); }
    });
    socket.on('error', reject);
  });
  const took = Date.now() - t0;
  assert.match(answer, /^HTTP\/1\.1 413 /, answer.slice(0, 200));
  const { error } = JSON.parse(/\{"error".*\}/.exec(answer)[0]);
  assert.equal(error.code, 'body_too_large');
  assert.ok(took < 4000, `answered after ${took} ms`);
});
