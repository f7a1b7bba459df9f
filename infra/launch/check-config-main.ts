// `node dist/infra/launch/check-config-main.js`: the configuration of this environment checked once,
// before `make infra`/`make run`/`make cluster-up` start anything (infra/scripts/ensure-services.sh).
// A refused value is one line per variable and exit CONFIG_ERROR_EXIT_CODE (78), as every entry point
// says it (loadConfigOrExit); before this, RELAY_PORT=abc under `make run` was reported as "clickhouse:
// local server did not start" after 20 s of the embedded ClickHouse failing on it. Prints nothing when
// the configuration is accepted.
//
// The demo logins' passwords are generated later, by the recipes that need them
// (infra/scripts/local-secrets.sh): absent here, they count as given. A value set is checked as it is.
import { loadConfigOrExit } from '../config.js';

const env: Record<string, string | undefined> = { ...process.env };
for (const name of ['DEMO_PASSWORD', 'ADMIN_PASSWORD']) {
  if (env[name] === undefined || env[name]!.trim() === '') env[name] = 'generated-by-local-secrets';
}
loadConfigOrExit(process.argv[2] ?? 'config', env);
