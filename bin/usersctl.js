#!/usr/bin/env node
// undici parses HTTP with a WebAssembly module; V8 would recompile it with
// its optimizing tier in the background and wait for that at exit (about
// 80 ms of a 250 ms command). The baseline compiler alone is plenty for a
// command line (docs/performance.md "usersctl start-up").
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--liftoff-only');
// npm run build bundles dist/cli/ with its dependencies: a few files to load
// instead of hundreds; undici and tough-cookie stay chunks of their own,
// loaded at the first request and the first use of the jar.
const { run } = await import('../dist/usersctl/main.js');
process.exitCode = await run(process.argv.slice(2));
