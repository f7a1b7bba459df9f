// uWS handlers of GET /v1/models and GET /v1/models/{model_id}: the models the key may use
// (served for its group, or any group of `auto`, narrowed to its whitelist), in Anthropic's shape. No quota moves.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { errorBody, RelayError } from '../errors.js';
import { authorizeKey } from '../auth/key-check.js';
import { readHead, Reply, type FreeEndpointContext } from '../free-request.js';
import { servedModels } from '../routing/group-routing.js';
import { allowedModels, listModels, parseListModelsQuery, retrieveModel } from './models-list.js';

/** A percent-encoded path segment, or null when an escape is malformed (decodeURIComponent throws). */
function decodePathSegment(segment: string): string | null {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

export function handleListModels(ctx: FreeEndpointContext, res: HttpResponse, req: HttpRequest): void {
  const head = readHead(ctx, res, req);
  const query = parseListModelsQuery((name) => req.getQuery(name));
  const reply = new Reply(res);
  if (typeof query === 'string') return reply.json(400, errorBody('invalid_request_error', query));
  authorizeKey(ctx, head, null)
    .then((access) => {
      if (access instanceof RelayError) return reply.error(access);
      const allowed = allowedModels(servedModels(ctx.channels, access.groups), access.record.modelLimits);
      reply.json(200, JSON.stringify(listModels(allowed, query)));
    })
    .catch((err: unknown) => {
      ctx.log.error({ err }, 'list models failed');
      reply.error(new RelayError('internal'));
    });
}

export function handleRetrieveModel(ctx: FreeEndpointContext, res: HttpResponse, req: HttpRequest): void {
  const head = readHead(ctx, res, req);
  const id = decodePathSegment(req.getParameter(0) ?? '');
  const reply = new Reply(res);
  if (id === null) return reply.error(new RelayError('invalid_request', 'model_id: the path holds a malformed percent-escape.'));
  authorizeKey(ctx, head, null)
    .then((access) => {
      if (access instanceof RelayError) return reply.error(access);
      const model = retrieveModel(allowedModels(servedModels(ctx.channels, access.groups), access.record.modelLimits), id);
      if (!model) return reply.error(new RelayError('not_found', `model: ${id}`));
      reply.json(200, JSON.stringify(model));
    })
    .catch((err: unknown) => {
      ctx.log.error({ err }, 'retrieve model failed');
      reply.error(new RelayError('internal'));
    });
}
