// `make seed`: the demo data (console-api/seed/demo-seed.ts), only when SEED_DEMO=true (make run and make
// seed set it; nothing else seeds logins with known passwords).
import { loadConfigOrExit } from '../../infra/config.js';
import { createSql } from '../../infra/postgres/client.js';
import { ADMIN_USERNAME, DEMO_USERNAME, seedDemo } from './demo-seed.js';

const config = loadConfigOrExit('seed');
if (!config.SEED_DEMO) {
  console.log('seed: SEED_DEMO is not true, nothing to do');
} else {
  const sql = createSql(config, { max: 1 });
  const result = await seedDemo(sql, config);
  await sql.end();
  console.log(result.created.length ? `seed: created ${result.created.join(', ')}` : 'seed: demo data already present');
  console.log(`seed: demo console logins (local demo data, passwords in .data/): ${DEMO_USERNAME} and ${ADMIN_USERNAME}`);
}
