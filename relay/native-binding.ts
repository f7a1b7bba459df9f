// The uWebSockets.js package on npm falls back to a slow pure-JS server when its native binary does
// not load for this Node ABI, printing only a warning. The relay refuses to run on the fallback.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import uws from 'uWebSockets.js';

const require = createRequire(import.meta.url);

export function assertNativeUws(): void {
  const pkgDir = dirname(require.resolve('uWebSockets.js/package.json'));
  const binary = join(pkgDir, 'binaries', `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`);
  let native: unknown;
  try {
    native = require(binary);
  } catch (err) {
    throw new Error(`uWebSockets.js native binding did not load (${binary}): ${(err as Error).message}. ` +
      'Refusing to start on the slow JS fallback.');
  }
  if ((native as { App?: unknown }).App !== uws.App) {
    throw new Error('uWebSockets.js loaded its JS fallback instead of the native binding (UWS_USE_FALLBACK set?). Refusing to start.');
  }
}
