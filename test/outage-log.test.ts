/**
 * The PostgreSQL store's outage lines (server/store/postgres/outage-log.ts):
 * one when the database stops answering, one when its probe finds it back;
 * a slow statement is not an outage. The whole story against a real
 * database is in postgres-faults.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OutageLog } from '../server/store/postgres/outage-log.js';

test('an outage is logged once however many requests meet it, its end once the probe finds the database back, and a statement or lock timeout or another error is no outage', async () => {
  const lines: string[] = [];
  let answering = false;
  let now = 1_000_000;
  let logged: (line: string) => void = () => {};
  const outage = new OutageLog(
    'postgres://db/users',
    async () => answering,
    (line) => {
      lines.push(line);
      logged(line);
    },
    () => now,
  );
  for (const code of ['57014', '55P03', '23505', undefined]) outage.failed(Object.assign(new Error('x'), { code }));
  assert.deepEqual(lines, [], 'no outage');
  outage.failed(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
  outage.failed(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
  outage.failed(Object.assign(new Error('ended'), { code: '57P01' }));
  assert.deepEqual(lines, [
    'users-server: postgres://db/users does not answer (ECONNREFUSED): requests that need it are answered 503 until it does',
  ]);
  const back = new Promise<string>((resolve) => (logged = resolve));
  // The probe's timer is unref'd (it never keeps a server alive): something must hold the test's event loop meanwhile.
  const hold = setInterval(() => {}, 60_000);
  now += 4_250;
  answering = true;
  assert.equal(await back, 'users-server: postgres://db/users answers again, after 4.3 s out of reach');
  clearInterval(hold);
  outage.failed(Object.assign(new Error('refused'), { code: 'ECONNRESET' }));
  assert.equal(lines.length, 3, 'a new outage is logged again');
  outage.close();
});
