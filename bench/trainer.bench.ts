/**
 * Trainer throughput (trainer/, Python): tokens/s of the SFT, OPD and RL updates of the demo-size
 * model with its remapped vocabulary (~3,000 rows) against the same model with the full Qwen3
 * output layer (151,669 rows), both measured in the same run on the same synthetic data shaped
 * like the pipeline's, printed as remapped/full per objective; eager vs sdpa attention on the SFT
 * samples; the ONNX export's time and ONNX-vs-PyTorch max |logit difference|; and the
 * token-in-token-out figure (max |difference| between the model's log-probs and onnxruntime's,
 * fed as the served sampler feeds it). The measuring is `python -m hat_trainer.bench`
 * (trainer/hat_trainer/bench.py, which runs train.py's own update loop); this wrapper runs it in
 * trainer/ with the arguments given here and prints its output. Prints ratios, never asserts on time.
 *
 *   node dist/bench/trainer.bench.js [--seconds-per-case 10] [--seq-len 4500] [--quick] [--json]
 *
 * The interpreter is HAT_TRAINER_PYTHON, else trainer/.venv/bin/python (`make trainer` builds it).
 * The defaults take about 3 minutes on an idle 2-core machine and up to ~12 GB of memory (the full
 * output layer's logits of a 4,800-token RL sequence); --quick (256-token sequences, 0.5 s a case)
 * takes under 30 s.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { trainerDirectory, trainerPython } from '../cli/command-trainer';

function missingInterpreter(python: string): string {
  return process.env.HAT_TRAINER_PYTHON === undefined
    ? `trainer bench: no trainer environment at ${python}; run \`make trainer\` (builds trainer/.venv), or set HAT_TRAINER_PYTHON`
    : `trainer bench: HAT_TRAINER_PYTHON=${python} cannot be run; point it at a Python with trainer/'s requirements, or unset it and run \`make trainer\``;
}

async function main(): Promise<void> {
  const python = trainerPython();
  if (process.env.HAT_TRAINER_PYTHON === undefined && !existsSync(python)) {
    console.error(missingInterpreter(python));
    process.exitCode = 1;
    return;
  }
  const child = spawn(python, ['-m', 'hat_trainer.bench', ...process.argv.slice(2)], {
    cwd: trainerDirectory(),
    stdio: 'inherit',
  });
  const code = await new Promise<number>((resolve, reject) => {
    child.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'ENOENT' || error.code === 'EACCES'
        ? reject(new Error(missingInterpreter(python)))
        : reject(error),
    );
    child.once('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 1 : 0)));
  });
  if (code !== 0) {
    console.error(`trainer bench: python -m hat_trainer.bench exited with ${code}`);
    process.exitCode = code;
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
