export * from './percentile';
export * from './metric-summary';
export * from './sample-set';
export * from './bootstrap';
export * from './prometheus-text';
export * from './spec-decode';
export * from './scrape-metrics';
