"""The subcommands of ``latscope``, one module each (listed in :data:`latscope.cli.COMMANDS`).

A command module has the shape of a Glasgow applet's command line::

    def add_arguments(parser):   # its options, description and epilog on an argparse parser
    def run(args) -> int:        # the parsed options in, one library call with explicit
                                 # parameters out, its result printed; the exit status

The libraries below (``latscope.gateware``, ``latscope.capture``, ``latscope.analysis``) never
see an argparse ``Namespace`` and never import this package. Errors the user can act on are a
:class:`latscope.LatscopeError`, which :func:`latscope.cli.main` prints as one line (exit 2).
"""
