import { createClient } from '@clickhouse/client';
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
const root = '/work/main';
const { queryLogs, queryLogStat } = await import(root + '/dist/console-api/logs/log-query.js');
const port = 18123;
const child = spawn('node', [root + '/dist/infra/clickhouse/local-server-main.js'], { env: { ...process.env, CLICKHOUSE_URL: `http://127.0.0.1:${port}`, CLICKHOUSE_LOCAL_PATH: root + '/.data/clickhouse-bench', LOG_LEVEL: 'warn' }, stdio: 'inherit' });
for (;;) { try { const r = await fetch(`http://127.0.0.1:${port}/ping`); if (r.ok) break; } catch {} await new Promise(r => setTimeout(r, 200)); }
const ch = createClient({ url: `http://127.0.0.1:${port}`, database: 'gateway_bench', keep_alive: { enabled: true, idle_socket_ttl: 2500 }, clickhouse_settings: { date_time_input_format: 'best_effort' } });
const [{ user_id }] = await (await ch.query({ query: 'SELECT user_id, sum(requests) n FROM log_stats_15m GROUP BY user_id ORDER BY n DESC LIMIT 1', format: 'JSONEachRow' })).json();
const u = Number(user_id);
function threads(pid) { let sum = 0; for (const t of readdirSync(`/proc/${pid}/task`)) { const s = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8'); const f = s.slice(s.lastIndexOf(')') + 2).split(' '); sum += (Number(f[11]) + Number(f[12])) * 10; } return sum; }
const self = () => { const c = process.cpuUsage(); return (c.user + c.system) / 1000; };
const now = Math.floor(Date.now() / 1000), weekAgo = now - 7 * 86400, monthAgo = now - 31 * 86400;
let stmts = 0; const orig = ch.query.bind(ch); ch.query = (p) => { stmts++; if (process.env.SHOW) console.log(p.query.replace(/\s+/g, ' ').slice(0, 3000), JSON.stringify(p.query_params)); return orig(p); };
const cases = {
  first: () => queryLogs(ch, { userId: u }, { page: 1, pageSize: 10 }),
  filtered: () => queryLogs(ch, { userId: u, type: 2, modelName: 'claude-opus-4-5', startTimestamp: weekAgo, endTimestamp: now }, { page: 1, pageSize: 10 }),
  token: () => queryLogs(ch, { userId: u, tokenName: 'key-1' }, { page: 3, pageSize: 50 }),
  deep: () => queryLogs(ch, { userId: u }, { page: 4995, pageSize: 100 }),
  stat30: () => queryLogStat(ch, { userId: u, startTimestamp: monthAgo, endTimestamp: now }, now),
  statf: () => queryLogStat(ch, { userId: u, startTimestamp: monthAgo, endTimestamp: now, modelName: 'claude-sonnet-4-5', tokenName: 'key-2' }, now),
};
const which = process.argv.slice(2);
for (const name of which.length ? which : Object.keys(cases)) {
  if (process.env.SHOW) { await cases[name](); continue; }
  for (let i = 0; i < 20; i++) await cases[name]();
  const N = 150; stmts = 0; const a = threads(child.pid), c0 = self(), t0 = performance.now();
  for (let i = 0; i < N; i++) await cases[name]();
  const b = threads(child.pid), c1 = self(), t1 = performance.now();
  console.log(name.padEnd(9), 'statements', (stmts / N).toFixed(1), 'wall', ((t1 - t0) / N).toFixed(2), 'client cpu', ((c1 - c0) / N).toFixed(2), 'server cpu', ((b - a) / N).toFixed(2));
}
await ch.close(); child.kill('SIGTERM');
