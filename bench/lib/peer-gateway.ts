// The peer: Portkey's open-source AI gateway (@portkey-ai/gateway, a devDependency), a gateway users
// pick today, started by the bench on a port of its own in front of the same mock provider, so that
// the ratio relay ÷ peer is measured in the same run on the same cores. It is told the provider and
// the mock's address per request (x-portkey-provider: anthropic, x-portkey-custom-host), and passes
// the caller's x-api-key to the provider; it meters nothing, so its runs have no money audit.
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { projectRoot } from '../../infra/project-root.js';
import type { Service } from './stack.js';

export const PEER_NAME = 'portkey';

/** The installed gateway's version and entry point, or null when it is not installed. */
export function peerGatewayEntry(): { version: string; entry: string } | null {
  try {
    const require = createRequire(join(projectRoot(), 'package.json'));
    const pkgPath = require.resolve('@portkey-ai/gateway/package.json');
    const pkg = JSON.parse(readFileSync(pkgPath, 'utf8')) as { version: string };
    const entry = join(dirname(pkgPath), 'build/start-server.js');
    return existsSync(entry) ? { version: pkg.version, entry } : null;
  } catch {
    return null;
  }
}

/** Headers that route a request through the peer to the mock (the caller adds its x-api-key). */
export function peerHeaders(mockUrl: string): Record<string, string> {
  return { 'x-portkey-provider': 'anthropic', 'x-portkey-custom-host': `${mockUrl}/v1` };
}

/** Starts the peer on `port` (headless, production: no UI, no log streaming) and waits until it answers. */
export async function startPeerGateway(port: number, logDir: string): Promise<Service & { version: string }> {
  const found = peerGatewayEntry();
  if (!found) throw new Error('@portkey-ai/gateway is not installed (a devDependency): the peer section needs it');
  const out = createWriteStream(join(logDir, 'portkey.log'));
  const child = spawn(process.execPath, [found.entry, `--port=${port}`, '--headless'], {
    cwd: projectRoot(),
    // NODE_ENV=production: no UI and no log stream; the gateway's own defaults otherwise.
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.pipe(out);
  child.stderr!.pipe(out);
  const url = `http://127.0.0.1:${port}`;
  const end = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${PEER_NAME} exited with code ${child.exitCode} (see logs/portkey.log)`);
    try {
      const res = await fetch(`${url}/`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      // not yet
    }
    if (Date.now() > end) throw new Error(`${PEER_NAME} did not answer ${url} within 30 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { name: PEER_NAME, pid: child.pid!, url, child, version: found.version };
}
