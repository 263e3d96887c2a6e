#!/usr/bin/env node
// npm run build bundles dist/server/ into dist/users-server/: a few files to
// load at start instead of eighty (the PostgreSQL store is a chunk of its
// own, and its driver is loaded only for a postgres:// store).
import { main } from '../dist/users-server/main.js';

process.exitCode = await main(process.argv.slice(2));
// Done: whatever a driver left open (a socket the database cut) does not keep the process alive.
setTimeout(() => process.exit(), 500).unref();
