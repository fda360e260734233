#!/usr/bin/env node
// A stock @grpc/grpc-js client of retrytest.RetryTest with retries on
// (gRFC A6): the same flags and the same JSON output as py_retry_client.py.
//
//   node js_retry_client.js --target HOST:PORT --calls JSON
//        [--service-config JSON] [--no-retries] [--proto FILE]
//        [--node-modules DIR]
//
// --node-modules is where scripts/install-grpc-js.sh installed
// @grpc/grpc-js and @grpc/proto-loader (default $RETRY_JS_MODULES). The
// calls run one after another on one channel (grpc.service_config,
// grpc.enable_retries 1); Observe goes over a second channel without a
// service config (and another spelling of the target, see below) so that
// its successes do not feed the first channel's retry throttle. Prints a JSON list, one object per call (see
// py_retry_client.py). Exits 77 when the modules cannot be loaded, 2 on
// bad arguments, 0 otherwise.
'use strict';

const path = require('path');
const { createRequire } = require('module');

const DEFAULT_SERVICE_CONFIG = {
  methodConfig: [{
    name: [{ service: 'retrytest.RetryTest', method: 'Unary' },
      { service: 'retrytest.RetryTest', method: 'Stream' }],
    retryPolicy: {
      maxAttempts: 5, initialBackoff: '0.1s', maxBackoff: '1s',
      backoffMultiplier: 2, retryableStatusCodes: ['UNAVAILABLE'],
    },
  }],
};
const MAX_CALL_MS = 60000;

function usage(msg) {
  process.stderr.write(`js_retry_client: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const a = {
    proto: process.env.RETRYTEST_PROTO || path.join(__dirname, 'retrytest.proto'),
    modules: process.env.RETRY_JS_MODULES || '',
    noRetries: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const f = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${f} needs a value`);
      return argv[++i];
    };
    if (f === '--target') a.target = next();
    else if (f === '--calls') a.calls = next();
    else if (f === '--service-config') a.serviceConfig = next();
    else if (f === '--no-retries') a.noRetries = true;
    else if (f === '--proto') a.proto = next();
    else if (f === '--node-modules') a.modules = next();
    else usage(`unknown flag ${f}`);
  }
  if (!a.target || !a.calls) usage('--target and --calls are required');
  return a;
}

function reportObj(r) {
  return {
    key: r.key, seq: r.seq, note: r.note,
    attempts: (r.attempts || []).map((x) => ({
      previous_attempts: x.previous_attempts,
      arrival_ms: x.arrival_ms,
      timeout_ms: Number(x.timeout_ms),
    })),
  };
}

function mdObj(md) {
  const out = {};
  if (!md) return out;
  const m = md.getMap();
  for (const k of Object.keys(m)) {
    const v = m[k];
    out[k] = Buffer.isBuffer(v) ? v.toString('base64') : String(v);
  }
  return out;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  let calls; let sc;
  try {
    calls = JSON.parse(args.calls);
    sc = args.serviceConfig ? JSON.parse(args.serviceConfig) : DEFAULT_SERVICE_CONFIG;
  } catch (e) {
    usage(`bad JSON: ${e.message}`);
  }
  let grpc; let protoLoader;
  try {
    const req = args.modules
      ? createRequire(path.join(path.resolve(args.modules), 'x.js'))
      : require;
    grpc = req('@grpc/grpc-js');
    protoLoader = req('@grpc/proto-loader');
  } catch (e) {
    process.stderr.write(`js_retry_client: cannot load @grpc/grpc-js: ${e.message}\n`);
    process.exit(77);
  }
  const def = protoLoader.loadSync(args.proto, {
    keepCase: true, longs: Number, enums: String, defaults: true,
  });
  const Svc = grpc.loadPackageDefinition(def).retrytest.RetryTest;
  const client = new Svc(args.target, grpc.credentials.createInsecure(), {
    'grpc.service_config': JSON.stringify(sc),
    'grpc.enable_retries': args.noRetries ? 0 : 1,
  });
  // grpc-js keeps retry throttlers in a process-wide map keyed by the
  // channel's target, and a channel whose config has no retryThrottling
  // deletes the entry: an observer on the same target string would wipe
  // the throttle of the channel under test. Spell the target differently.
  const obsTarget = /^[0-9.]+:[0-9]+$/.test(args.target)
    ? `ipv4:${args.target}` : args.target;
  const observer = new Svc(obsTarget, grpc.credentials.createInsecure(), {
    'grpc.service_config_disable_resolution': 1,
  });
  const codeName = {};
  for (const [k, v] of Object.entries(grpc.status)) codeName[v] = k;

  const results = [];
  const runOne = (c) => new Promise((resolve) => {
    const b = c.behavior || {};
    const timeout = Math.min(c.timeout_ms || 10000, MAX_CALL_MS);
    const res = { name: c.name || '', messages: [], trailers: {} };
    const t0 = process.hrtime.bigint();
    let done = false;
    const finish = (code, message, md) => {
      if (done) return;
      done = true;
      res.elapsed_ms = Number(process.hrtime.bigint() - t0) / 1e6;
      res.code = code;
      res.code_name = codeName[code] || String(code);
      res.message = message || '';
      res.trailers = mdObj(md);
      observer.Observe({ key: b.key || '' }, { deadline: Date.now() + 10000 },
        (err, r) => {
          if (err) {
            res.observed = null;
            res.observe_error = `${codeName[err.code]}: ${err.details}`;
          } else {
            res.observed = reportObj(r);
          }
          resolve(res);
        });
    };
    const deadline = Date.now() + timeout;
    if (c.method === 'stream') {
      const call = client.Stream(b, { deadline });
      call.on('data', (r) => res.messages.push(reportObj(r)));
      call.on('error', () => {}); // the status event carries it
      call.on('status', (s) => finish(s.code, s.details, s.metadata));
    } else {
      const call = client.Unary(b, { deadline }, (err, r) => {
        if (!err) res.messages.push(reportObj(r));
      });
      call.on('status', (s) => finish(s.code, s.details, s.metadata));
    }
  });

  (async () => {
    for (const c of calls) results.push(await runOne(c));
    client.close();
    observer.close();
    process.stdout.write(`${JSON.stringify(results, null, 1)}\n`);
    process.exit(0);
  })().catch((e) => {
    process.stderr.write(`js_retry_client: ${e.stack || e}\n`);
    process.exit(1);
  });
}

main();
