// Prints the demo API key (decrypted with KEY_SECRET) for the copy-paste command of `make run`; with
// `--logins`, the demo logins line instead (demoLogins: a password that is not the account's is not shown);
// with `--with-refusal`, the key and, on a second line, why it would be refused (empty when usable: disabled
// or expired by its owner), from one seed;
// with `--root <file>`, the root login line from the password generated into that file (rootLogin, likewise).
import { loadConfigOrExit } from '../../infra/config.js';
import { createSql } from '../../infra/postgres/client.js';
import { existsSync, readFileSync } from 'node:fs';
import { demoLogins, rootLogin, seedDemo } from './demo-seed.js';

const config = loadConfigOrExit('print-demo-key');
const sql = createSql(config, { max: 1 });
const at = process.argv.indexOf('--root');
const rootFile = at >= 0 ? process.argv[at + 1] ?? '' : null;
let out: string;
if (rootFile !== null) out = await rootLogin(sql, rootFile, existsSync(rootFile) ? readFileSync(rootFile, 'utf8').split('\n')[0]!.trim() : '');
else if (process.argv.includes('--logins')) out = await demoLogins(sql, config);
else {
  const seeded = await seedDemo(sql, config);
  out = process.argv.includes('--with-refusal') ? `${seeded.demoKey}\n${seeded.demoKeyRefusal}` : seeded.demoKey;
}
await sql.end();
process.stdout.write(out + '\n');
