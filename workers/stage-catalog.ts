import type { AnyStage } from '../queues/stage-kit/define-stage';
import { registerStage } from '../queues/stage-kit/stage-registry';
import { registerModelAdapters } from './register-model-adapters';
import { augmentStage } from './augment/processor';
import { collectStage } from './collect/processor';
import { distillStage } from './distill/processor';
import { evalStage } from './eval/processor';
import { gateStage } from './gate/processor';
import { fanoutDemoStage } from './examples/fanout-demo/processor';
import { hashDemoStage } from './examples/hash-demo/processor';
import { noopStage } from './examples/noop/processor';
import { replayStage } from './replay/processor';
import { rlStage } from './rl/processor';
import { shardStage } from './shard/processor';

/**
 * Every stage `hat` knows, registered by the CLI, workers and sandboxed processors alike. Add a
 * pipeline stage here when it lands. The example stages (noop, fanout-demo, hash-demo) exist for
 * framework tests, benchmarks and the demo; they are not part of the pipeline.
 */
export const catalogStages: AnyStage[] = [
  noopStage,
  fanoutDemoStage,
  hashDemoStage,
  collectStage,
  augmentStage,
  shardStage,
  distillStage,
  rlStage,
  replayStage,
  evalStage,
  gateStage,
];

/**
 * What every process does at start-up (CLI, workers, sandboxed processors): registers the model
 * adapters, then the catalog's stages. Idempotent.
 */
export function registerCatalogStages(): void {
  registerModelAdapters();
  for (const stage of catalogStages) registerStage(stage);
}
