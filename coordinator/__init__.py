"""What client code imports: submit / await / cancel / status, the CLI, the artifact store,
the fan-in barrier and the reaper. No GPU imports."""
