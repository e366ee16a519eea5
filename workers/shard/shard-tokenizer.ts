import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { readChatTemplate } from '../../queues/stage-kit/load-tokenizer-source';
import { BadInputError } from '../../shared/errors';
import { sha256Hex } from '../../shared/hash/hash';
import type { ChatTokenizer } from '../../shared/text/chat-tokenizer';
import { loadChatTokenizer, type TokenizerPreset } from '../../shared/text/load-chat-tokenizer';
import type { ShardTextSettings } from './shard-contract';

export { readChatTemplate };

/**
 * The target model's tokenizer with the template every part of the run uses. A template
 * override is read again by each part and must still have the sha256 `plan` recorded, so all
 * parts render with the same template even if the file changes mid-run.
 */
export async function loadShardTokenizer(
  settings: ShardTextSettings,
  openObject: StageDeps['openObject'],
): Promise<ChatTokenizer> {
  let chatTemplate: string | undefined;
  if (settings.chatTemplate) {
    chatTemplate = await readChatTemplate(settings.chatTemplate.uri, openObject);
    if (sha256Hex(chatTemplate) !== settings.chatTemplate.sha256) {
      throw new BadInputError(
        'CHAT_TEMPLATE_CHANGED',
        `tokenizer.chatTemplate ${settings.chatTemplate.uri} changed while the stage ran (sha256 ${sha256Hex(chatTemplate).slice(0, 12)}, planned ${settings.chatTemplate.sha256.slice(0, 12)}); rerun the stage`,
      );
    }
  }
  return loadChatTokenizer({
    ...(settings.tokenizer.modelDir !== undefined
      ? { modelDir: settings.tokenizer.modelDir }
      : { preset: (settings.tokenizer.preset ?? 'qwen3') as TokenizerPreset }),
    ...(chatTemplate !== undefined ? { chatTemplate, chatTemplateName: settings.chatTemplate!.uri } : {}),
    ...(settings.hookMessages !== undefined ? { hookMessages: settings.hookMessages } : {}),
  });
}
