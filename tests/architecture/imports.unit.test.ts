// The layering, checked from the source: every relative import or re-export of every .ts file,
// resolved to the top-level folder it lands in.
//
//   relay, billing, console-api   the three processes: never import one another
//   core                          what more than one process uses: imports none of the three, nor bench
//   infra                         the ground floor (config, clients, migrations, local services):
//                                 imports none of the three, nor core, nor bench
//   bench                         may import product code
//   console-web                   the browser console: talks to console-api over HTTP only, imports
//                                 no other folder (its API types are generated into it)
//   tests                         *.test.ts files anywhere and everything under tests/: may import anything
//
// Nothing but tests and bench imports bench. No exceptions: a violation is fixed by moving code, not
// by listing it here.
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';

const PROCESSES = ['relay', 'billing', 'console-api'] as const;
const SCANNED = ['core', 'infra', ...PROCESSES, 'bench', 'tests', 'console-web'] as const;

/** Top-level folders each folder's product (non-test) files must not import. */
const FORBIDDEN: Readonly<Record<string, readonly string[]>> = {
  relay: ['billing', 'console-api', 'bench', 'tests'],
  billing: ['relay', 'console-api', 'bench', 'tests'],
  'console-api': ['relay', 'billing', 'bench', 'tests'],
  core: [...PROCESSES, 'bench', 'tests'],
  infra: ['core', ...PROCESSES, 'bench', 'tests'],
  bench: ['tests'],
  'console-web': ['core', 'infra', ...PROCESSES, 'bench', 'tests'],
};

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(join(projectRoot(), dir), { withFileTypes: true })) {
    const path = posix.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules' && entry.name !== 'results') sourceFiles(path, out);
    } else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      out.push(path);
    }
  }
  return out;
}

/** The module specifiers of static imports, re-exports, side-effect imports and dynamic imports. */
export function importSpecifiers(source: string): string[] {
  const specs: string[] = [];
  const patterns = [
    /\b(?:import|export)\b[^;'"`]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /^\s*import\s*['"]([^'"]+)['"]/gm,
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const re of patterns) for (const m of source.matchAll(re)) specs.push(m[1]!);
  return specs;
}

function isTest(file: string): boolean {
  return file.startsWith('tests/') || /\.test\.tsx?$/.test(file);
}

export function violations(): string[] {
  const found: string[] = [];
  for (const top of SCANNED) {
    for (const file of sourceFiles(top)) {
      if (isTest(file)) continue;
      const forbidden = FORBIDDEN[top] ?? [];
      for (const spec of importSpecifiers(readFileSync(join(projectRoot(), file), 'utf8'))) {
        if (!spec.startsWith('.')) continue;
        const target = posix.normalize(posix.join(posix.dirname(file), spec)).split('/')[0]!;
        if (forbidden.includes(target)) found.push(`${file} imports ${target}/ (${spec})`);
      }
    }
  }
  return found;
}

describe('import rule', () => {
  it('finds the specifiers of every import form', () => {
    const src = [
      "import { a } from '../relay/x.js';",
      "import type {\n  B,\n  C,\n} from '../billing/y.js';",
      "export { d } from './d.js';",
      "export * from '../core/e.js';",
      "import '../infra/side-effect.js';",
      "const m = await import('../bench/f.js');",
      "import { z } from 'zod';",
    ].join('\n');
    expect(importSpecifiers(src)).toEqual(expect.arrayContaining([
      '../relay/x.js', '../billing/y.js', './d.js', '../core/e.js', '../infra/side-effect.js', '../bench/f.js', 'zod',
    ]));
  });

  it('no product folder imports a folder it must not', () => {
    expect(violations()).toEqual([]);
  });
});
