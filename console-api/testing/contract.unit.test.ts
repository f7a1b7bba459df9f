// The transcribed shapes (contract.ts) agree with the spec's tables, when the spec is present.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { ACCOUNT, GROUP_ENTRY, type JsonType, LOG_ENTRY, PAY_METHOD, type Shape, shapeProblems, TOPUP_INFO, TOPUP_ORDER, USAGE_STAT } from './contract.js';

const SPEC = join(projectRoot(), '../shared/spec/interface.md');

/** Rows `| field | type | ... |` of the first table after `### <heading>`. */
function table(spec: string, heading: string): [string, string][] {
  const start = spec.indexOf(`### ${heading}`);
  if (start < 0) throw new Error(`no section ${heading}`);
  const lines = spec.slice(start).split('\n').slice(1);
  const rows: [string, string][] = [];
  let inTable = false;
  for (const line of lines) {
    if (line.startsWith('|')) {
      inTable = true;
      const cells = line.split('|').slice(1, -1).map((c) => c.trim());
      if (cells[0] === 'Field' || /^-+$/.test(cells[0] ?? '')) continue;
      rows.push([cells[0]!, cells[1]!]);
    } else if (inTable) break;
  }
  return rows;
}

function typeOf(text: string): JsonType | JsonType[] {
  if (text.startsWith('number, or string')) return ['number', 'string'];
  if (text === 'array or null') return ['array', 'null'];
  if (text === 'number[]') return 'array';
  return text as JsonType;
}

function shapeFromSpec(rows: [string, string][], prefix?: string): Shape {
  const out: Shape = {};
  for (const [field, type] of rows) {
    if (prefix ? !field.startsWith(prefix) : field.includes('[]')) continue;
    for (const name of field.split(',').map((f) => f.trim())) out[prefix ? name.slice(prefix.length) : name] = typeOf(type);
  }
  return out;
}

describe.skipIf(!existsSync(SPEC))('contract transcription', () => {
  const spec = existsSync(SPEC) ? readFileSync(SPEC, 'utf8') : '';
  it.each([
    ['Group entry', GROUP_ENTRY, undefined],
    ['Top-up configuration (returned in `data`)', TOPUP_INFO, undefined],
    ['Top-up configuration (returned in `data`)', PAY_METHOD, 'pay_methods[].'],
    ['Log entry', LOG_ENTRY, undefined],
    ['Usage statistics (returned in `data`)', USAGE_STAT, undefined],
    ['Account (returned in `data`)', ACCOUNT, undefined],
    ['Top-up order', TOPUP_ORDER, undefined],
  ] as const)('%s', (heading, shape, prefix) => {
    expect(shape).toEqual(shapeFromSpec(table(spec, heading), prefix));
  });
});

describe('shapeProblems', () => {
  it('reports missing, extra and mistyped fields; integers are numbers', () => {
    expect(shapeProblems({ a: 1, b: 1.5, c: 'x' }, { a: 'integer', b: 'number', c: 'string' })).toEqual([]);
    expect(shapeProblems({ a: 1.5, c: 1 }, { a: 'integer', b: 'string' })).toEqual([
      'data.a: expected integer, got number', 'data.b: missing', 'data.c: not in the contract',
    ]);
    expect(shapeProblems({ x: null }, { x: ['array', 'null'] })).toEqual([]);
  });
});
