/** Kept for importers written before the rename; import from './load-harness-from-uri'. */
export { loadHarnessFromUri } from './load-harness-from-uri';
