"""What client code imports: submit / await / cancel / status, the CLI, the artifact store,
the job state machine (transitions, the scheduler façade) and the reaper. No GPU imports."""
