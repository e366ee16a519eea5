import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { JsonlWriter, writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { HatError } from '../../shared/errors';
import type { ChatTokenizer } from '../../shared/text/chat-tokenizer';
import {
  tokenizeConversation,
  type TokenizedSample,
  type TokenizeOptions,
} from '../../shared/text/tokenize-conversation';
import type { ChatMessage, ToolSpec } from '../../shared/trajectory/messages';
import { trajectorySchema } from '../../shared/trajectory/trajectory';
import { readRecordRange } from '../../queues/stage-kit/stage-inputs';
import { trajectoryFloatFields } from '../../shared/text/trajectory-line';
import { conversationKey } from './conversation-key';
import { canonicalJson } from '../../shared/hash/hash';
import { exportBody, exportBodyJson, toolsJson } from './export-formats';
import { encodeTokens, partFileKeys, type PartEntry } from './part-files';
import type { ShardPartInput, ShardPartOutput, ShardTextSettings } from './shard-contract';
import { loadShardTokenizer } from './shard-tokenizer';
import { truncateToFit } from './truncate-conversation';

async function writeLines(store: StageDeps['store'], key: string, lines: string[]) {
  const writer = JsonlWriter.open(store, key, { level: 1 });
  for (const line of lines) await writer.writeLine(line);
  return writer.close();
}

/** Rejection reasons are kept for the dataset card's examples; longer ones are cut. */
const reasonLimit = 300;

/** Whether this sample's token ids are checked against the tokenizer's whole-text encoding (deterministic by key). */
function spotChecked(key: string, every: number): boolean {
  return every > 0 && Number.parseInt(key.slice(0, 8), 16) % every === 0;
}

interface Accepted {
  sample: TokenizedSample;
  messages: ChatMessage[];
  droppedMessages?: number;
  originalTokens?: number;
}

/** Tokenizes one conversation under the stage's settings; over-length samples are dropped or truncated. */
function tokenizeForShard(
  tokenizer: ChatTokenizer,
  messages: ChatMessage[],
  tools: ToolSpec[],
  settings: ShardTextSettings,
): Accepted | { code: string; reason: string } {
  const options: TokenizeOptions = {
    trainOn: settings.trainOn,
    now: new Date(settings.renderDate),
    ...(settings.enableThinking !== undefined ? { enableThinking: settings.enableThinking } : {}),
  };
  const result = tokenizeConversation(tokenizer, messages, tools, options);
  if (!result.ok) return { code: result.code, reason: result.reason };
  const length = result.sample.inputIds.length;
  if (length <= settings.sequenceLength) return { sample: result.sample, messages: result.sample.messages };
  const overLength = {
    code: 'OVER_LENGTH',
    reason: `${length} tokens, more than the sequence length ${settings.sequenceLength}`,
  };
  if (settings.overLength === 'drop') return overLength;
  const truncation = truncateToFit(tokenizer, messages, tools, options, settings.sequenceLength);
  if (!truncation)
    return { ...overLength, reason: `${overLength.reason}, and no prefix ending with an assistant turn fits` };
  return {
    sample: truncation.sample,
    messages: truncation.sample.messages,
    droppedMessages: truncation.droppedMessages,
    originalTokens: length,
  };
}

function mergedPrompt(sample: TokenizedSample): { mergedPromptChars?: number } {
  const chars = sample.assistantSpans.reduce((sum, span) => sum + (span.mergedPromptChars ?? 0), 0);
  return chars > 0 ? { mergedPromptChars: chars } : {};
}

/**
 * One part of the shard stage: reads its record range, keys every conversation for
 * deduplication (an earlier record of the part with the same key makes it a duplicate, not
 * tokenized), renders and tokenizes the rest with the target template and tokenizer, handles
 * over-length samples, and writes the part files (part-files.ts). Splits, weights and packing
 * need every part and happen at fan-in.
 */
export async function processShardPart(part: ShardPartInput, deps: StageDeps): Promise<ShardPartOutput> {
  const tokenizer = await loadShardTokenizer(part.text, deps.openObject);
  const { records, sha256 } = await readRecordRange(
    deps.openObject,
    part.source.uri,
    trajectorySchema,
    part.source.start,
    part.source.end,
    part.source.sha256,
    // Tool schemas are rendered: `"minimum": 1.0` stays a float, as Python reads it at serving time.
    { keepFloatsIn: trajectoryFloatFields },
  );
  const seen = new Set<string>();
  const entries: PartEntry[] = [];
  const tokenChunks: number[][] = [];
  let tokenCount = 0;
  let accepted = 0;
  const keys = partFileKeys(deps.output.key, deps.part?.id ?? `part-${part.index}`);
  const bodies = part.exportBodies.map((format) => ({
    format,
    writer: JsonlWriter.open(deps.store, keys.exportBodies(format), { level: 1 }),
  }));
  // The distinct tool lists of the part (a few harness variants): their JSON text is written once
  // (part-files.ts), the export bodies name them by index, and their canonical JSON is computed once.
  const toolLists = new Map<string, { index: number; canonical: string }>();
  try {
    for (const [offset, trajectory] of records.entries()) {
      if (deps.signal.aborted)
        throw new HatError('STAGE_ABORTED', `part ${part.index} of ${deps.stage} was interrupted`, { retryable: true });
      if (offset % 50 === 0) deps.progress({ done: offset, total: records.length });
      const toolsText = toolsJson(trajectory.tools);
      let toolList = toolLists.get(toolsText);
      if (!toolList) {
        toolList = { index: toolLists.size, canonical: canonicalJson(trajectory.tools) };
        toolLists.set(toolsText, toolList);
      }
      const key = conversationKey(trajectory.messages, trajectory.tools, toolList.canonical);
      const base = {
        record: part.source.start + offset,
        id: trajectory.id,
        taskId: trajectory.taskId,
        ...(trajectory.harness.variantHash !== undefined ? { variantHash: trajectory.harness.variantHash } : {}),
        ...(trajectory.harness.families !== undefined ? { families: trajectory.harness.families } : {}),
        key,
      };
      if (seen.has(key)) {
        entries.push({ ...base, status: 'duplicate' });
        continue;
      }
      seen.add(key);
      const outcome = tokenizeForShard(tokenizer, trajectory.messages, trajectory.tools, part.text);
      if (!('sample' in outcome)) {
        entries.push({ ...base, status: 'rejected', code: outcome.code, reason: outcome.reason.slice(0, reasonLimit) });
        continue;
      }
      const { sample } = outcome;
      if (spotChecked(key, part.text.verifyEncodingEvery)) {
        const expected = tokenizer.encode(sample.text);
        if (expected.length !== sample.inputIds.length || expected.some((id, index) => id !== sample.inputIds[index])) {
          throw new HatError(
            'TOKENIZATION_MISMATCH',
            `record ${base.record} of ${part.source.uri}: the segmented encoding differs from ${tokenizer.name}'s whole-text encoding; report it with the record, and set verifyEncodingEvery to 1 to find every such sample`,
          );
        }
      }
      const exportNotes: Record<string, [number, number]> = {};
      for (const { format, writer } of bodies) {
        const { body, notes } = exportBody(format, { messages: outcome.messages, tools: trajectory.tools });
        await writer.writeLine(`${toolList.index}\t${notes.skipped === undefined ? exportBodyJson(body) : 'null'}`);
        if (notes.foldedSystemMessages > 0 || notes.droppedCallText > 0)
          exportNotes[format] = [notes.foldedSystemMessages, notes.droppedCallText];
      }
      entries.push({
        ...base,
        status: 'ok',
        tokenOffset: tokenCount,
        tokenCount: sample.inputIds.length,
        trainedTokens: sample.lossMask.reduce((sum, bit) => sum + bit, 0),
        spans: sample.assistantSpans.map((span) => [span.tokenStart, span.tokenEnd] as [number, number]),
        ...(outcome.droppedMessages !== undefined
          ? { droppedMessages: outcome.droppedMessages, originalTokens: outcome.originalTokens }
          : {}),
        ...(sample.hookMessages.folded > 0 ? { foldedHookMessages: sample.hookMessages.folded } : {}),
        ...mergedPrompt(sample),
        ...(Object.keys(exportNotes).length > 0 ? { exportNotes } : {}),
      });
      accepted++;
      tokenChunks.push(sample.inputIds);
      tokenCount += sample.inputIds.length;
    }
  } catch (error) {
    await Promise.all(bodies.map(({ writer }) => writer.abort(error)));
    throw error;
  }
  const ids = new Int32Array(tokenCount);
  let position = 0;
  for (const chunk of tokenChunks) {
    ids.set(chunk, position);
    position += chunk.length;
  }
  const [entriesObject, toolsObject, tokensObject, bodyObjects] = await Promise.all([
    writeJsonl(deps.store, keys.entries, entries),
    writeLines(deps.store, keys.toolLists, [...toolLists.keys()]),
    deps.store.put(keys.tokens, encodeTokens(ids), { contentType: 'application/octet-stream' }),
    Promise.all(bodies.map(({ writer }) => writer.close())),
  ]);
  deps.progress({ done: records.length, total: records.length });
  const written = (object: { key: string; uri: string; sha256?: string; bytes: number }) => ({
    key: object.key,
    uri: object.uri,
    sha256: object.sha256 ?? '',
    bytes: object.bytes,
  });
  return {
    index: part.index,
    inputIndex: part.inputIndex,
    entries: { ...written(entriesObject), records: entriesObject.records },
    toolLists: { ...written(toolsObject), records: toolsObject.records },
    exportBodies: bodies.map(({ format }, index) => ({
      ...written(bodyObjects[index]),
      format,
      records: bodyObjects[index].records,
    })),
    tokens: { ...written(tokensObject), tokens: tokenCount },
    input: { uri: part.source.uri, sha256 },
    records: records.length,
    accepted,
    tokenizerFingerprint: tokenizer.fingerprint,
    templateHash: tokenizer.templateHash,
  };
}
