export * from './logprob-distribution';
export * from './token-sampler';
export * from './served-token-sampler';
export * from './in-process-token-sampler';
export * from './sampler-tokenizer-check';
export * from './token-exact-episode';
export * from './turn-text-parser';
