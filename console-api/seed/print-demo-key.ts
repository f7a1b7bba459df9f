// Prints the demo API key (decrypted with KEY_SECRET) for the copy-paste command of `make run`; with
// `--logins`, the demo logins line instead (demoLogins: a password that is not the account's is not shown).
import { loadConfigOrExit } from '../../infra/config.js';
import { createSql } from '../../infra/postgres/client.js';
import { demoLogins, seedDemo } from './demo-seed.js';

const config = loadConfigOrExit('print-demo-key');
const sql = createSql(config, { max: 1 });
const out = process.argv.includes('--logins') ? await demoLogins(sql, config) : (await seedDemo(sql, config)).demoKey;
await sql.end();
process.stdout.write(out + '\n');
