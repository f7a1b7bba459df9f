// `make seed`: the demo data (infra/seed/demo-seed.ts), unless SEED_DEMO=false.
import { loadConfig } from '../config.js';
import { createSql } from '../postgres/client.js';
import { ADMIN_USERNAME, DEMO_USERNAME, seedDemo } from './demo-seed.js';

const config = loadConfig();
if (!config.SEED_DEMO) {
  console.log('seed: SEED_DEMO=false, nothing to do');
} else {
  const sql = createSql(config, { max: 1 });
  const result = await seedDemo(sql, config);
  await sql.end();
  console.log(result.created.length ? `seed: created ${result.created.join(', ')}` : 'seed: demo data already present');
  console.log(`seed: console logins ${DEMO_USERNAME} / ${config.DEMO_PASSWORD} and ${ADMIN_USERNAME} / ${config.ADMIN_PASSWORD} (local defaults; set DEMO_PASSWORD, ADMIN_PASSWORD)`);
}
