export * from './hat-error';
export * from './problems';
