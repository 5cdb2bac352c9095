"""The options of the ``transformer`` command: what each subcommand accepts, and how its flags become settings.

Parsing is the command line's part (:mod:`transformer.cli` runs the commands): :mod:`.parser` holds the parser
whose errors are one line, :mod:`.search_options` the search flags shared by the commands that translate and
the :class:`~transformer.decoding.translator.Translator` they make, :mod:`.paths` the files and directories the
flags name, and :mod:`.training_commands` and :mod:`.translation_commands` each subcommand's options.
"""
