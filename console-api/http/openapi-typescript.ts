// TypeScript types of the console API from its OpenAPI document, in the shape openapi-fetch reads
// (openapi-typescript's `paths` interface). openapi-typescript itself needs TypeScript 5; the
// document is ours and uses a small part of JSON Schema (what zod's toJSONSchema emits), so this
// covers that part and answers `unknown` for anything else. The web console's client is typed by
// the output (console-web/src/api/schema.gen.ts, written by write-web-api-types.ts at `make build`).

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  prefixItems?: Schema[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
};

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (name: string) => (IDENTIFIER.test(name) ? name : JSON.stringify(name));

export function schemaToType(s: Schema | boolean | undefined, indent = ''): string {
  if (s === undefined || s === true) return 'unknown';
  if (s === false) return 'never';
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ') || 'never';
  const union = s.anyOf ?? s.oneOf;
  if (union) return union.map((u) => schemaToType(u, indent)).join(' | ');
  if (s.allOf) return s.allOf.map((u) => `(${schemaToType(u, indent)})`).join(' & ');
  if (Array.isArray(s.type)) return s.type.map((t) => schemaToType({ ...s, type: t }, indent)).join(' | ');
  switch (s.type) {
    case 'string': return 'string';
    case 'integer':
    case 'number': return 'number';
    case 'boolean': return 'boolean';
    case 'null': return 'null';
    case 'array':
      if (s.prefixItems) return `[${s.prefixItems.map((i) => schemaToType(i, indent)).join(', ')}]`;
      return `(${schemaToType(s.items, indent)})[]`;
    case 'object': {
      const inner = `${indent}  `;
      const required = new Set(s.required ?? []);
      const lines = Object.entries(s.properties ?? {}).map(
        ([name, p]) => `${inner}${key(name)}${required.has(name) ? '' : '?'}: ${schemaToType(p, inner)};`);
      const extra = s.additionalProperties;
      if (extra !== undefined && extra !== false) lines.push(`${inner}[key: string]: ${schemaToType(extra, inner)};`);
      else if (!s.properties && extra === undefined) lines.push(`${inner}[key: string]: unknown;`);
      return lines.length ? `{\n${lines.join('\n')}\n${indent}}` : 'Record<string, never>';
    }
    default: return 'unknown';
  }
}

interface Parameter { name: string; in: 'query' | 'path'; required: boolean; schema: Schema }
interface Operation {
  summary?: string;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
  'x-min-role'?: number;
}

function parametersType(params: Parameter[], where: 'query' | 'path', indent: string): string {
  const mine = params.filter((p) => p.in === where);
  if (mine.length === 0) return `${where}?: never;`;
  const inner = `${indent}  `;
  const body = mine.map((p) => `${inner}${key(p.name)}${p.required ? '' : '?'}: ${schemaToType(p.schema, inner)};`).join('\n');
  return `${where}${mine.some((p) => p.required) ? '' : '?'}: {\n${body}\n${indent}};`;
}

function contentType(content: Record<string, { schema: Schema }> | undefined, indent: string): string {
  if (!content) return 'never';
  const inner = `${indent}  `;
  const lines = Object.entries(content).map(([media, c]) => `${inner}${JSON.stringify(media)}: ${schemaToType(c.schema, inner)};`);
  return `{\n${lines.join('\n')}\n${indent}}`;
}

function operationType(op: Operation, indent: string): string {
  const i1 = `${indent}  `;
  const i2 = `${i1}  `;
  const params = op.parameters ?? [];
  const responses = Object.entries(op.responses).map(
    ([status, r]) => `${i2}${/^\d+$/.test(status) ? status : JSON.stringify(status)}: {\n${i2}  headers: { [name: string]: unknown };\n${i2}  content: ${contentType(r.content, `${i2}  `)};\n${i2}};`);
  return [
    '{',
    `${i1}parameters: {`,
    `${i2}${parametersType(params, 'query', i2)}`,
    `${i2}header?: never;`,
    `${i2}${parametersType(params, 'path', i2)}`,
    `${i2}cookie?: never;`,
    `${i1}};`,
    op.requestBody ? `${i1}requestBody: {\n${i2}content: ${contentType(op.requestBody.content, i2)};\n${i1}};` : `${i1}requestBody?: never;`,
    `${i1}responses: {`,
    ...responses,
    `${i1}};`,
    `${indent}}`,
  ].join('\n');
}

export function openApiToTypeScript(doc: { paths: Record<string, Record<string, Operation>> }): string {
  const out: string[] = [
    '// Generated from the console API\'s OpenAPI document by console-api/http/openapi-typescript.ts',
    '// (`make build`, or `node dist/console-api/http/write-web-api-types.js`). Do not edit.',
    '',
    'export interface paths {',
  ];
  for (const path of Object.keys(doc.paths).sort()) {
    out.push(`  ${JSON.stringify(path)}: {`);
    const item = doc.paths[path]!;
    for (const method of Object.keys(item).sort()) {
      const op = item[method]!;
      const role = op['x-min-role'] !== undefined ? ` (role >= ${op['x-min-role']})` : '';
      if (op.summary) out.push(`    /** ${op.summary.replace(/\*\//g, '* /')}${role} */`);
      out.push(`    ${method}: ${operationType(op, '    ')};`);
    }
    out.push('  };');
  }
  out.push('}', '');
  return out.join('\n');
}
