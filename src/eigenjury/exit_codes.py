"""Exit statuses of the `eigenjury` command."""

EXIT_OK = 0
EXIT_SOME_FAILED = 1  # the run finished, but some calls or graders ended in errors (in the output)
EXIT_USAGE = 2  # bad input: a located message says what to fix
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT): everything finished so far is kept
EXIT_TERMINATED = 143  # SIGTERM (128 + SIGTERM), handled as Ctrl-C is
