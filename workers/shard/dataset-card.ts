import { formatPercent } from '../../shared/metrics/format-percent';
import type { ExportFormat, ShardSplit } from './shard-contract';
import { shardSplits } from './shard-contract';
import type { ShardStats } from './shard-stats';

/** Files of the dataset, relative to its root, as the card lists them. */
export interface CardFiles {
  packed: Partial<Record<ShardSplit, string[]>>;
  exports: Partial<Record<ShardSplit, Partial<Record<ExportFormat, string>>>>;
  verl: Partial<Record<ShardSplit, string[]>>;
  llamaFactoryInfo?: string;
}

const number = (value: number) => value.toLocaleString('en-US');
const percent = (value: number) => formatPercent(value);
const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function table(header: string[], rows: string[][]): string {
  return [
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((row) => `| ${row.join(' | ')} |`),
  ].join('\n');
}

/**
 * The dataset card (README.md at the dataset root): what went in, how it was rendered and
 * filtered, what came out per split, and how to load it. Holds no timestamps, so the same input
 * and seed give the same card.
 */
export function renderDatasetCard(stats: ShardStats, files: CardFiles): string {
  const splits = shardSplits.filter((split) => stats.splits[split] !== undefined);
  const { settings, tokenizer } = stats;
  const lines: string[] = [];
  lines.push('# HAT SFT dataset', '');
  lines.push(
    `Trajectories rendered by the chat template of \`${tokenizer.name}\` (template sha256 \`${tokenizer.templateHash.slice(0, 16)}\`) and tokenized by its own tokenizer ` +
      `(fingerprint \`${tokenizer.fingerprint.slice(0, 16)}\`). Loss on assistant output only (${settings.trainOn === 'all' ? 'every assistant turn' : 'the last assistant turn'}: ` +
      `content, tool calls and the end-of-turn token; never headers, user text or tool results)` +
      `${settings.enableThinking === undefined ? '' : `; enable_thinking=${settings.enableThinking}`}. ` +
      `Packed into sequences of ${number(settings.sequenceLength)} tokens${settings.packing ? ' (best-fit decreasing)' : ' (one sample per sequence)'}, padded with \`${tokenizer.padToken}\` (id ${tokenizer.padTokenId}), padding never trained.`,
    '',
  );

  const { template } = stats;
  lines.push(
    `Hook system messages: ${template.hookMessages === 'folded' ? `folded into \`<system-reminder>\` blocks in the neighbouring user turn or tool result (the template's system messages: ${template.systemMessages}); ${number(template.samplesWithFoldedHooks)} samples had hooks folded` : 'kept as system turns'}.` +
      (template.samplesWithMergedStart > 0
        ? ` ${number(template.samplesWithMergedStart)} samples start a trained span at a token that merges the served prompt's last characters (thinking template).`
        : ''),
    '',
  );
  for (const warning of template.warnings) lines.push(`> **Warning:** ${warning}.`, '');

  lines.push('## Mix', '');
  lines.push(
    'Weight = expected copies of each sample in the train split (validation and held-out splits take every sample once).',
    '',
  );
  lines.push(
    table(
      ['set', 'weight', 'records', 'accepted', 'duplicates', 'rejected', 'train samples'],
      stats.inputs.map((set) => [
        cell(set.name),
        String(set.weight),
        number(set.records),
        number(set.accepted),
        number(set.duplicates),
        number(set.rejected),
        number(set.trainSamples),
      ]),
    ),
    '',
  );

  lines.push('## Splits', '');
  lines.push(
    `By task: a task's draw from seed \`${settings.seed}\` below ${settings.validationFraction} sends all of its samples to validation, so no task is on both sides.` +
      (settings.heldOut.variantHashes.length + settings.heldOut.families.length > 0
        ? ` Held out (${settings.heldOut.split}): variants ${settings.heldOut.variantHashes.map((hash) => `\`${hash}\``).join(', ') || 'none'}, families ${settings.heldOut.families.map((family) => `\`${family}\``).join(', ') || 'none'}; the other samples of their tasks go to validation.`
        : ''),
    '',
  );
  lines.push(
    table(
      [
        'split',
        'tasks',
        'unique samples',
        'samples',
        'sequences',
        'tokens',
        'trained tokens',
        'fill',
        'best possible fill',
      ],
      splits.map((split) => {
        const figures = stats.splits[split]!;
        return [
          split,
          number(figures.tasks),
          number(figures.uniqueSamples),
          number(figures.samples),
          number(figures.sequences),
          number(figures.tokens),
          number(figures.trainedTokens),
          percent(figures.fill),
          percent(figures.fillUpperBound),
        ];
      }),
    ),
    '',
  );
  lines.push(
    'Fill = non-padding tokens / all tokens. Best possible fill: no packing of whole samples can do better (every sample longer than half a sequence needs one of its own).',
    '',
  );

  lines.push('## Lengths', '');
  const buckets = stats.splits[splits[0] ?? 'train']?.lengths ?? [];
  lines.push(
    table(
      ['tokens per sample', ...splits],
      buckets.map((bucket, index) => [
        `${number(bucket.from)}–${number(bucket.to - 1)}`,
        ...splits.map((split) => number(stats.splits[split]!.lengths[index]?.samples ?? 0)),
      ]),
    ),
    '',
  );

  lines.push('## Filters', '');
  lines.push(`- ${number(stats.records)} records read; ${number(stats.samples)} unique samples kept.`);
  lines.push(
    `- Exact duplicates dropped: ${number(stats.duplicates)} (normalized conversation: text trimmed, tool arguments parsed, call ids ignored; the first occurrence in input order is kept).`,
  );
  lines.push(
    `- Over ${number(settings.sequenceLength)} tokens (policy \`${settings.overLength}\`): ${number(stats.overLength.truncated)} truncated after the last assistant turn that fits (re-rendered), ${number(stats.overLength.dropped)} dropped.`,
  );
  const codes = Object.entries(stats.rejected).sort(([a], [b]) => (a < b ? -1 : 1));
  if (codes.length === 0) lines.push('- Rejected: none.');
  else {
    lines.push('- Rejected by code:', '');
    lines.push(
      table(
        ['code', 'samples', 'example'],
        codes.map(([code, count]) => {
          const example = stats.rejectionExamples.find((candidate) => candidate.code === code);
          return [`\`${code}\``, number(count), example ? cell(`${example.id}: ${example.reason}`) : ''];
        }),
      ),
    );
  }
  lines.push('');

  lines.push('## Files', '');
  lines.push(
    'Tokenized, packed sequences (Parquet; footer metadata: tokenizer fingerprint, template hash, sequence length, pad id):',
    '',
  );
  lines.push(
    '- `input_ids`, `labels` (token id where trained, -100 elsewhere; unshifted), `loss_mask` (1 = trained), `position_ids` (from 0 in every sample and in the padding): lists of the sequence length.',
  );
  lines.push(
    '- `cu_seqlens`: segment offsets, 0 first and the sequence length last (padding is the last segment when there is any); `source_ids`: the trajectory id of each sample (`@n` for weight copies); `folded_hook_messages`: per sample, the hook system messages the rendering with the target template folded into neighbouring turns (0: none); `num_samples`, `num_tokens` (non-padding), `num_trained`.',
    '',
  );
  for (const split of splits) {
    const packed = files.packed[split] ?? [];
    if (packed.length > 0)
      lines.push(
        `- ${split}: \`${packed[0]}\`${packed.length > 1 ? ` … \`${packed.at(-1)}\` (${packed.length} shards)` : ''}`,
      );
  }
  lines.push(
    '',
    "Conversations (gzip JSONL, `tools` as a JSON string, one line per sample, weight copies included; each line ends with its lineage `id`, `source_id`, `task_id` and `folded_hook_messages`, the hook system messages the target template's rendering folded, 0 when none):",
    '',
  );
  lines.push(
    '- `openai`: OpenAI chat messages as `apply_chat_template` reads them (tool-call arguments as objects); for verl and TRL.',
  );
  lines.push('- `ms-swift`: `tool_call` / `tool_response` roles (`swift sft --dataset <file>`).');
  lines.push(
    `- \`llama-factory\`: sharegpt with OpenAI-style tags; register with ${files.llamaFactoryInfo ? `\`${files.llamaFactoryInfo}\`` : 'a dataset_info.json entry'}.`,
  );
  lines.push(
    '- ms-swift and LLaMA-Factory take one system prompt: later system messages (hook injections) are folded into the neighbouring user-side turn; the `openai` files keep them in place.',
    '',
  );
  const exportRows = splits.flatMap((split) =>
    Object.entries(files.exports[split] ?? {}).map(([format, file]) => [split, format, `\`${file}\``]),
  );
  if (exportRows.length > 0) lines.push(table(['split', 'format', 'file'], exportRows), '');
  const formats = Object.entries(stats.exports).filter(([, figures]) => figures.records + figures.skipped > 0);
  if (formats.length > 0) {
    lines.push(
      table(
        ['format', 'records', 'skipped', 'system messages folded', 'text before calls dropped'],
        formats.map(([format, figures]) => [
          format,
          number(figures.records),
          number(figures.skipped),
          number(figures.foldedSystemMessages),
          number(figures.droppedCallText),
        ]),
      ),
      '',
    );
  }
  const verl = splits.flatMap((split) => (files.verl[split] ?? []).map((file) => [split, `\`${file}\``]));
  if (verl.length > 0) {
    lines.push(
      'verl-style multi-turn SFT Parquet: `messages` and `tools` as JSON text (one schema for every row), `tools_schema_hash`, `enable_thinking`, `data_source`, `folded_hook_messages`; `json.loads` both before `MultiTurnSFTDataset`.',
      '',
    );
    lines.push(table(['split', 'file'], verl), '');
  }

  lines.push('## Reproducibility', '');
  lines.push(
    `The same inputs, settings and seed give byte-identical files. Templates see \`strftime_now\` at ${settings.renderDate}.`,
    '',
  );
  return `${lines.join('\n')}\n`;
}
