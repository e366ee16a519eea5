import type { Command } from 'commander';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import type { CliContext } from '../cli-context';
import type { RegisterCommand } from './index';
import type { ArtifactStore, ObjectInfo } from '../../shared/artifacts/artifact-store';
import { openArtifactObject, openArtifactPrefix } from '../../shared/artifacts/create-artifact-store';
import { isGzipKey } from '../../shared/artifacts/jsonl-reader';
import { readManifest, type Manifest } from '../../shared/artifacts/manifest';

/** A subcommand of `hat artifacts`, registered on the `artifacts` command. */
type RegisterArtifactsSubcommand = (artifacts: Command, context: CliContext) => void;

async function using<T>(store: ArtifactStore, work: (store: ArtifactStore) => Promise<T>): Promise<T> {
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

/** 1234567 -> "1.2 MB": listings are read by people; --json keeps exact byte counts. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

const registerList: RegisterArtifactsSubcommand = (artifacts, context) => {
  artifacts
    .command('ls')
    .description('list the objects under a URI prefix, in key order (s3://bucket/prefix/ or file:///dir)')
    .argument('<uri>', 'prefix URI, e.g. s3://hat/runs/r1/ or file:///tmp/hat/runs/r1/collect/part-')
    .option('--json', 'print as JSON (exact bytes, ISO times)')
    .action(async (uri: string, options: { json?: boolean }) => {
      const { store, prefix } = await openArtifactPrefix(uri, context.env);
      const objects: ObjectInfo[] = await using(store, async () => {
        const found: ObjectInfo[] = [];
        for await (const info of store.list(prefix)) found.push(info);
        return found;
      });
      if (options.json) {
        return context.printJson(
          objects.map((info) => ({
            uri: info.uri,
            key: info.key,
            bytes: info.bytes,
            lastModified: info.lastModified?.toISOString(),
          })),
        );
      }
      for (const info of objects) {
        context.print(
          `${formatBytes(info.bytes).padStart(9)}  ${info.lastModified?.toISOString() ?? '-'.padEnd(24)}  ${info.uri}`,
        );
      }
      const total = objects.reduce((sum, info) => sum + info.bytes, 0);
      context.print(`${objects.length} object${objects.length === 1 ? '' : 's'}, ${formatBytes(total)}`);
    });
};

const registerCat: RegisterArtifactsSubcommand = (artifacts, context) => {
  artifacts
    .command('cat')
    .description('print an object to stdout, gunzipping .gz objects')
    .argument('<uri>', 'object URI, e.g. s3://hat/runs/r1/collect/part-0000.jsonl.gz')
    .option('--raw', 'print the stored bytes as they are (no gunzip)')
    .action(async (uri: string, options: { raw?: boolean }) => {
      const { store, key } = openArtifactObject(uri, context.env);
      await using(store, async () => {
        const source = await store.getStream(key);
        const stages = isGzipKey(key) && !options.raw ? [source, createGunzip()] : [source];
        try {
          await pipeline([...stages, context.stdout], { end: false });
        } catch (error) {
          // The reader went away (`| head`): not a failure of the command.
          if ((error as { code?: unknown }).code !== 'EPIPE') throw error;
        }
      });
    });
};

function printManifest(context: CliContext, uri: string, manifest: Manifest): void {
  context.print(`manifest ${uri}`);
  context.print(`  run:          ${manifest.runId}`);
  context.print(`  stage:        ${manifest.stage}`);
  context.print(`  created:      ${manifest.createdAt}`);
  context.print(`  code version: ${manifest.lineage.codeVersion}`);
  context.print(`  config hash:  ${manifest.lineage.configHash}`);
  const records = manifest.objects.reduce((sum, object) => sum + (object.records ?? 0), 0);
  const bytes = manifest.objects.reduce((sum, object) => sum + object.bytes, 0);
  context.print(`  objects (${manifest.objects.length}, ${records} records, ${formatBytes(bytes)}):`);
  for (const object of manifest.objects) {
    const count = object.records === undefined ? '' : `${object.records} records, `;
    context.print(
      `    ${object.uri}  (${object.format} v${object.schemaVersion}, ${count}${formatBytes(object.bytes)}, sha256 ${object.sha256.slice(0, 12)})`,
    );
  }
  context.print(`  inputs (${manifest.lineage.inputs.length}):`);
  for (const input of manifest.lineage.inputs) context.print(`    ${input.uri}  (sha256 ${input.sha256.slice(0, 12)})`);
  const stats = Object.entries(manifest.stats);
  if (stats.length > 0) {
    context.print('  stats:');
    for (const [name, value] of stats)
      context.print(`    ${name}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
  }
}

const registerManifest: RegisterArtifactsSubcommand = (artifacts, context) => {
  artifacts
    .command('manifest')
    .description('show a stage manifest (what it wrote, from which inputs, with which code and config)')
    .argument('<uri>', 'manifest URI, or the stage prefix holding manifest.json (s3://hat/runs/r1/collect/)')
    .option('--json', 'print the manifest JSON as stored')
    .action(async (uri: string, options: { json?: boolean }) => {
      const manifestUri = uri.endsWith('.json') ? uri : `${uri.replace(/\/+$/, '')}/manifest.json`;
      const { store, key } = openArtifactObject(manifestUri, context.env);
      const manifest = await using(store, () => readManifest(store, key));
      if (options.json) return context.printJson(manifest);
      printManifest(context, manifestUri, manifest);
    });
};

/** `hat artifacts ls | cat | manifest <uri>`: look at run artifacts on S3 or local disk. */
export const registerArtifactsCommand: RegisterCommand = (program, context) => {
  const artifacts = program
    .command('artifacts')
    .description('inspect run artifacts (s3:// or file://); S3 settings come from S3_ENDPOINT, S3_REGION, AWS_*');
  for (const register of [registerList, registerCat, registerManifest]) register(artifacts, context);
};
