// The console API as a Fastify instance (no listen: main.ts listens, tests inject). One module per
// concern: routes/* register endpoints, auth/* credentials, http/* envelope, errors and validation.
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { createLogger } from '../infra/logger.js';
import { makeRequireUser } from './auth/require-user.js';
import { type ConsoleDeps, createContext } from './context.js';
import { fail } from './http/envelope.js';
import { Api } from './http/api.js';
import { ConsoleError, type ErrorCode, isConsoleError } from './http/errors.js';
import { registerChannelRoutes } from './routes/channel.js';
import { registerLogRoutes } from './routes/log.js';
import { registerMetaRoutes } from './routes/meta.js';
import { registerOptionRoutes } from './routes/option.js';
import { registerRedemptionRoutes } from './routes/redemption.js';
import { registerTokenRoutes } from './routes/token.js';
import { registerTopupRoutes } from './routes/topup.js';
import { registerUserRoutes } from './routes/user.js';

/** Console bodies are small JSON objects. */
const CONSOLE_BODY_LIMIT = 1024 * 1024;

const FASTIFY_ERROR_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'VALIDATION_FAILED',
};

export type { ConsoleDeps } from './context.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The declared endpoints (http/api.ts), from which the OpenAPI document is built. */
    consoleApi: Api;
    /** Every registered route (method, url), HEAD excluded. */
    routeTable: { method: string; url: string }[];
  }
}

export function buildConsoleApp(deps: ConsoleDeps): FastifyInstance {
  const logger = deps.logger ?? createLogger(deps.config, 'console-api');
  const ctx = createContext(deps, logger);
  const app = Fastify({
    loggerInstance: logger,
    bodyLimit: CONSOLE_BODY_LIMIT,
    routerOptions: { ignoreTrailingSlash: true },
    trustProxy: false,
  }) as unknown as FastifyInstance;

  app.decorateRequest('account', null);
  // Every route Fastify registers, whatever registered it (the OpenAPI test compares it with the document).
  const routeTable: { method: string; url: string }[] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) if (method !== 'HEAD') routeTable.push({ method, url: r.url });
  });

  app.setErrorHandler((err: FastifyError | ConsoleError, request, reply) => {
    if (isConsoleError(err)) return reply.status(err.status).send(fail(err.message));
    const mapped = FASTIFY_ERROR_CODES[err.code];
    if (mapped) {
      const e = new ConsoleError(mapped);
      return reply.status(e.status).send(fail(e.message));
    }
    const status = err.statusCode ?? 500;
    if (status === 429) return reply.status(429).send(fail(new ConsoleError('RATE_LIMITED').message));
    if (status >= 400 && status < 500) return reply.status(status).send(fail(err.message));
    request.log.error({ err }, 'unhandled console error');
    return reply.status(500).send(fail(new ConsoleError('INTERNAL').message));
  });

  app.setNotFoundHandler((_request, reply) => {
    const e = new ConsoleError('ROUTE_NOT_FOUND');
    return reply.status(e.status).send(fail(e.message));
  });

  // Every endpoint is declared through `api` (http/api.ts): validated at the edge and listed in the
  // OpenAPI document served at GET /api/openapi.json.
  const api = new Api(app, makeRequireUser(ctx));
  registerUserRoutes(api, ctx);
  registerTokenRoutes(api, ctx);
  registerTopupRoutes(api, ctx);
  registerRedemptionRoutes(api, ctx);
  registerChannelRoutes(api, ctx);
  registerOptionRoutes(api, ctx);
  registerLogRoutes(api, ctx);
  registerMetaRoutes(api, ctx);
  app.decorate('consoleApi', api);
  return app;
}
