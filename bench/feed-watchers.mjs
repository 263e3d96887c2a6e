#!/usr/bin/env node
/**
 * Following watchers of GET /changes for bench/changes-bench.ts, in a
 * process of their own so that reading the feeds takes nothing from the
 * process that makes the load. Each is a raw socket that sends the request
 * and counts the bytes it receives; nothing is decoded or split into lines
 * (the server counts the lines it sent: users_server_change_lines_total).
 *
 * Usage: node bench/feed-watchers.mjs URL COUNT
 * Prints `ready` once every feed has its answer's first bytes; on SIGTERM
 * prints `received BYTES` and exits.
 */
import { connect } from 'node:net';

const [url, countText] = process.argv.slice(2);
const { hostname, port } = new URL(url);
const count = Number(countText);
const request = `GET /changes?follow=1 HTTP/1.1\r\nHost: ${hostname}:${port}\r\n\r\n`;
let received = 0;
let started = 0;

for (let i = 0; i < count; i++) {
  const socket = connect(Number(port), hostname, () => socket.write(request));
  let first = true;
  socket.on('data', (chunk) => {
    received += chunk.length;
    if (first) {
      first = false;
      if (++started === count) process.stdout.write('ready\n');
    }
  });
  socket.on('error', (error) => {
    process.stderr.write(`feed-watchers: ${error.message}\n`);
    process.exit(1);
  });
}
process.on('SIGTERM', () => {
  process.stdout.write(`received ${received}\n`);
  process.exit(0);
});
