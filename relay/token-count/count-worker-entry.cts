// The file piscina loads in each counting thread. Piscina require()s its task file first, and on
// Node 20.19+ require() of an ES module (count-worker.js; the package is "type": "module") goes
// through require(esm), which now and then aborts the whole process with a V8 fatal error
// ("v8::Module::IsGraphAsync must be used on an instantiated module", seen in CI under load). This
// CommonJS file is require()d without that path and loads the counter with a plain import().
import type { CountResult, CountTask } from './count-worker.js' with { 'resolution-mode': 'import' };

let count: ((task: CountTask) => CountResult) | undefined;
const loading = import('./count-worker.js').then((m) => {
  if (typeof m.default !== 'function') throw new Error('count-worker.js has no default export to count with');
  count = m.default;
});
// Handled here, so that a module that fails to load fails each task (through loading.then below), not
// the thread with an unhandled rejection before any task came, which piscina reports as a pool error.
loading.catch(() => {});

function countTask(task: CountTask): CountResult | Promise<CountResult> {
  // After the first task the module is loaded: answer without a promise turn.
  if (count !== undefined) return count(task);
  return loading.then(() => count!(task));
}

export = countTask;
