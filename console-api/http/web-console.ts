// The web console (console-web/, built by `make build` into dist/console-web) served at / with
// @fastify/static, under a strict Content-Security-Policy (@fastify/helmet, every response).
//
// The static plugin registers no route (serve: false): the not-found handler calls serveWebConsole,
// so a file or the single-page fallback (index.html) answers only a GET outside /api/. No /api/ path
// can ever be shadowed, and the route table (and so the OpenAPI document) keeps only the API.
import { existsSync, statSync } from 'node:fs';
import { join, normalize } from 'node:path';
import fastifyHelmet from '@fastify/helmet';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { projectRoot } from '../../infra/project-root.js';

export function webConsoleDir(configured: string): string {
  return configured || join(projectRoot(), 'dist', 'console-web');
}

/** The page's own origin only: no inline script or style, no plugin, no framing. */
export const CONTENT_SECURITY_POLICY = {
  'default-src': ["'self'"],
  'script-src': ["'self'"],
  'style-src': ["'self'"],
  'img-src': ["'self'", 'data:'],
  'font-src': ["'self'"],
  'connect-src': ["'self'"],
  'object-src': ["'none'"],
  'base-uri': ["'none'"],
  'form-action': ["'self'"],
  'frame-ancestors': ["'none'"],
};

export function registerWebConsole(app: FastifyInstance, dir: string): void {
  void app.register(fastifyHelmet, {
    contentSecurityPolicy: { useDefaults: false, directives: CONTENT_SECURITY_POLICY },
    // The console may run on plain HTTP locally; HSTS is the TLS terminator's decision.
    strictTransportSecurity: false,
  });
  void app.register(fastifyStatic, { root: dir, serve: false });
}

/**
 * Answers a GET/HEAD outside /api/ with a built file, or index.html for a client-side route; false
 * when the request is not the web console's (the caller answers ROUTE_NOT_FOUND).
 */
export function serveWebConsole(dir: string, request: FastifyRequest, reply: FastifyReply): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  const path = request.url.split('?')[0]!;
  // Only an origin-form path of the page's own (not an absolute-form target, not //host).
  if (!path.startsWith('/') || path.startsWith('//')) return false;
  if (path === '/api' || path.startsWith('/api/')) return false;
  if (!existsSync(join(dir, 'index.html'))) {
    void reply.code(503).type('text/plain; charset=utf-8').send('The web console is not built: run `make build`.\n');
    return true;
  }
  let relative: string;
  try {
    relative = normalize(decodeURIComponent(path)).replace(/^\/+/, '');
  } catch {
    return false;
  }
  const file = join(dir, relative);
  reply.code(200);
  if (relative && !relative.startsWith('..') && file.startsWith(dir) && existsSync(file) && statSync(file).isFile()) {
    // Vite names built assets by their content hash: cacheable for ever.
    const hashed = relative.startsWith('assets/');
    void reply.sendFile(relative, hashed ? { maxAge: '365d', immutable: true } : { cacheControl: false });
    return true;
  }
  // A missing file (a name with an extension) is a 404, never the page in its place.
  if (/\.[A-Za-z0-9]+$/.test(relative)) return false;
  // A client-side route (/keys, /logs, ...): the application decides.
  void reply.sendFile('index.html', { cacheControl: false });
  return true;
}
