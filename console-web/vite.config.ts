// Builds the web console into dist/console-web (console-api serves it at /). No inline script or
// style may be emitted: the console's Content-Security-Policy allows only the page's own files.
import { fileURLToPath } from 'node:url';
import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/',
  plugins: [preact()],
  // `npx vite --config console-web/vite.config.ts`: the pages with hot reload, the API of a running
  // console-api (make run) behind the same origin, so its cookies and CSRF check work unchanged.
  server: { proxy: { '/api': process.env.CONSOLE_API_URL ?? 'http://127.0.0.1:3001' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/console-web', import.meta.url)),
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    reportCompressedSize: true,
  },
});
