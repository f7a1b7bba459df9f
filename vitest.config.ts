import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { testWorkers } from './infra/testing/test-workers.js';

export default defineConfig({
  test: {
    include: ['{core,relay,billing,console-api,bench,infra,tests}/**/*.test.ts', 'console-web/**/*.test.{ts,tsx}'],
    globalSetup: ['infra/testing/global-setup.ts'],
    // uWebSockets.js and chdb are native addons: each test file gets its own process.
    pool: 'forks',
    // Two files at a time at least: vitest's default (cores - 1) ran the files one after another on a
    // 2-core machine, while most of a file's time is spent waiting (for a stack to start, a timeout to
    // pass, the billing worker to settle). Measured on this machine, the whole first pass: 1,683 s
    // with one worker, 905 s with two, all 269 files green both ways (docs/performance.md, "Test time").
    // Each worker's files run on databases of its own (infra/testing/test-config.ts testDatabases).
    maxWorkers: testWorkers(availableParallelism()),
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
