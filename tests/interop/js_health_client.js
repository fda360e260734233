#!/usr/bin/env node
// A stock @grpc/grpc-js client of grpc.health.v1.Health, for
// test_health_peers.py:
//
//   node js_health_client.js --target HOST:PORT --proto FILE
//        --node-modules DIR
//
// Prints one line per event: "check <service> <STATUS or CODE_NAME>" for
// Check("") and Check("nope"), then "watch <STATUS>" for each message of a
// Watch("") stream and "end <CODE_NAME>" when it ends, then exits. The
// stream has a 60 s deadline (only to catch hangs). Exits 77 when the
// modules cannot be loaded, 2 on bad arguments.
'use strict';

const path = require('path');
const { createRequire } = require('module');

function usage(msg) {
  process.stderr.write(`js_health_client: ${msg}\n`);
  process.exit(2);
}

const a = {};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  if (i + 1 >= argv.length) usage(`${argv[i]} needs a value`);
  if (argv[i] === '--target') a.target = argv[i + 1];
  else if (argv[i] === '--proto') a.proto = argv[i + 1];
  else if (argv[i] === '--node-modules') a.modules = argv[i + 1];
  else usage(`unknown flag ${argv[i]}`);
}
if (!a.target || !a.proto || !a.modules) usage('--target, --proto, --node-modules');

let grpc; let protoLoader;
try {
  const req = createRequire(path.join(path.resolve(a.modules), 'x.js'));
  grpc = req('@grpc/grpc-js');
  protoLoader = req('@grpc/proto-loader');
} catch (e) {
  process.stderr.write(`js_health_client: cannot load @grpc/grpc-js: ${e.message}\n`);
  process.exit(77);
}
const def = protoLoader.loadSync(a.proto, {
  keepCase: true, longs: Number, enums: String, defaults: true,
});
const Health = grpc.loadPackageDefinition(def).grpc.health.v1.Health;
const client = new Health(a.target, grpc.credentials.createInsecure());
const codeName = {};
for (const [k, v] of Object.entries(grpc.status)) codeName[v] = k;
const out = (line) => process.stdout.write(`${line}\n`);

function check(service) {
  return new Promise((resolve) => {
    client.Check({ service }, { deadline: Date.now() + 10000 }, (err, resp) => {
      out(`check ${service || '-'} ${err ? codeName[err.code] : resp.status}`);
      resolve();
    });
  });
}

(async () => {
  await check('');
  await check('nope');
  const call = client.Watch({ service: '' }, { deadline: Date.now() + 60000 });
  let ended = false;
  const end = (code) => {
    if (ended) return;
    ended = true;
    out(`end ${codeName[code] || code}`);
    client.close();
  };
  call.on('data', (m) => out(`watch ${m.status}`));
  call.on('error', (e) => end(e.code));
  call.on('status', (s) => end(s.code));
})();
