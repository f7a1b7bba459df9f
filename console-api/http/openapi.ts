// The OpenAPI 3.1 document of the console API, generated from the same zod schemas that validate the
// requests (http/api.ts records them). Served at GET /api/openapi.json.
import { z } from 'zod';
import type { RecordedEndpoint } from './api.js';
import { ERROR_CATALOGUE } from './errors.js';

type JsonSchema = Record<string, unknown>;

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const out = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as JsonSchema;
  delete out.$schema;
  return out;
}

/** `/api/token/:id/key` → `/api/token/{id}/key`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
}

function parameters(e: RecordedEndpoint): unknown[] {
  const list: unknown[] = [];
  for (const [where, schema] of [['query', e.query], ['path', e.params]] as const) {
    if (!schema) continue;
    const js = jsonSchema(schema, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
    for (const [name, s] of Object.entries(js.properties ?? {})) {
      list.push({ name, in: where, required: where === 'path' || (js.required ?? []).includes(name), schema: s });
    }
  }
  return list;
}

function accessText(access: RecordedEndpoint['access']): string {
  if (access === 'public') return 'Public: no credential.';
  if (access === 'provider') return "Payment provider callback: authenticated by the provider's signature.";
  return `Needs \`Authorization: Bearer <access token>\` of an account with role >= ${access}.`;
}

const envelope = (data?: JsonSchema): JsonSchema => ({
  type: 'object',
  required: ['success', 'message'],
  properties: {
    success: { type: 'boolean' },
    message: { type: 'string' },
    ...(data ? { data } : {}),
  },
});

export function buildOpenApiDocument(endpoints: readonly RecordedEndpoint[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const e of endpoints) {
    const path = openApiPath(e.path);
    const item = (paths[path] ??= {});
    const errors = [...new Set([
      ...(e.body || e.query || e.params ? (['VALIDATION_FAILED'] as const) : []),
      // A JSON body is refused in another media type, or over the body limit.
      ...(e.body ? (['UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE'] as const) : []),
      ...(typeof e.access === 'number' ? (['UNAUTHENTICATED', 'INVALID_ACCESS_TOKEN', 'API_KEY_NOT_ACCEPTED', 'ACCOUNT_BANNED', 'INSUFFICIENT_ROLE'] as const) : []),
      ...(e.errors ?? []),
      'INTERNAL' as const,
      // Any endpoint's query may lose its connection (app.ts's error handler).
      'DATABASE_UNAVAILABLE' as const,
      // And any may wait too long for a row or a statement (console-api/db.ts).
      'DATABASE_BUSY' as const,
      // And any that reaches Redis may find it away (app.ts's error handler).
      'QUOTA_STORE_UNAVAILABLE' as const,
    ])];
    const responses: Record<string, unknown> = {
      200: e.produces === 'text/plain'
        ? { description: 'Plain text answer to the provider', content: { 'text/plain': { schema: { type: 'string' } } } }
        : e.produces === 'application/json'
        ? { description: 'A JSON document (not in the envelope)', content: { 'application/json': { schema: { type: 'object' } } } }
        : { description: 'Success', content: { 'application/json': { schema: envelope(e.data ? jsonSchema(e.data, 'output') : undefined) } } },
    };
    for (const code of errors) {
      const { status, message } = ERROR_CATALOGUE[code];
      const key = String(status);
      const prev = responses[key] as { description: string } | undefined;
      responses[key] = {
        description: prev ? `${prev.description}; ${code}` : e.failText !== undefined ? code : `${code} (default message: "${message}")`,
        // A callback that answers every failure with one text (http/api.ts failText) is documented so.
        content: e.failText !== undefined
          ? { 'text/plain': { schema: { type: 'string', const: e.failText } } }
          : { 'application/json': { schema: envelope() } },
      };
    }
    for (const method of e.methods) {
      item[method.toLowerCase()] = {
        summary: e.summary,
        description: [accessText(e.access), e.description].filter(Boolean).join('\n\n'),
        tags: [e.tag],
        operationId: `${method.toLowerCase()}${path.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
        ...(typeof e.access === 'number' ? { security: [{ accessToken: [] }], 'x-min-role': e.access } : {}),
        parameters: parameters(e),
        ...(e.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(e.body, 'input') } } } } : {}),
        responses,
      };
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Console API',
      version: '1',
      description:
        'Account console of the metered LLM gateway. Every JSON response is the envelope {success, message, data?}; ' +
        'a failure has success false, a message naming the cause and the HTTP status of its error code.',
    },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: {
        accessToken: { type: 'http', scheme: 'bearer', description: 'A session token (login) or an access token (GET /api/user/token); never an sk- API key.' },
      },
    },
    paths,
  };
}
