#!/usr/bin/env node
import { main } from '../dist/server/main.js';

process.exitCode = await main(process.argv.slice(2));
// Done: whatever a driver left open (a socket the database cut) does not keep the process alive.
setTimeout(() => process.exit(), 500).unref();
