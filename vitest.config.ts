import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['{core,relay,billing,console-api,bench,infra,tests}/**/*.test.ts', 'console-web/**/*.test.{ts,tsx}'],
    globalSetup: ['infra/testing/global-setup.ts'],
    // uWebSockets.js and chdb are native addons: each test file gets its own process.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
