// The console's sealer of secret options (core/options/option-secrets.ts). Their readers take only a
// Db (loadOptionView, loadTopupSettings and the routes that call them), while opening needs
// KEY_SECRET, which only the config carries; a process has one KEY_SECRET, so building the console's
// context installs the sealer here once.
import { createOptionSealer, type OptionSealer } from '../../core/options/option-secrets.js';

let installed: { keySecret: string; sealer: OptionSealer } | undefined;

export function installOptionSealer(keySecret: string): OptionSealer {
  // Two secrets in one process would open each option with whichever came last.
  if (installed && installed.keySecret !== keySecret) throw new Error('the console was built twice in one process with different KEY_SECRETs');
  installed ??= { keySecret, sealer: createOptionSealer(keySecret) };
  return installed.sealer;
}

export function optionSealer(): OptionSealer {
  if (!installed) throw new Error('a secret option was read or written before the console context installed the option sealer (KEY_SECRET)');
  return installed.sealer;
}
