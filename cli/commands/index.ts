import type { Command } from 'commander';
import type { CliContext } from '../cli-context';

/** A CLI command module: one file per command, registered here. */
export type RegisterCommand = (program: Command, context: CliContext) => void;

/** Every command of `hat`. Add new command modules to this list. */
export const commandModules: RegisterCommand[] = [];
