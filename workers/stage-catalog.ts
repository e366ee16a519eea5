import type { AnyStage } from '../queues/stage-kit/define-stage';
import { registerStage } from '../queues/stage-kit/stage-registry';
// Model adapters beyond the built-in `openai` register on import: every process that loads the
// catalog (CLI, workers, sandboxed processors) can then build `scripted` and `onnx` clients.
import '../shared/models/onnx';
import '../shared/simulator/policies/scripted-adapter';
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
export const catalogStages: AnyStage[] = [noopStage, fanoutDemoStage, hashDemoStage, collectStage, augmentStage, shardStage, distillStage, rlStage, replayStage, evalStage, gateStage];

/** Registers the catalog (idempotent). */
export function registerCatalogStages(): void {
  for (const stage of catalogStages) registerStage(stage);
}
