#!/usr/bin/env node
// Removes the `resolved` (download address) fields from package-lock.json so
// the committed lock names no registry host; npm ci then fetches each package
// by name, version and integrity from the configured registry. Run after
// changing package.json: npm install --package-lock-only && node strip-resolved.js
// Another folder's lock: node strip-resolved.js PATH/package-lock.json (as
// tools/label-studio-frontend does). A local link's `resolved` (a folder in
// the project, `"link": true`) names no host and is kept: npm needs it.
'use strict';

const fs = require('fs');
const path = require('path');

const file = process.argv[2] ? path.resolve(process.argv[2]) : path.join(__dirname, 'package-lock.json');
const lock = JSON.parse(fs.readFileSync(file, 'utf8'));
let removed = 0;
for (const entry of Object.values(lock.packages || {})) {
  if ('resolved' in entry && !entry.link) {
    delete entry.resolved;
    ++removed;
  }
}
fs.writeFileSync(file, JSON.stringify(lock, null, 2) + '\n');
process.stdout.write(`strip-resolved: ${removed} resolved field(s) removed\n`);
