// Starts both payment sandboxes for `make run` and prints the options that point the console at them.
// Environment (all optional): EPAY_SANDBOX_PORT (3091), CARDPAY_SANDBOX_PORT (3092),
// EPAY_SANDBOX_PID (1000), EPAY_SANDBOX_KEY, CARDPAY_SANDBOX_API_SECRET, CARDPAY_SANDBOX_WEBHOOK_SECRET,
// CONSOLE_URL (http://127.0.0.1:3001; the card webhook is delivered to <CONSOLE_URL>/api/cardpay/webhook).
// This is the one sandbox module that reads process.env: it is a local tool, not a service.
import { startCardpaySandbox } from './cardpay-sandbox.js';
import { startEpaySandbox } from './epay-sandbox.js';

const env = process.env;
const consoleUrl = (env.CONSOLE_URL ?? 'http://127.0.0.1:3001').replace(/\/+$/, '');
const epay = await startEpaySandbox({
  pid: env.EPAY_SANDBOX_PID ?? '1000',
  key: env.EPAY_SANDBOX_KEY ?? 'epay-sandbox-key',
  port: Number(env.EPAY_SANDBOX_PORT ?? 3091),
});
const cardpay = await startCardpaySandbox({
  apiSecret: env.CARDPAY_SANDBOX_API_SECRET ?? 'sk_test_cardpay_sandbox',
  webhookSecret: env.CARDPAY_SANDBOX_WEBHOOK_SECRET ?? 'whsec_cardpay_sandbox',
  webhookUrl: `${consoleUrl}/api/cardpay/webhook`,
  port: Number(env.CARDPAY_SANDBOX_PORT ?? 3092),
});
process.stdout.write(
  `epay sandbox ${epay.url}, card sandbox ${cardpay.url}\n` +
  `options: PayAddress=${epay.url} EpayId=${env.EPAY_SANDBOX_PID ?? '1000'} CardpayApiAddress=${cardpay.url} ` +
  `(keys: EPAY_SANDBOX_KEY, CARDPAY_SANDBOX_API_SECRET, CARDPAY_SANDBOX_WEBHOOK_SECRET)\n`,
);
const stop = () => void Promise.allSettled([epay.close(), cardpay.close()]).then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
