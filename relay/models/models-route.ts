// uWS handlers of GET /v1/models and GET /v1/models/{model_id}: the models the key may use
// (served for its group, or any group of `auto`, narrowed to its whitelist, priced), in Anthropic's shape. No quota moves.
// A client that sends no anthropic-version header (OpenAI's SDK and most OpenAI tools) is answered in
// OpenAI's shape instead (`{object: "list", data: [{id, object: "model", created, owned_by}]}`);
// Anthropic's SDK always sends the header. Errors follow the same choice: OpenAI's error JSON (with
// its `code` and `param`, which OpenAI's SDK raises as `e.code`, and `model_not_found` for a model the
// key cannot see, as OpenAI answers) to the one, Anthropic's to the other.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { RelayError } from '../errors.js';
import { authorizeKey } from '../auth/key-check.js';
import { readHead, Reply, type FreeEndpointContext } from '../free-request.js';
import { servedModels } from '../routing/group-routing.js';
import { allowedModels, listModels, openaiModel, openaiModelList, parseListModelsQuery, retrieveModel } from './models-list.js';

/**
 * Whether the client asked in OpenAI's manner: no anthropic-version, and its key as a bearer token
 * (an `x-api-key` is Anthropic's way: curl without the version header got OpenAI's shapes). Read
 * before any await.
 */
export function wantsOpenAI(req: HttpRequest): boolean {
  return req.getHeader('anthropic-version') === '' && req.getHeader('x-api-key') === '';
}

/** A percent-encoded path segment (or query string), or null when an escape is malformed (decodeURIComponent throws). */
function decodePathSegment(segment: string): string | null {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** GET /v1/models, and HEAD (`headOnly`): what GET answers, the body left out. */
export function handleListModels(ctx: FreeEndpointContext, res: HttpResponse, req: HttpRequest, headOnly = false): void {
  const head = readHead(ctx, res, req);
  const openai = wantsOpenAI(req);
  // uWS hands a malformed escape's value over as it is: `after_id=%zz` listed an empty page.
  const query = decodePathSegment(req.getQuery() ?? '') === null
    ? 'the query string holds a malformed percent-escape.'
    : parseListModelsQuery((name) => req.getQuery(name));
  const reply = new Reply(res);
  reply.openai = openai;
  reply.headOnly = headOnly;
  if (typeof query === 'string') return reply.error(new RelayError('invalid_request', query));
  authorizeKey(ctx, head, null)
    .then((access) => {
      if (access instanceof RelayError) return reply.error(access);
      const allowed = allowedModels(servedModels(ctx.channels, access.groups), access.record.modelLimits, ctx.ratios().priced);
      reply.json(200, JSON.stringify(openai ? openaiModelList(allowed) : listModels(allowed, query)));
    })
    .catch((err: unknown) => {
      ctx.log.error({ err }, 'list models failed');
      reply.error(new RelayError('internal'));
    });
}

/** GET /v1/models/{model_id}, and HEAD (`headOnly`). */
export function handleRetrieveModel(ctx: FreeEndpointContext, res: HttpResponse, req: HttpRequest, headOnly = false): void {
  const head = readHead(ctx, res, req);
  const openai = wantsOpenAI(req);
  const id = decodePathSegment(req.getParameter(0) ?? '');
  const reply = new Reply(res);
  reply.openai = openai;
  reply.headOnly = headOnly;
  if (id === null) return reply.error(new RelayError('invalid_request', 'model_id: the path holds a malformed percent-escape.'));
  authorizeKey(ctx, head, null)
    .then((access) => {
      if (access instanceof RelayError) return reply.error(access);
      const model = retrieveModel(allowedModels(servedModels(ctx.channels, access.groups), access.record.modelLimits, ctx.ratios().priced), id);
      if (!model) {
        return reply.error(openai
          ? new RelayError('model_not_found', `The model '${id}' does not exist or this API key may not use it.`, 'model')
          : new RelayError('not_found', `model: ${id}`));
      }
      reply.json(200, JSON.stringify(openai ? openaiModel(id) : model));
    })
    .catch((err: unknown) => {
      ctx.log.error({ err }, 'retrieve model failed');
      reply.error(new RelayError('internal'));
    });
}
