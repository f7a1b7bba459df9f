// SIGTERM to the embedded ClickHouse (node dist/infra/clickhouse/local-server-main.js, as `make run`
// starts it: make build first) while its clients hold kept-alive connections, one idle and one sending
// query after query: the process must stop and exit 0 by itself. It used to wait for the clients to
// hang up (the chaos suite, issue 15, saw it hang for 60 s until SIGKILL), because an idle kept-alive
// socket, or one a client keeps reusing, never ends on its own.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClickHouseLogLevel, createClient } from '@clickhouse/client';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../project-root.js';
import { isClickHouseReachable } from './ensure.js';
import { freePort } from '../testing/free-port.js';

let proc: ChildProcess | null = null;
let dataPath = '';

afterAll(() => {
  if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  if (dataPath) rmSync(dataPath, { recursive: true, force: true });
});

/** GET /ping on `agent`'s kept-alive socket; resolves once the answer is read. */
function ping(url: string, agent: Agent): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/ping`, { agent }, (res) => {
      res.resume();
      res.once('end', () => resolve());
    });
    req.once('error', reject);
    req.end();
  });
}

describe('the embedded ClickHouse process', () => {
  it('exits 0 on SIGTERM while clients hold kept-alive connections (one idle, one busy)', async () => {
    dataPath = mkdtempSync(join(tmpdir(), 'chdb-shutdown-'));
    const url = `http://127.0.0.1:${await freePort()}`;
    const child = spawn(process.execPath, [join(projectRoot(), 'dist/infra/clickhouse/local-server-main.js')], {
      env: { ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'info', CLICKHOUSE_URL: url, CLICKHOUSE_LOCAL_PATH: dataPath },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc = child;
    let output = '';
    child.stdout!.on('data', (d: Buffer) => { output += d.toString(); });
    child.stderr!.on('data', (d: Buffer) => { output += d.toString(); });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    while (!(await isClickHouseReachable(url))) {
      if (child.exitCode !== null) throw new Error(`the server exited at start-up:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }

    // An idle kept-alive socket: the answer was read, the socket stays open for the next request.
    const idle = new Agent({ keepAlive: true, maxSockets: 1 });
    await ping(url, idle);
    const idleSocket = Object.values(idle.freeSockets).flat()[0];
    expect(idleSocket).toBeDefined();
    // A busy client reusing its socket for one query after another, as the billing worker does.
    const busy = createClient({ url, log: { level: ClickHouseLogLevel.OFF }, max_open_connections: 1 });
    let stop = false;
    let queries = 0;
    const loop = (async () => {
      while (!stop) {
        try {
          await busy.query({ query: 'SELECT 1', format: 'JSONEachRow' }).then((r) => r.json());
          queries++;
        } catch {
          // The server going away is what this test is about.
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    })();
    while (queries < 3) await new Promise((r) => setTimeout(r, 20));

    child.kill('SIGTERM');
    // No wall-clock claim: if the server waits for its clients, it never exits and the test times out.
    const exit = await exited;
    stop = true;
    await loop;
    await busy.close();
    idle.destroy();
    expect(exit, output).toEqual({ code: 0, signal: null });
    expect(output).toContain('stopped');
  });
});
