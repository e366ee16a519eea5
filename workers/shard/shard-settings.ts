import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { sha256Hex } from '../../shared/hash/hash';
import type { ShardInput, ShardTextSettings } from './shard-contract';
import { readChatTemplate } from './shard-tokenizer';

/** An input set with its defaults filled in. */
export interface ResolvedInputSet {
  name: string;
  uris: string[];
  weight: number;
}

export function shardInputSets(input: ShardInput): ResolvedInputSet[] {
  return input.inputs.map((set, index) => ({
    name: ('name' in set ? set.name : undefined) ?? `set-${index + 1}`,
    uris: set.uri,
    weight: set.weight,
  }));
}

/** The settings every part tokenizes with; a template override is read once here to pin its sha256. */
export async function shardTextSettings(
  input: ShardInput,
  deps: Pick<StageDeps, 'openObject'>,
): Promise<ShardTextSettings> {
  const { preset, modelDir, chatTemplate, hookMessages } = input.tokenizer;
  return {
    tokenizer: modelDir !== undefined ? { modelDir } : { preset: preset ?? 'qwen3' },
    ...(chatTemplate !== undefined
      ? {
          chatTemplate: { uri: chatTemplate, sha256: sha256Hex(await readChatTemplate(chatTemplate, deps.openObject)) },
        }
      : {}),
    ...(hookMessages !== undefined ? { hookMessages } : {}),
    ...(input.enableThinking !== undefined ? { enableThinking: input.enableThinking } : {}),
    trainOn: input.trainOn,
    sequenceLength: input.sequenceLength,
    overLength: input.overLength,
    renderDate: input.renderDate,
    verifyEncodingEvery: input.verifyEncodingEvery,
  };
}
