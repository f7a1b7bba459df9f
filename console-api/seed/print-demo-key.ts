// Prints the demo API key (decrypted with KEY_SECRET) for the copy-paste command of `make run`.
import { loadConfigOrExit } from '../../infra/config.js';
import { createSql } from '../../infra/postgres/client.js';
import { seedDemo } from './demo-seed.js';

const config = loadConfigOrExit('print-demo-key');
const sql = createSql(config, { max: 1 });
const { demoKey } = await seedDemo(sql, config);
await sql.end();
process.stdout.write(demoKey + '\n');
