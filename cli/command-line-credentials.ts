import type { Command } from 'commander';
import { refuseUrlCredentials } from '../shared/config/url-credentials';

/**
 * Refuses a command line whose options or arguments hold a URL with credentials (`--out
 * s3://AKIA:…@bucket/x`, `--endpoint http://h/v1?api_key=…`, `hat artifacts ls s3://…`), before
 * the command does anything: a key there would reach job data in Redis, log lines, pointers in
 * the artifact store and reports. Every option and argument is checked, so a new command that
 * takes a URI is covered without a line of its own. Exit 2 with `[URI_CREDENTIALS]`, naming the
 * option; the key is never repeated.
 */
export function refuseCommandLineCredentials(command: Command): void {
  for (const option of command.options) {
    const name = option.long ?? option.short ?? option.attributeName();
    for (const value of [command.getOptionValue(option.attributeName()) as unknown].flat())
      if (typeof value === 'string') refuseUrlCredentials(value, name);
  }
  command.registeredArguments.forEach((argument, index) => {
    for (const value of [command.processedArgs[index] as unknown].flat())
      if (typeof value === 'string') refuseUrlCredentials(value, `<${argument.name()}>`);
  });
}
