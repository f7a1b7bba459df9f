// Prints, after a vitest pass, which files and tests failed and why, from the pass's JSON report,
// and the files that took longest. CI keeps only the tail of a run's output; without this, a failure
// early in a long pass is out of sight by the time the run ends and the record says only "Error 1";
// and `make test` must stay well inside CI's time, so where that time goes is said each run.
import { readFileSync } from 'node:fs';

const [reportPath, passName] = process.argv.slice(2);
let report;
try {
  report = JSON.parse(readFileSync(reportPath, 'utf8'));
} catch (error) {
  console.log(`[${passName}] no readable test report at ${reportPath}: ${error.message}`);
  process.exit(0);
}
const firstLines = (text, n) => String(text).split('\n').slice(0, n).join('\n      ');
const failed = [];
for (const file of report.testResults ?? []) {
  const failedTests = (file.assertionResults ?? []).filter((test) => test.status === 'failed');
  if (file.status !== 'failed' && failedTests.length === 0) continue;
  failed.push(`  ${file.name}`);
  if (failedTests.length === 0 && file.message) failed.push(`      ${firstLines(file.message, 6)}`);
  for (const test of failedTests) {
    failed.push(`    × ${test.fullName}`);
    for (const message of test.failureMessages ?? []) failed.push(`      ${firstLines(message, 6)}`);
  }
}
if (failed.length === 0) {
  console.log(`[${passName}] no failed tests (${report.numPassedTests ?? '?'} passed)`);
} else {
  console.log(`[${passName}] FAILED: ${report.numFailedTests ?? '?'} tests, in these files:`);
  console.log(failed.join('\n'));
}

// A file's time: from its first test's start to its last test's end (set-up and tear-down included
// as vitest reports them: startTime to endTime).
const slowest = (report.testResults ?? [])
  .map((file) => ({ name: file.name, ms: (file.endTime ?? 0) - (file.startTime ?? 0) }))
  .filter((file) => file.ms > 0)
  .sort((a, b) => b.ms - a.ms)
  .slice(0, 10);
if (slowest.length > 0) {
  const cwd = process.cwd() + '/';
  console.log(`[${passName}] slowest files: ` + slowest.map((f) => `${f.name.replace(cwd, '')} ${(f.ms / 1000).toFixed(0)} s`).join(', '));
}
