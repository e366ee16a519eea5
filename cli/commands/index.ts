import type { Command } from 'commander';
import type { CliContext } from '../cli-context';
import { registerArtifactsCommand } from './artifacts';
import { registerCheckpointCommand } from './checkpoint';
import { registerDashboardCommand } from './dashboard';
import { registerHarnessCommand } from './harness';
import { registerModelsCommand } from './models';
import { registerDemoCommand } from './demo';
import { registerEvalCommand } from './eval';
import { registerRunCommand } from './run';
import { registerRunsCommand } from './runs';
import { registerScheduleCommand } from './schedule';
import { registerServeCommand } from './serve';
import { registerReplayCommand } from './replay';
import { registerStageCommand } from './stage';
import { registerTasksCommand } from './tasks';
import { registerTrainCommand } from './train';
import { registerWorkerCommand } from './worker';

/** A CLI command module: one file per command, registered here. */
export type RegisterCommand = (program: Command, context: CliContext) => void;

/** Every command of `hat`. Add new command modules to this list. */
export const commandModules: RegisterCommand[] = [
  registerArtifactsCommand,
  registerCheckpointCommand,
  registerDashboardCommand,
  registerHarnessCommand,
  registerModelsCommand,
  registerDemoCommand,
  registerEvalCommand,
  registerRunCommand,
  registerRunsCommand,
  registerScheduleCommand,
  registerServeCommand,
  registerReplayCommand,
  registerStageCommand,
  registerTasksCommand,
  registerTrainCommand,
  registerWorkerCommand,
];
