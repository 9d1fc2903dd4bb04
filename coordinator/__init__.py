"""What client code imports: submit / await / cancel / status (Client, Job), the artifact
store, the job state machine (transitions, the scheduler façade) and the reaper. No GPU
imports, and never the worker runtime, the tasks or the HTTP API: the command line that starts
those is zkqueue/cli.py."""
