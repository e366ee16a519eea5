import type { Command } from 'commander';
import { listSchedules, removeSchedule, setSchedule } from '../../queues/runs/job-scheduler';
import { readConfigFile } from '../../queues/runs/run-config';
import type { CliContext } from '../cli-context';
import { configWarnings, withQueues } from '../command-support';
import type { RegisterCommand } from './index';

/** `hat schedule set <name> --cron <expr> --tz <zone> --config <file> | list | remove <name>`. */
export const registerScheduleCommand: RegisterCommand = (program: Command, context: CliContext) => {
  const schedule = program.command('schedule').description('start runs on a cron schedule (BullMQ job schedulers)');
  schedule
    .command('set')
    .description('create or replace a schedule; each firing starts one run with an id derived from the scheduled time')
    .argument('<name>', 'schedule name (lower-case letters, digits, "-")')
    .requiredOption('--cron <expr>', 'cron pattern, e.g. "0 2 * * *"')
    .requiredOption('--tz <zone>', 'IANA time zone, e.g. Europe/Berlin')
    .requiredOption('--config <file>', 'run config (YAML); validated now and at every firing')
    .option('--json', 'print JSON')
    .action(async (name: string, options: { cron: string; tz: string; config: string; json?: boolean }) => {
      const source = await readConfigFile(options.config);
      await withQueues(context, async (queues) => {
        const info = await setSchedule(
          queues,
          {
            name,
            cron: options.cron,
            tz: options.tz,
            config: source.value,
            configFile: options.config,
            locator: source.locator,
            onDeprecatedSpelling: configWarnings(context),
          },
          context.env,
          new Date(),
        );
        if (options.json) context.printJson(info);
        else
          context.print(
            `schedule ${info.name}: "${info.cron}" (${info.tz}), next run ${info.next ?? 'unknown'}, stages ${info.stages.join(', ')}`,
          );
      });
    });
  schedule
    .command('list')
    .description('every schedule with its next firing')
    .option('--json', 'print JSON')
    .action(async (options: { json?: boolean }) => {
      await withQueues(context, async (queues) => {
        const list = await listSchedules(queues);
        if (options.json) return context.printJson(list);
        if (list.length === 0) return context.print('no schedules');
        for (const item of list)
          context.print(
            `${item.name}  "${item.cron ?? ''}"  ${item.tz ?? 'UTC'}  next ${item.next ?? '-'}  ${item.configFile ?? ''}`,
          );
      });
    });
  schedule
    .command('remove')
    .description('remove a schedule (runs it already started are not affected)')
    .argument('<name>', 'schedule name')
    .action(async (name: string) => {
      await withQueues(context, async (queues) => {
        await removeSchedule(queues, name);
        context.print(`removed schedule ${name}`);
      });
    });
};
