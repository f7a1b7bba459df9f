// Prints the demo API key (decrypted with KEY_SECRET) for the copy-paste command of `make run`; with
// `--logins`, the demo logins line instead (demoLogins: a password that is not the account's is not shown);
// with `--refusal`, why the demo key would be refused ('' when usable: disabled or expired by its owner);
// with `--root <file>`, the root login line from the password generated into that file (rootLogin, likewise).
import { loadConfigOrExit } from '../../infra/config.js';
import { createSql } from '../../infra/postgres/client.js';
import { existsSync, readFileSync } from 'node:fs';
import { demoLogins, rootLogin, seedDemo } from './demo-seed.js';

const config = loadConfigOrExit('print-demo-key');
const sql = createSql(config, { max: 1 });
const rootFile = process.argv.indexOf('--root');
const out = rootFile >= 0
  ? await rootLogin(sql, process.argv[rootFile + 1]!, existsSync(process.argv[rootFile + 1]!) ? readFileSync(process.argv[rootFile + 1]!, 'utf8').split('\n')[0]!.trim() : '')
  : process.argv.includes('--logins') ? await demoLogins(sql, config)
    : process.argv.includes('--refusal') ? (await seedDemo(sql, config)).demoKeyRefusal : (await seedDemo(sql, config)).demoKey;
await sql.end();
process.stdout.write(out + '\n');
