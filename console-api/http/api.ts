// One way to declare a console endpoint: method, path, who may call it, and the zod schemas of its
// body, query and path parameters. `Api.route` registers the Fastify route (the schemas parse the
// input at the edge; a failure is a 400 naming the field; any input with a NUL character or nested
// too deep is refused the same way first) and records the declaration, from which
// http/openapi.ts builds the OpenAPI document. A route registered any other way would be missing from
// the document, which routes/openapi.integration.test.ts checks never happens.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { UserRow } from '../accounts/account-view.js';
import type { RequireUser } from '../auth/require-user.js';
import { ConsoleError, type ErrorCode, isConsoleError } from './errors.js';
import { assertSafeInput, parseInput } from './validation.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

/**
 * Who may call: 'public' (no credential), 'provider' (a payment provider's callback, authenticated by
 * its signature), or the minimum role of a logged-in account (1, 10, 100).
 */
export type Access = 'public' | 'provider' | number;

/** How the body arrives: JSON (default), or the raw text (signature checks need the exact bytes). */
export type BodyMode = 'json' | 'raw';

type Schema = z.ZodType | undefined;
type Out<S extends Schema> = S extends z.ZodType ? z.output<S> : undefined;

export interface EndpointSpec<B extends Schema = undefined, Q extends Schema = undefined, P extends Schema = undefined> {
  method: HttpMethod | HttpMethod[];
  path: string;
  summary: string;
  description?: string;
  tag: string;
  access: Access;
  body?: B;
  query?: Q;
  params?: P;
  /** Schema of `data` in the success envelope (documentation only). */
  data?: z.ZodType;
  /** A response that is not the JSON envelope: text (a provider callback) or a bare JSON document. */
  produces?: 'text/plain' | 'application/json';
  /** Failures this endpoint can answer besides the authentication ones and INTERNAL. */
  errors?: ErrorCode[];
  bodyMode?: BodyMode;
  /**
   * A provider callback that must answer every failure with this text (text/plain) and not with the
   * JSON envelope: whatever refuses the request (the input guard, a body too large, a refused credit,
   * an unexpected error) answers it, with the failure's status (a 500 logged). epay's notify: the
   * provider reads the body only, and retries on anything but `success`.
   */
  failText?: string;
}

export interface HandlerInput<B extends Schema, Q extends Schema, P extends Schema> {
  body: Out<B>;
  query: Out<Q>;
  params: Out<P>;
  /** The authenticated account; only on routes whose access is a role. */
  user: UserRow;
  request: FastifyRequest;
  reply: FastifyReply;
}

/**
 * A final `:id` segment that begins with a letter is a path that is not an endpoint (new-api's
 * `/api/channel/search`, `/api/channel/test`, a typo), not an id written another way: it answers 404
 * ROUTE_NOT_FOUND as any unknown path does (before authentication, in the envelope), where
 * `/api/channel/:id` would have answered 400 `id: must be a positive integer`. An id in another
 * spelling (` 1`, `+1`, `0x1`, `1e0`) still answers that 400 (idParams).
 */
const NOT_AN_ID = /^[\p{L}_]/u;

async function refuseNameAsId(request: FastifyRequest): Promise<void> {
  const id = (request.params as Record<string, unknown> | undefined)?.id;
  if (typeof id === 'string' && NOT_AN_ID.test(id)) throw new ConsoleError('ROUTE_NOT_FOUND');
}

export type RecordedEndpoint = EndpointSpec<Schema, Schema, Schema> & { methods: HttpMethod[] };

export class Api {
  readonly app: FastifyInstance;
  readonly endpoints: RecordedEndpoint[] = [];
  readonly #requireUser: RequireUser;

  constructor(app: FastifyInstance, requireUser: RequireUser) {
    this.app = app;
    this.#requireUser = requireUser;
  }

  route<B extends Schema = undefined, Q extends Schema = undefined, P extends Schema = undefined>(
    spec: EndpointSpec<B, Q, P>,
    handler: (input: HandlerInput<B, Q, P>) => Promise<unknown>,
  ): void {
    const methods = Array.isArray(spec.method) ? spec.method : [spec.method];
    this.endpoints.push({ ...(spec as EndpointSpec<Schema, Schema, Schema>), methods });
    const preHandler = typeof spec.access === 'number' ? this.#requireUser(spec.access) : undefined;
    const bodyMode = spec.bodyMode ?? 'json';
    const routeOptions = {
      method: methods,
      url: spec.path,
      // Routes must not be shadowed by `:id`: a static-looking name there is no such endpoint.
      // Only a final `:id` stands where a sibling endpoint's name would (`/api/token/abc/key` stays an id error).
      ...(/\/:id$/.test(spec.path) ? { onRequest: refuseNameAsId } : {}),
      ...(preHandler ? { preHandler } : {}),
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        // Before any schema: whatever a handler does with its input, NUL characters never reach
        // Postgres and deep nesting never reaches recursive code. A raw body stays as received (a
        // signature covers its bytes; its handler parses it).
        assertSafeInput(request.params ?? {}, 'path');
        assertSafeInput(request.query ?? {}, 'query');
        // Only a body not sent is `{}`: a JSON `null` is refused by the schema as `[]` is (it passed as `{}`, a 200).
        const body = request.body === undefined ? {} : request.body;
        if (bodyMode === 'json') assertSafeInput(body, 'body');
        const input = {
          body: (spec.body ? parseInput(spec.body, body, 'body') : undefined) as Out<B>,
          query: (spec.query ? parseInput(spec.query, request.query ?? {}, 'query') : undefined) as Out<Q>,
          params: (spec.params ? parseInput(spec.params, request.params ?? {}, 'path') : undefined) as Out<P>,
          user: request.account as UserRow,
          request,
          reply,
        };
        return handler(input);
      },
    };
    const failText = spec.failText;
    if (bodyMode === 'raw' || failText !== undefined) {
      this.app.register(async (scope) => {
        if (bodyMode === 'raw') {
          // The body as the exact text received, whatever its content type: a signature covers bytes.
          scope.removeAllContentTypeParsers();
          scope.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
        }
        if (failText !== undefined) {
          // Every error of this route, from its body's parsing to its handler, answers the text.
          scope.setErrorHandler((err: Error & { statusCode?: number }, request, reply) => {
            const status = isConsoleError(err) ? err.status
              : err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
            if (status >= 500) request.log.error({ err }, `${spec.path} failed; answered ${failText}`);
            else request.log.warn({ reason: err.message }, `${spec.path} refused; answered ${failText}`);
            if (isConsoleError(err) && err.retryAfterSec !== undefined) reply.header('retry-after', String(err.retryAfterSec));
            return reply.status(status).type('text/plain; charset=utf-8').send(failText);
          });
        }
        scope.route(routeOptions);
      });
    } else {
      this.app.route(routeOptions);
    }
  }
}
