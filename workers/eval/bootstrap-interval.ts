/** The bootstrap lives in shared/eval (the gate and `hat eval compare` pair items too); eval's files import it from here. */
export * from '../../shared/eval/bootstrap-interval';
