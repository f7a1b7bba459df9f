// Starts both payment sandboxes for `make run` and prints the options that point the console at them.
// Environment (all optional): EPAY_SANDBOX_PORT (3091), CARDPAY_SANDBOX_PORT (3092),
// EPAY_SANDBOX_PID (1000), EPAY_SANDBOX_KEY, CARDPAY_SANDBOX_API_SECRET, CARDPAY_SANDBOX_WEBHOOK_SECRET,
// CONSOLE_URL (http://127.0.0.1:3001; the card webhook is delivered to <CONSOLE_URL>/api/cardpay/webhook).
// This is the one sandbox module that reads process.env: it is a local tool, not a service.
// A port refused is one line and exit 78 (CONFIG_ERROR_EXIT_CODE, not started again by the local
// supervisor), as infra/config.ts says it for the services; a port taken is one line naming it and exit 1.
import { CONFIG_ERROR_EXIT_CODE } from '../../infra/config.js';
import { startCardpaySandbox } from './cardpay-sandbox.js';
import { startEpaySandbox } from './epay-sandbox.js';

const env = process.env;

/** A port variable: unset or blank is the default; otherwise whole decimal digits up to 65535. */
function portSetting(name: 'EPAY_SANDBOX_PORT' | 'CARDPAY_SANDBOX_PORT', fallback: number): number {
  const value = env[name];
  if (value === undefined || value.trim() === '') return fallback;
  if (/^[0-9]+$/.test(value) && Number(value) <= 65535) return Number(value);
  process.stderr.write(`payment-sandbox: invalid configuration: ${name}: expected a whole number from 0 to 65535, in decimal digits; got ${JSON.stringify(value.slice(0, 40))}\n`);
  process.exit(CONFIG_ERROR_EXIT_CODE);
}

const epayPort = portSetting('EPAY_SANDBOX_PORT', 3091);
const cardpayPort = portSetting('CARDPAY_SANDBOX_PORT', 3092);
const consoleUrl = (env.CONSOLE_URL ?? 'http://127.0.0.1:3001').replace(/\/+$/, '');

// A sandbox's server.listen failing (a port taken) is an 'error' event nobody listens to: thrown
// uncaught. Said in one line while starting.
const onStartFailure = (err: NodeJS.ErrnoException & { address?: string; port?: number }): void => {
  if (err.syscall === 'listen') {
    const name = err.port === epayPort ? 'EPAY_SANDBOX_PORT' : err.port === cardpayPort ? 'CARDPAY_SANDBOX_PORT' : 'its port';
    const why = err.code === 'EADDRINUSE' ? 'the port is in use (another process listens there)' : err.message;
    process.stderr.write(`payment-sandbox could not listen on ${err.address ?? '127.0.0.1'}:${err.port} (${name}): ${why}\n`);
  } else {
    process.stderr.write(`payment-sandbox failed to start: ${err.stack ?? String(err)}\n`);
  }
  process.exit(1);
};
process.on('uncaughtException', onStartFailure);
const epay = await startEpaySandbox({
  pid: env.EPAY_SANDBOX_PID ?? '1000',
  key: env.EPAY_SANDBOX_KEY ?? 'epay-sandbox-key',
  port: epayPort,
});
const cardpay = await startCardpaySandbox({
  apiSecret: env.CARDPAY_SANDBOX_API_SECRET ?? 'sk_test_cardpay_sandbox',
  webhookSecret: env.CARDPAY_SANDBOX_WEBHOOK_SECRET ?? 'whsec_cardpay_sandbox',
  webhookUrl: `${consoleUrl}/api/cardpay/webhook`,
  port: cardpayPort,
});
process.off('uncaughtException', onStartFailure);
process.stdout.write(
  `epay sandbox ${epay.url}, card sandbox ${cardpay.url}\n` +
  `options: PayAddress=${epay.url} EpayId=${env.EPAY_SANDBOX_PID ?? '1000'} CardpayApiAddress=${cardpay.url} ` +
  `(keys: EPAY_SANDBOX_KEY, CARDPAY_SANDBOX_API_SECRET, CARDPAY_SANDBOX_WEBHOOK_SECRET)\n`,
);
const stop = () => void Promise.allSettled([epay.close(), cardpay.close()]).then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
