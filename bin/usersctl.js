#!/usr/bin/env node
process.stderr.write('usersctl: not yet implemented\n');
process.exitCode = 1;
