"""The handlers of the ``transformer`` subcommands: check the options, make one library call, print."""
